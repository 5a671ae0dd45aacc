package llmhedge

import (
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// Where each dialect's requests name provider-held objects.
func TestNamedObjects(t *testing.T) {
	cases := []struct {
		name string
		d    wire.Dialect
		body string
		want []wire.ObjectRef
	}{
		{"chat file part", dialectOpenAI,
			`{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-abc"}},{"type":"text","text":"hi"}]}]}`,
			[]wire.ObjectRef{{Kind: wire.ObjectFile, ID: "file-abc"}}},
		{"chat without objects", dialectOpenAI, `{"model":"m","messages":[{"role":"user","content":"file_id"}]}`, nil},
		{"responses conversation and input_file", dialectResponses,
			`{"model":"m","conversation":"conv_1","input":[{"role":"user","content":[{"type":"input_file","file_id":"file-x"}]}]}`,
			[]wire.ObjectRef{{Kind: wire.ObjectConversation, ID: "conv_1"}, {Kind: wire.ObjectFile, ID: "file-x"}}},
		{"responses conversation object", dialectResponses, `{"model":"m","conversation":{"id":"conv_2"},"input":"hi"}`,
			[]wire.ObjectRef{{Kind: wire.ObjectConversation, ID: "conv_2"}}},
		{"responses nested conversation key is not the request's", dialectResponses,
			`{"model":"m","metadata":{"conversation":"x"},"input":"hi"}`, nil},
		{"anthropic container and document file", dialectAnthropic,
			`{"model":"m","container":"container_9","messages":[{"role":"user","content":[{"type":"document","source":{"type":"file","file_id":"file_7"}}]}]}`,
			[]wire.ObjectRef{{Kind: wire.ObjectContainer, ID: "container_9"}, {Kind: wire.ObjectFile, ID: "file_7"}}},
		{"gemini cache and file", dialectGemini,
			`{"cachedContent":"cachedContents/c1","contents":[{"parts":[{"fileData":{"mimeType":"text/plain","fileUri":"https://generativelanguage.googleapis.com/v1beta/files/f1"}}]}]}`,
			[]wire.ObjectRef{{Kind: wire.ObjectCache, ID: "c1"}, {Kind: wire.ObjectFile, ID: "f1"}}},
		{"an id that is no plausible id", dialectOpenAI, `{"messages":[{"content":[{"file":{"file_id":"a/b"}}]}]}`, nil},
	}
	for _, tc := range cases {
		var buf [4]wire.ObjectRef
		if got := namedObjects(tc.d, []byte(tc.body), buf[:0]); !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A body naming no object costs each dialect's byte search, no allocation.
func TestNamedObjectsNoneAllocatesNothing(t *testing.T) {
	body := []byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hello"}]}`)
	for _, d := range dialects {
		if n := testing.AllocsPerRun(100, func() {
			var buf [4]wire.ObjectRef
			_ = namedObjects(d, body, buf[:0])
		}); n != 0 {
			t.Errorf("%s: %v allocations for a body naming no object", d, n)
		}
	}
}

func TestObjectOfPath(t *testing.T) {
	cases := []struct {
		path string
		want wire.ObjectRef
		ok   bool
	}{
		{"/v1/files/file-1", wire.ObjectRef{Kind: wire.ObjectFile, ID: "file-1"}, true},
		{"/v1/files/file-1/content", wire.ObjectRef{Kind: wire.ObjectFile, ID: "file-1"}, true},
		{"/v1/files", wire.ObjectRef{}, false},
		{"/v1/conversations/conv_1/items/msg_2", wire.ObjectRef{Kind: wire.ObjectConversation, ID: "conv_1"}, true},
		{"/v1/batches/batch_1/cancel", wire.ObjectRef{Kind: wire.ObjectBatch, ID: "batch_1"}, true},
		{"/v1/messages/batches/msgbatch_1/results", wire.ObjectRef{Kind: wire.ObjectBatch, ID: "msgbatch_1"}, true},
		{"/v1beta/cachedContents/c1", wire.ObjectRef{Kind: wire.ObjectCache, ID: "c1"}, true},
		{"/v1/models/gpt-4o", wire.ObjectRef{}, false},
	}
	for _, tc := range cases {
		if got, ok := objectOfPath(tc.path); got != tc.want || ok != tc.ok {
			t.Errorf("%s: got %v %v", tc.path, got, ok)
		}
	}
	if c, ok := createdCollection("POST", "/v1/files/"); !ok || c.kind != wire.ObjectFile {
		t.Error("POST /v1/files/ creates a file")
	}
	if _, ok := createdCollection("GET", "/v1/files"); ok {
		t.Error("GET /v1/files creates nothing")
	}
}

// The answers that say an object is not at a provider, in each API's
// words, and some that look alike but do not.
func TestObjectMissingShapes(t *testing.T) {
	file := wire.ObjectRef{Kind: wire.ObjectFile, ID: "file-42"}
	cases := []struct {
		o      wire.ObjectRef
		status int
		body   string
		want   bool
	}{
		{file, 404, `{"error":{"message":"No such File object: file-42","type":"invalid_request_error","param":"id","code":null}}`, true},
		{file, 400, `{"error":{"message":"The file 'file-42' does not exist.","type":"invalid_request_error"}}`, true},
		{file, 400, `{"error":{"message":"Invalid 'file-42': string too long.","type":"invalid_request_error"}}`, false},
		{file, 404, `{"type":"error","error":{"type":"not_found_error","message":"File not found."}}`, true},
		{file, 404, `{"type":"error","error":{"type":"not_found_error","message":"model: claude-x"}}`, false},
		{file, 403, `{"error":{"code":403,"message":"You do not have permission to access the File file-42 or it may not exist.","status":"PERMISSION_DENIED"}}`, true},
		{wire.ObjectRef{Kind: wire.ObjectCache, ID: "c1"}, 404, `{"error":{"code":404,"message":"CachedContent not found (or permission denied)","status":"NOT_FOUND"}}`, true},
		{wire.ObjectRef{Kind: wire.ObjectCache, ID: "c1"}, 403, `{"error":{"code":403,"message":"CachedContent not found (or permission denied)","status":"PERMISSION_DENIED"}}`, true},
		{file, 403, `{"error":{"code":403,"message":"Permission denied: the API key lacks access to the model","status":"PERMISSION_DENIED"}}`, false},
		{file, 403, `{"type":"error","error":{"type":"permission_error","message":"This file is not accessible."}}`, false},
		{file, 500, `{"error":{"message":"No such File object: file-42"}}`, false},
		{file, 429, `{"error":{"message":"file-42 not found"}}`, false},
	}
	for i, tc := range cases {
		if got := objectMissing(tc.o, tc.status, []byte(tc.body)); got != tc.want {
			t.Errorf("case %d (%d %s): got %v", i, tc.status, tc.body, got)
		}
	}
}

// BenchmarkPinKnownResponse is what a turn continuing a response this
// instance knows costs to route: the table lookup it always had, and for
// the other objects the byte search of its body. Discovery adds nothing.
//
//	go test -run '^$' -bench BenchmarkPin -benchmem .
func BenchmarkPinKnownResponse(b *testing.B) {
	base, _ := url.Parse("http://127.0.0.1:9001")
	p := &provider{name: "a", baseURL: base}
	h := &Handler{owners: newResponseOwners(1000), providers: []*provider{p}}
	r := httptest.NewRequest("POST", "/v1/responses", nil)
	r.Header.Set("Authorization", "Bearer sk-client")
	h.owners.remember(responseClient(r), "resp_1", ownerKey(p), clock())
	body := []byte(`{"model":"gpt-test","previous_response_id":"resp_1","input":"hello"}`)
	b.ReportAllocs()
	for b.Loop() {
		st := requestState{h: h, r: r, dialect: dialectResponses, start: time.Now()}
		h.pinResponse(&st, body)
		if st.pinned != p || st.discover != nil {
			b.Fatal("not pinned to the known holder")
		}
	}
}

// BenchmarkPinNoObject: a completion naming no object.
func BenchmarkPinNoObject(b *testing.B) {
	h := &Handler{owners: newResponseOwners(1000)}
	r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
	body := []byte(`{"model":"gpt-test","stream":true,"messages":[{"role":"user","content":"hello"}]}`)
	b.ReportAllocs()
	for b.Loop() {
		st := requestState{h: h, r: r, dialect: dialectOpenAI, start: time.Now()}
		h.pinResponse(&st, body)
	}
}
