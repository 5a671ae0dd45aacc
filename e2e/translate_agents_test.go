package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// The real agents through cross-vendor translation (issue 26): each
// agent's own vendor is down (every request 529), and the only provider
// that works speaks another vendor's format, with `translate` and its own
// key. The simulators speak only that format and script the tool loop.

// Claude Code reads a file with its Read tool through a pool whose only
// working provider is an OpenAI Chat Completions one translating
// Anthropic: both turns (the call, the answer quoting the file) are
// translated, streamed, and Claude Code exits 0 with the file's token.
func TestClaudeCodeTranslated(t *testing.T) {
	dir := t.TempDir()
	token := fmt.Sprintf("hedge-token-%x", time.Now().UnixNano())
	file := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(file, []byte(token+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	claude := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 529}}})
	gpt := newUpstream(t, sim.Config{Key: "sk-openai-own",
		ToolCalls:  []sim.ToolCall{{Name: "Read", Arguments: json.RawMessage(fmt.Sprintf(`{"file_path":%q}`, file))}},
		ToolAnswer: "The file holds: {result}"})
	p := startProxy(t, provider("claude", claude, "api anthropic")+
		provider("gpt", gpt, "api openai", "key sk-openai-own", "translate anthropic", "priority 1", "model * gpt-5")+
		"hedge off\n retry {\n same_provider 0\n }\n")

	out, res := runClaudeIn(t, p, dir, []string{"-p", "What does notes.txt say?", "--allowedTools", "Read"}, "CLAUDE_CODE_MAX_RETRIES=0")
	recs := xlAgentTrace(gpt, "/v1/chat/completions")
	if res.Exit != 0 || out.IsError || !strings.Contains(out.Result, token) || !strings.HasPrefix(out.Result, "The file holds:") {
		t.Fatalf("want exit 0 and the file's token %s in the answer, got is_error=%v result=%q\n%s%s\n%s", token, out.IsError, out.Result, recs, res, p.logs(t))
	}
	checkXLAgentLoop(t, gpt, "/v1/chat/completions", "Read")
	if n := len(messageRecs(claude)); n == 0 {
		t.Fatalf("the Anthropic provider was never tried: the translation served a request its own vendor should have seen first")
	}
}

// Codex runs a shell command through an Anthropic-only pool: its Responses
// provider is down, and an Anthropic Messages provider translating
// Responses serves both turns. Codex 0.171 offers its shell as the function
// exec_command {cmd}; the simulator calls it, Codex runs the command, and
// the answer quotes its output. Codex's hosted web_search tool and its
// multi_agent_v1 namespace of tools are turned off: Anthropic carries
// neither (docs/translation.md), and a request offering them is refused.
// Codex streams the answer's text: it reports no delta it could not place.
func TestCodexTranslated(t *testing.T) {
	dir := t.TempDir()
	token := fmt.Sprintf("hedge-token-%x", time.Now().UnixNano())
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte(token+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gpt := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 529}}})
	claude := newUpstream(t, sim.Config{Key: "sk-ant-own",
		ToolCalls:  []sim.ToolCall{{Name: "exec_command", Arguments: json.RawMessage(`{"cmd":"cat notes.txt"}`)}},
		ToolAnswer: "The command printed: {result}"})
	p := startProxy(t, provider("gpt", gpt, "api responses")+
		provider("claude", claude, "api anthropic", "key sk-ant-own", "translate responses", "priority 1", "model * claude-sonnet-4-5")+
		"hedge off\n retry {\n same_provider 0\n }\n")

	last, res := runCodexIn(t, p, dir, "What does notes.txt say?", "--dangerously-bypass-approvals-and-sandbox",
		"-c", `web_search="disabled"`, "-c", "features.multi_agent=false")
	if res.Exit != 0 || !strings.Contains(last, token) || !strings.HasPrefix(strings.TrimSpace(last), "The command printed:") {
		t.Fatalf("want exit 0 and the command's output %s in the answer, got last message %q\n%s%s\n%s", token, last, xlAgentTrace(claude, "/v1/messages"), res, p.logs(t))
	}
	checkXLAgentLoop(t, claude, "/v1/messages", "exec_command")
	// Codex drops a message item added without its content array, then
	// logs an error for every text delta into it: the answer arrives only
	// whole, at output_item.done.
	if strings.Contains(res.Stderr, "without active item") {
		t.Fatalf("Codex could not place the translated text deltas\n%s", res)
	}
}

// checkXLAgentLoop fails the test unless the translating provider's
// simulator saw the loop as scripted, in its own format: one call of the
// tool, then one request carrying its result, each answered 200.
func checkXLAgentLoop(t *testing.T, u *upstream, path, tool string) {
	t.Helper()
	var calls, results int
	for _, r := range u.Requests() {
		if r.Path != path || r.Status != 200 {
			continue
		}
		switch {
		case r.ToolCall == tool:
			calls++
		case r.ToolResult:
			results++
		}
	}
	if calls != 1 || results != 1 {
		t.Fatalf("the translating provider saw %d calls of %s and %d tool results on %s, want 1 and 1\n%s", calls, tool, results, path, xlAgentTrace(u, ""))
	}
}

// xlAgentTrace lists an upstream's requests (on path, or all), for failure
// messages.
func xlAgentTrace(u *upstream, path string) string {
	var b strings.Builder
	for _, r := range u.Requests() {
		if path == "" || r.Path == path {
			fmt.Fprintf(&b, "%s %s stream=%v status=%d call=%q result=%v\n", r.Method, r.Path, r.Stream, r.Status, r.ToolCall, r.ToolResult)
		}
	}
	return b.String()
}

// Claude Code through the Chat-only pool of TestClaudeCodeTranslated, whose
// stream of the Read call is cut after commit, mid arguments, once. No
// continuation crosses formats, so Claude Code gets an error event, never
// a call with half its arguments, and its non-streaming fallback carries on
// the loop: it exits 0 with the file's token. The request log line says
// what happened, a cut (stream_end upstream_cut), as it does for a native
// stream: not an error event the provider never sent.
func TestClaudeCodeTranslatedToolCallCut(t *testing.T) {
	dir := t.TempDir()
	token := fmt.Sprintf("hedge-token-%x", time.Now().UnixNano())
	file := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(file, []byte(token+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	claude := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 503}}})
	gpt := newUpstream(t, sim.Config{Key: "sk-openai-own",
		ToolCalls:  []sim.ToolCall{{Name: "Read", Arguments: json.RawMessage(fmt.Sprintf(`{"file_path":%q}`, file))}},
		ToolAnswer: "The file holds: {result}",
		Faults:     []sim.Fault{{Kind: sim.FaultCut, After: 2, Count: 1, Turn: sim.TurnToolCall}}})
	p := startProxy(t, provider("claude", claude, "api anthropic")+
		provider("gpt", gpt, "api openai", "key sk-openai-own", "translate anthropic", "priority 1", "model * gpt-5")+
		"hedge off\n retry {\n same_provider 0\n }\n")

	out, res := runClaudeIn(t, p, dir, []string{"-p", "What does notes.txt say?", "--allowedTools", "Read"}, "CLAUDE_CODE_MAX_RETRIES=0")
	if res.Exit != 0 || out.IsError || !strings.Contains(out.Result, token) {
		t.Fatalf("want exit 0 and the file's token %s in the answer, got is_error=%v result=%q\n%s%s\n%s", token, out.IsError, out.Result, xlAgentTrace(gpt, ""), res, p.logs(t))
	}
	var cut map[string]any
	for _, line := range streamLogLines(t, p, 3) {
		if line["outcome"] == "stream_error" {
			cut = line
		}
	}
	if cut == nil || cut["stream_end"] != "upstream_cut" {
		t.Fatalf("the cut stream's log line says stream_end %v, want upstream_cut\n%s", cut["stream_end"], p.logs(t))
	}
}

// noDoneChat is an OpenAI-compatible server whose streams send the text,
// the finish_reason and the usage chunk but no `data: [DONE]`; then it
// closes, or with hang keeps the connection open until the client leaves.
// seen lists its requests.
func noDoneChat(t *testing.T, hang bool) (url string, seen func() []string) {
	var mu sync.Mutex
	var reqs []string
	chat := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		reqs = append(reqs, fmt.Sprintf("%s stream=%v", r.URL.Path, strings.Contains(string(b), `"stream":true`)))
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		for _, c := range []string{
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-5","choices":[{"index":0,"delta":{"role":"assistant","content":"hello "},"finish_reason":null}]}`,
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-5","choices":[{"index":0,"delta":{"content":"from chat"},"finish_reason":null}]}`,
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-5","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-5","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}`,
		} {
			io.WriteString(w, "data: "+c+"\n\n")
		}
		if hang {
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}
	}))
	t.Cleanup(chat.Close)
	return chat.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(reqs)
	}
}

// Claude Code through a Chat provider (an OpenAI-compatible server) that
// ends its streams after the finish_reason and usage chunks without
// `data: [DONE]`, which the proxy takes as complete from a native Chat
// stream (docs/stream-safety.md). Translated, it is complete too: one
// streamed request, exit 0 with the text; before, every stream ended in
// an error event, Claude Code retried, and the provider's breaker opened.
// With hang the server then keeps the connection open: the answer is
// complete at the usage chunk, not held until the idle timeout (10 s
// here, then an error and Claude Code's retries: 40 s in all, before).
func TestClaudeCodeTranslatedChatWithoutDone(t *testing.T) {
	for _, hang := range []bool{false, true} {
		t.Run(fmt.Sprintf("hang=%v", hang), func(t *testing.T) {
			const text = "hello from chat"
			url, seen := noDoneChat(t, hang)
			claude := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 503}}})
			p := startProxy(t, provider("claude", claude, "api anthropic")+
				"\t\tprovider gpt "+url+" {\n\t\t\tapi openai\n\t\t\tkey sk-openai-own\n\t\t\ttranslate anthropic\n\t\t\tpriority 1\n\t\t\tmodel * gpt-5\n\t\t}\n"+
				"hedge off\n retry {\n same_provider 0\n }\n timeouts {\n idle 10s\n }\n")

			out, res := runClaude(t, p, "CLAUDE_CODE_MAX_RETRIES=0")
			if res.Exit != 0 || out.IsError || out.Result != text {
				t.Fatalf("want exit 0 and %q, got is_error=%v result=%q; the Chat server saw %v\n%s\n%s", text, out.IsError, out.Result, seen(), res, p.logs(t))
			}
			if got := seen(); len(got) != 1 || res.Took > 8*time.Second {
				t.Fatalf("the Chat server saw %v and Claude Code took %v; want one streamed request, answered at once", got, res.Took)
			}
		})
	}
}
