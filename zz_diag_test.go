package llmhedge_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
)

func capture(t *testing.T, name string) *proxy {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		os.WriteFile("/tmp/xagents-"+name+".json", b, 0o644)
		w.WriteHeader(400)
		w.Write([]byte(`{"type":"error","error":{"type":"invalid_request_error","message":"captured"}}`))
	}))
	t.Cleanup(srv.Close)
	return &proxy{URL: srv.URL}
}

func TestZZDiagClaude(t *testing.T) {
	runClaudeIn(t, capture(t, "claude"), "", []string{"-p", "What does notes.txt say?", "--allowedTools", "Read"}, "CLAUDE_CODE_MAX_RETRIES=0")
}

func TestZZDiagCodex(t *testing.T) {
	runCodexIn(t, capture(t, "codex"), "", "What does notes.txt say?", "--dangerously-bypass-approvals-and-sandbox")
}
