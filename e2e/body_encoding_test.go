package e2e

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// Compressed request bodies (docs/operations.md "Bad input"): gzip and
// zstd are decoded, bounded by max_body after decoding, and the provider
// gets the identity body; another coding is a 415 in the client's dialect.

// seenUpstream is a simulated provider that records the Content-Encoding
// and the body of every request it gets.
type seenUpstream struct {
	*upstream
	mu     sync.Mutex
	enc    []string
	paths  []string
	bodies [][]byte
}

func newSeenUpstream(t *testing.T) *seenUpstream {
	s := sim.New(sim.Config{Tokens: 9})
	u := &seenUpstream{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.enc, u.bodies = append(u.enc, r.Header.Get("Content-Encoding")), append(u.bodies, b)
		u.paths = append(u.paths, r.URL.EscapedPath())
		u.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(b))
		s.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	u.upstream = &upstream{Simulator: s, URL: srv.URL}
	return u
}

func gzipped(b []byte) []byte {
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return out.Bytes()
}

func zstded(t *testing.T, b []byte) []byte {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	return enc.EncodeAll(b, nil)
}

func postEncoded(t *testing.T, p *proxy, path, encoding string, body []byte) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctxTimeout(t, 10*time.Second), http.MethodPost, p.URL+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Content-Encoding", encoding)
	req.Header.Set("x-api-key", "k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, readAll(resp)
}

func TestCompressedRequestBodyDecoded(t *testing.T) {
	up := newSeenUpstream(t)
	p := startProxy(t, provider("only", up.upstream))
	messages := []byte(`{"model":"claude-x","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	responses := []byte(`{"model":"gpt-x","stream":true,"input":"hi"}`)
	cases := []struct {
		name, path, enc, done string
		plain, body           []byte
	}{
		{"messages gzip", "/v1/messages", "gzip", "message_stop", messages, gzipped(messages)},
		{"messages zstd", "/v1/messages", "zstd", "message_stop", messages, zstded(t, messages)},
		{"responses zstd (Codex)", "/v1/responses", "ZSTD", "response.completed", responses, zstded(t, responses)},
		{"identity", "/v1/messages", "identity", "message_stop", messages, messages},
	}
	for i, c := range cases {
		status, resp := postEncoded(t, p, c.path, c.enc, c.body)
		if status != http.StatusOK || !strings.Contains(resp, c.done) {
			t.Fatalf("%s: status %d, want 200 and a complete stream: %.300s", c.name, status, resp)
		}
		up.mu.Lock()
		enc, got := up.enc[i], up.bodies[i]
		up.mu.Unlock()
		if enc != "" || !bytes.Equal(got, c.plain) {
			t.Fatalf("%s: the provider got Content-Encoding %q and body %.200q, want the identity body", c.name, enc, got)
		}
	}
}

func TestCompressedRequestBodyRefused(t *testing.T) {
	up := newSeenUpstream(t)
	p := startProxy(t, provider("only", up.upstream)+"max_body 64KiB")
	big := []byte(`{"model":"claude-x","max_tokens":64,"messages":[{"role":"user","content":"` + strings.Repeat("a", 1<<20) + `"}]}`)
	ok := []byte(`{"model":"claude-x","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`)
	cases := []struct {
		name, enc string
		body      []byte
		status    int
		says      string
	}{
		{"corrupt gzip", "gzip", append(gzipped(ok)[:20], "garbage"...), http.StatusBadRequest, "gzip"},
		{"corrupt zstd", "zstd", []byte("not zstd at all"), http.StatusBadRequest, "zstd"},
		{"gzip expanding past max_body", "gzip", gzipped(big), http.StatusRequestEntityTooLarge, "max_body"},
		{"zstd expanding past max_body", "zstd", zstded(t, big), http.StatusRequestEntityTooLarge, "max_body"},
		{"brotli", "br", ok, http.StatusUnsupportedMediaType, `"br"`},
		{"two codings", "gzip, gzip", gzipped(gzipped(ok)), http.StatusUnsupportedMediaType, "gzip or zstd"},
	}
	for _, c := range cases {
		if len(c.body) > 64<<10 {
			t.Fatalf("%s: the compressed body (%d bytes) must be under max_body", c.name, len(c.body))
		}
		status, resp := postEncoded(t, p, "/v1/messages", c.enc, c.body)
		var e struct {
			Type  string `json:"type"`
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if status != c.status || json.Unmarshal([]byte(resp), &e) != nil || e.Type != "error" || !strings.Contains(e.Error.Message, c.says) {
			t.Fatalf("%s: status %d, want %d and an Anthropic error naming %q: %.300s", c.name, status, c.status, c.says, resp)
		}
	}
	if n := completions(up.upstream); n != 0 {
		t.Fatalf("%d refused bodies reached the provider", n)
	}
}
