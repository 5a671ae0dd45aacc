package engine

import (
	"slices"
	"testing"

	"github.com/llmhedge/caddy-llm-hedge/bench/agentbody"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// What the parse's walk saw of the object markers (jsonscan.Watch) gives
// the objects the byte search gives, in every dialect: the markers as
// keys, as values, escaped, inside other strings, at every depth.
func FuzzObjectsWatchAgreesWithSearch(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-abc"}}]}]}`,
		`{"model":"m","messages":[{"role":"user","content":"file_id"}]}`,
		`{"model":"m","messages":[{"role":"user","content":"say \"file_id\""}]}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"document","source":{"type":"file","file\u005fid":"file_7"}}]}]}`,
		`{"model":"m","container":"container_9","messages":[{"role":"user","content":[{"type":"document","source":{"type":"file","file_id":"file_7"}}]}]}`,
		`{"model":"m","conversation":"conv_1","input":[{"role":"user","content":[{"type":"input_file","file_id":"file-x"}]}]}`,
		`{"model":"m","tools":[{"type":"code_interpreter","container":{"type":"auto","file_ids":["file-1","file-2"]}}],"input":"hi"}`,
		`{"model":"m","tools":[{"type":"code_interpreter","container":"cntr_1"}],"input":"code_interpreter"}`,
		`{"model":"m","cachedContent":"cachedContents/c1","contents":[{"parts":[{"fileData":{"mimeType":"text/plain","fileUri":"https://generativelanguage.googleapis.com/v1beta/files/f1"}}]}]}`,
		`{"model":"m","contents":[{"parts":[{"file_data":{"file_uri":"files/f2"}}]}],"cached_content":"cachedContents/c2"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, d := range dialects {
			path := "/v1/x"
			if d == dialectGemini {
				path = "/v1beta/models/m:generateContent"
			}
			req, err := wire.ParseCompletion(d, path, "", body)
			if err != nil {
				continue
			}
			var a, b [8]wire.ObjectRef
			watched := namedObjects(d, body, &req.Top, a[:0])
			searched := namedObjects(d, body, nil, b[:0])
			if !slices.Equal(watched, searched) {
				t.Fatalf("%s: objects %v from the parse's watch, %v from the search, in %s", d, watched, searched, body)
			}
		}
	})
}

// The agent bodies name no object: by the watch, with no search.
func TestAgentBodiesNameNoObject(t *testing.T) {
	for _, f := range agentbody.Formats {
		d := map[string]wire.Dialect{"anthropic": dialectAnthropic, "chat": dialectOpenAI, "responses": dialectResponses, "gemini": dialectGemini}[f]
		body := agentbody.Body(f)
		req, err := wire.ParseCompletion(d, "/v1beta/models/m:streamGenerateContent", "alt=sse", body)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if w := req.Top.Marked(body); w == nil || w.Words == nil {
			t.Fatalf("%s: the parse kept no watch of the object markers", f)
		}
		var buf [4]wire.ObjectRef
		if got := namedObjects(d, body, &req.Top, buf[:0]); len(got) != 0 {
			t.Errorf("%s: objects %v", f, got)
		}
	}
}
