package engine

import (
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
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
		if got := namedObjects(tc.d, []byte(tc.body), nil, buf[:0]); !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
		// The same through the parse's index of the top-level members.
		var top jsonscan.Top
		if body := []byte(tc.body); top.Index(body) == nil {
			if got := namedObjects(tc.d, body, &top, buf[:0]); !slices.Equal(got, tc.want) {
				t.Errorf("%s, indexed: got %v, want %v", tc.name, got, tc.want)
			}
		}
	}
}

// A body naming no object costs each dialect's byte search, no allocation.
func TestNamedObjectsNoneAllocatesNothing(t *testing.T) {
	body := []byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hello"}]}`)
	for _, d := range dialects {
		if n := testing.AllocsPerRun(100, func() {
			var buf [4]wire.ObjectRef
			_ = namedObjects(d, body, nil, buf[:0])
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
	h := &Engine{owners: NewResponseOwners(1000), providers: []*provider{p}}
	r := httptest.NewRequest("POST", "/v1/responses", nil)
	r.Header.Set("Authorization", "Bearer sk-client")
	h.owners.remember(h.responseClient(r), "resp_1", ownerKey(p), clock())
	body := []byte(`{"model":"gpt-test","previous_response_id":"resp_1","input":"hello"}`)
	req := &wire.Request{}
	b.ReportAllocs()
	for b.Loop() {
		st := requestState{h: h, r: r, dialect: dialectResponses, start: time.Now(), req: req}
		pinResponse(&st, body)
		if st.pinned != p || st.discover != nil {
			b.Fatal("not pinned to the known holder")
		}
	}
}

// BenchmarkPinNoObject: a completion naming no object.
func BenchmarkPinNoObject(b *testing.B) {
	h := &Engine{owners: NewResponseOwners(1000)}
	r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
	body := []byte(`{"model":"gpt-test","stream":true,"messages":[{"role":"user","content":"hello"}]}`)
	req := &wire.Request{}
	b.ReportAllocs()
	for b.Loop() {
		st := requestState{h: h, r: r, dialect: dialectOpenAI, start: time.Now(), req: req}
		pinResponse(&st, body)
	}
}

// Objects are named only where each API defines them: an ordinary field
// of the same name (a tool call's input, metadata, a tool's schema) or a
// URL that merely holds "files/" names none; the content blocks and input
// items of the right type do.
func TestNamedObjectsOnlyWhereDefined(t *testing.T) {
	file := func(id string) []wire.ObjectRef { return []wire.ObjectRef{{Kind: wire.ObjectFile, ID: id}} }
	cases := []struct {
		name string
		d    wire.Dialect
		body string
		want []wire.ObjectRef
	}{
		{"anthropic tool_use input", dialectAnthropic,
			`{"model":"m","messages":[{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"fetch","input":{"file_id":"q3-report"}}]}]}`, nil},
		{"anthropic mcp_tool_use input", dialectAnthropic,
			`{"model":"m","messages":[{"role":"assistant","content":[{"type":"mcp_tool_use","id":"mcptoolu_1","name":"read","server_name":"s","input":{"file_id":"q3-report"}}]}]}`, nil},
		{"anthropic tool schema and metadata", dialectAnthropic,
			`{"model":"m","metadata":{"user_id":"u"},"tools":[{"name":"t","input_schema":{"type":"object","properties":{"file_id":{"type":"string","default":"q3"}}}}],"messages":[{"role":"user","content":"hi"}]}`, nil},
		{"anthropic image source of type base64", dialectAnthropic,
			`{"model":"m","messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA==","file_id":"nope"}}]}]}`, nil},
		{"anthropic image file", dialectAnthropic,
			`{"model":"m","messages":[{"role":"user","content":[{"type":"image","source":{"type":"file","file_id":"file_img"}}]}]}`, file("file_img")},
		{"anthropic container_upload", dialectAnthropic,
			`{"model":"m","messages":[{"role":"user","content":[{"type":"container_upload","file_id":"file_up"}]}]}`, file("file_up")},
		{"anthropic document in a tool_result", dialectAnthropic,
			`{"model":"m","messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"document","source":{"type":"file","file_id":"file_tr"}}]}]}]}`, file("file_tr")},
		{"chat metadata", dialectOpenAI,
			`{"model":"m","metadata":{"file_id":"q3-report"},"messages":[{"role":"user","content":"hi"}]}`, nil},
		{"chat tool parameters", dialectOpenAI,
			`{"model":"m","tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"x":{"const":{"file_id":"q3"}}}}}}],"messages":[{"role":"user","content":"hi"}]}`, nil},
		{"chat file part in a text part's place", dialectOpenAI,
			`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi","file":{"file_id":"q3"}}]}]}`, nil},
		{"responses function_call_output", dialectResponses,
			`{"model":"m","input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"{\"file_id\":\"q3\"}"}],"metadata":{"file_id":"q3"}}`, nil},
		{"responses input_image", dialectResponses,
			`{"model":"m","input":[{"role":"user","content":[{"type":"input_image","file_id":"file-img","detail":"auto"}]}]}`, file("file-img")},
		{"responses code_interpreter container", dialectResponses,
			`{"model":"m","tools":[{"type":"code_interpreter","container":"cntr_1"}],"input":"hi"}`,
			[]wire.ObjectRef{{Kind: wire.ObjectContainer, ID: "cntr_1"}}},
		{"gemini fileUri of a bucket", dialectGemini,
			`{"contents":[{"parts":[{"fileData":{"mimeType":"application/pdf","fileUri":"https://storage.googleapis.com/acme-public/files/q3.pdf"}}]}]}`, nil},
		{"gemini fileUri gs://", dialectGemini,
			`{"contents":[{"parts":[{"fileData":{"mimeType":"application/pdf","fileUri":"gs://bucket/files/x"}}]}]}`, nil},
		{"gemini fileUri in a function call's args", dialectGemini,
			`{"contents":[{"role":"model","parts":[{"functionCall":{"name":"f","args":{"fileUri":"https://generativelanguage.googleapis.com/v1beta/files/abc"}}}]}]}`, nil},
		{"gemini bare file name", dialectGemini,
			`{"contents":[{"parts":[{"fileData":{"fileUri":"files/abc-123"}}]}]}`, file("abc-123")},
		{"gemini cachedContent below the top", dialectGemini,
			`{"contents":[{"parts":[{"functionResponse":{"name":"f","response":{"cachedContent":"cachedContents/c9"}}}]}]}`, nil},
	}
	for _, tc := range cases {
		var buf [4]wire.ObjectRef
		if got := namedObjects(tc.d, []byte(tc.body), nil, buf[:0]); !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

// Each create answer is read in its own shape for the new object's id.
func TestCreatedObjectID(t *testing.T) {
	cases := []struct {
		method, path, answer string
		want                 wire.ObjectRef
	}{
		{"POST", "/v1/files", `{"id":"file-abc","object":"file","bytes":10,"created_at":1,"filename":"a.txt","purpose":"user_data"}`,
			wire.ObjectRef{Kind: wire.ObjectFile, ID: "file-abc"}},
		{"POST", "/v1/files", `{"id":"file_011CNha8iCJcU1wXNR6q4V8w","type":"file","filename":"a.txt","mime_type":"text/plain","size_bytes":10,"created_at":"2025-01-01T00:00:00Z","downloadable":false}`,
			wire.ObjectRef{Kind: wire.ObjectFile, ID: "file_011CNha8iCJcU1wXNR6q4V8w"}},
		{"POST", "/v1/conversations", `{"id":"conv_689667905b048191b4740501625afd940c7533ace33a2dab","object":"conversation","created_at":1,"metadata":{}}`,
			wire.ObjectRef{Kind: wire.ObjectConversation, ID: "conv_689667905b048191b4740501625afd940c7533ace33a2dab"}},
		{"POST", "/v1/batches", `{"id":"batch_abc123","object":"batch","endpoint":"/v1/chat/completions","input_file_id":"file-abc","status":"validating"}`,
			wire.ObjectRef{Kind: wire.ObjectBatch, ID: "batch_abc123"}},
		{"POST", "/v1/messages/batches", `{"id":"msgbatch_013Zva2CMHLNnXjNJJKqJ2EF","type":"message_batch","processing_status":"in_progress"}`,
			wire.ObjectRef{Kind: wire.ObjectBatch, ID: "msgbatch_013Zva2CMHLNnXjNJJKqJ2EF"}},
		{"POST", "/v1/containers", `{"id":"cntr_682e30645a488191b6363a0cbefc0f0a025ec61b66250591","object":"container","created_at":1,"status":"running","name":"c"}`,
			wire.ObjectRef{Kind: wire.ObjectContainer, ID: "cntr_682e30645a488191b6363a0cbefc0f0a025ec61b66250591"}},
		{"POST", "/v1beta/files", `{"file":{"name":"files/abc-123","displayName":"a","mimeType":"text/plain","sizeBytes":"10","uri":"https://generativelanguage.googleapis.com/v1beta/files/abc-123","state":"ACTIVE"}}`,
			wire.ObjectRef{Kind: wire.ObjectFile, ID: "abc-123"}},
		{"POST", "/upload/v1beta/files", `{"file":{"name":"files/up-9","mimeType":"text/plain","uri":"https://generativelanguage.googleapis.com/v1beta/files/up-9"}}`,
			wire.ObjectRef{Kind: wire.ObjectFile, ID: "up-9"}},
		{"POST", "/v1beta/cachedContents", `{"name":"cachedContents/4rmg1w1nm1xv","model":"models/gemini-2.0-flash-001","usageMetadata":{"totalTokenCount":1}}`,
			wire.ObjectRef{Kind: wire.ObjectCache, ID: "4rmg1w1nm1xv"}},
	}
	for _, tc := range cases {
		c, ok := createdCollection(tc.method, tc.path)
		if !ok {
			t.Errorf("%s %s: creates nothing", tc.method, tc.path)
			continue
		}
		if got := c.createdID([]byte(tc.answer)); got != tc.want {
			t.Errorf("%s %s: got %v, want %v", tc.method, tc.path, got, tc.want)
		}
	}
}
