package wire

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
)

type topSeen struct {
	key  string
	s, e int
}

func topScan(scan func([]byte, func([]byte, int, int) bool) error, body []byte, stop int) ([]topSeen, error) {
	var out []topSeen
	err := scan(body, func(key []byte, s, e int) bool {
		out = append(out, topSeen{string(key), s, e})
		return len(out) != stop
	})
	return out, err
}

// The parse's index of the top-level members answers as a walk does: the
// same keys and ranges, in order, stopping where the reader stops; a
// copy of the body, or another body, is walked.
func TestRequestTopIndex(t *testing.T) {
	many := `{"model":"m"`
	for i := range 20 {
		many += fmt.Sprintf(`,"k%d":[%d,{"x":"y"}]`, i, i)
	}
	many += `}`
	for _, body := range []string{
		`{"model":"m"}`,
		` { "model" : "m" , "stream" : true , "store" : false , "metadata" : {"user_id":"u"} , "store" : true } `,
		`{"mod\u0065l":"m","st\u006fre":false,"prompt_cache_key":"k\"q"}`,
		`{"input":[{"role":"user","content":"` + strings.Repeat("a", 100<<10) + `"}],"model":"m","previous_response_id":"resp_1"}`,
		many,
	} {
		b := []byte(body)
		req, err := ParseRequestBody(b)
		if err != nil {
			t.Fatalf("%.60s: %v", body, err)
		}
		for stop := 0; stop <= 3; stop++ {
			walked, werr := topScan(jsonscan.ScanTopLevel, b, stop)
			indexed, ierr := topScan(req.Top.Scan, b, stop)
			if werr != nil || ierr != nil || fmt.Sprint(walked) != fmt.Sprint(indexed) {
				t.Fatalf("%.60s stop %d: walked %v %v, indexed %v %v", body, stop, walked, werr, indexed, ierr)
			}
			copied := *req
			other, oerr := topScan(copied.Top.Scan, bytes.Clone(b), stop)
			if oerr != nil || fmt.Sprint(walked) != fmt.Sprint(other) {
				t.Fatalf("%.60s stop %d: a copy of the body read %v %v", body, stop, other, oerr)
			}
		}
	}
	// a body the parse refused is not indexed
	var top jsonscan.Top
	if _, err := topScan(top.Scan, []byte(`{"a":1,}`), 0); err == nil {
		t.Fatal("an invalid body scanned without an error")
	}
}

// A small body is indexed without an allocation beyond the request's.
func TestRequestTopIndexAllocs(t *testing.T) {
	b := []byte(`{"model":"m","stream":true,"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`)
	with := testing.AllocsPerRun(100, func() { _, _ = ParseRequestBody(b) })
	if with > 2 {
		t.Errorf("ParseRequestBody allocates %v times", with)
	}
}
