package sim

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Gemini files and caches: created in the API's own shapes, readable by
// id here, 403 PERMISSION_DENIED elsewhere, for calls by id and for a
// generateContent naming them.
func TestGeminiObjects(t *testing.T) {
	holder, other := New(Config{}), New(Config{})
	do := func(s *Simulator, method, path, body string) (int, []byte) {
		t.Helper()
		w := httptest.NewRecorder()
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		s.ServeHTTP(w, r)
		return w.Code, w.Body.Bytes()
	}
	code, body := do(holder, http.MethodPost, "/v1beta/files", `{"file":{"displayName":"notes"}}`)
	var created struct {
		File struct{ Name, URI string } `json:"file"`
	}
	if err := json.Unmarshal(body, &created); code != 200 || err != nil || !strings.HasPrefix(created.File.Name, "files/") ||
		created.File.URI != geminiFileURI+strings.TrimPrefix(created.File.Name, "files/") {
		t.Fatalf("create file: %d %s", code, body)
	}
	code, body = do(holder, http.MethodPost, "/v1beta/cachedContents", `{"model":"models/gemini-test"}`)
	var cache struct{ Name string }
	if err := json.Unmarshal(body, &cache); code != 200 || err != nil || !strings.HasPrefix(cache.Name, "cachedContents/") {
		t.Fatalf("create cache: %d %s", code, body)
	}
	for _, name := range []string{created.File.Name, cache.Name} {
		if code, body := do(holder, http.MethodGet, "/v1beta/"+name, ""); code != 200 {
			t.Errorf("GET %s at its holder: %d %s", name, code, body)
		}
		if code, body := do(other, http.MethodGet, "/v1beta/"+name, ""); code != 403 || !strings.Contains(string(body), `"PERMISSION_DENIED"`) {
			t.Errorf("GET %s elsewhere: %d %s", name, code, body)
		}
	}
	gen := `{"contents":[{"role":"user","parts":[{"fileData":{"fileUri":"` + created.File.URI + `"}},{"text":"hi"}]}]}`
	if code, body := do(holder, http.MethodPost, "/v1beta/models/gemini-test:generateContent", gen); code != 200 {
		t.Errorf("generateContent with the file at its holder: %d %s", code, body)
	}
	if code, body := do(other, http.MethodPost, "/v1beta/models/gemini-test:generateContent", gen); code != 403 {
		t.Errorf("generateContent with the file elsewhere: %d %s", code, body)
	}
	bucket := `{"contents":[{"role":"user","parts":[{"fileData":{"fileUri":"gs://bucket/files/x"}},{"text":"hi"}]}]}`
	if code, body := do(other, http.MethodPost, "/v1beta/models/gemini-test:generateContent", bucket); code != 200 {
		t.Errorf("generateContent with a bucket's file: %d %s", code, body)
	}
	cached := `{"cachedContent":"` + cache.Name + `","contents":[{"role":"user","parts":[{"text":"hi"}]}]}`
	if code, _ := do(other, http.MethodPost, "/v1beta/models/gemini-test:generateContent", cached); code != 403 {
		t.Errorf("generateContent with the cache elsewhere: %d", code)
	}
}

// A file_id in a tool call's input is no file: the simulator reads files
// only in the content blocks that take one.
func TestFileIDInToolInputIsNoFile(t *testing.T) {
	s := New(Config{})
	body := `{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"fetch"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{"file_id":"q3"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}]}`
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/v1/messages", strings.NewReader(body))
	r.Header.Set("Anthropic-Version", "2023-06-01")
	s.ServeHTTP(w, r)
	if w.Code != 200 {
		t.Fatalf("tool input file_id: %d %s", w.Code, w.Body)
	}
	doc := `{"model":"m","max_tokens":8,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"file","file_id":"file_nope"}}]}]}`
	w = httptest.NewRecorder()
	r = httptest.NewRequest(http.MethodPost, "/v1/messages", strings.NewReader(doc))
	r.Header.Set("Anthropic-Version", "2023-06-01")
	s.ServeHTTP(w, r)
	if w.Code != 404 {
		t.Fatalf("document naming an unknown file: %d %s", w.Code, w.Body)
	}
}
