package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// netTrap returns the environment that sends a CLI's HTTP(S) requests to
// any host but loopback (NO_PROXY, cliBaseEnv) through a proxy that refuses
// them and records what was asked; the test fails if anything was. The
// CLIs' own network checks (strace: their only connect is to the proxy)
// are in the comments of their helpers; this keeps them honest in CI.
func netTrap(t *testing.T) []string {
	t.Helper()
	var mu sync.Mutex
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.Method+" "+r.Host+r.URL.Path)
		mu.Unlock()
		http.Error(w, "no network in e2e", http.StatusForbidden)
	}))
	t.Cleanup(func() {
		srv.Close()
		mu.Lock()
		defer mu.Unlock()
		if len(asked) > 0 {
			t.Errorf("the CLI asked hosts besides the proxy: %v", slices.Clone(asked))
		}
	})
	return []string{
		"HTTP_PROXY=" + srv.URL, "HTTPS_PROXY=" + srv.URL, "ALL_PROXY=" + srv.URL,
		"http_proxy=" + srv.URL, "https_proxy=" + srv.URL, "all_proxy=" + srv.URL,
	}
}

// attemptsOn lists the requests on path of the named upstreams in the
// order they started, as "<name> stream" or "<name> plain".
func attemptsOn(ups map[string]*upstream, path string) []string {
	type rec struct {
		name string
		r    sim.RequestRecord
	}
	var all []rec
	for name, u := range ups {
		for _, r := range u.Requests() {
			if r.Path == path {
				all = append(all, rec{name, r})
			}
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].r.Start.Before(all[j].r.Start) })
	out := make([]string, len(all))
	for i, a := range all {
		kind := "plain"
		if a.r.Stream {
			kind = "stream"
		}
		out[i] = a.name + " " + kind
	}
	return out
}

// Gemini CLI through a pool whose Gemini provider is down (every request
// 503) and whose only working provider speaks another format, translating
// Gemini with its own key: api anthropic (Messages) or api openai (Chat
// Completions). The simulator, speaking only that format, answers the
// first turn with a call of the CLI's read_file tool {file_path} on a file
// of its workspace, and the turn carrying the result with a text quoting
// it. The CLI reads the file and exits 0 with the file's token in its
// answer; both turns reached the translating provider, streamed, with its
// key and model.
func TestGeminiCLITranslated(t *testing.T) {
	for _, tc := range []struct {
		name, api, key, model, path string
		keyOf                       func(sim.RequestRecord) string
	}{
		{"anthropic", "anthropic", "sk-ant-own", "claude-sonnet-4-5", "/v1/messages", func(r sim.RequestRecord) string { return r.APIKey }},
		{"openai", "openai", "sk-openai-own", "gpt-5", "/v1/chat/completions", func(r sim.RequestRecord) string { return r.Authorization }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			token := fmt.Sprintf("hedge-token-%x", time.Now().UnixNano())
			file := filepath.Join(dir, "notes.txt")
			if err := os.WriteFile(file, []byte(token+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			gem := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 503}}})
			other := newUpstream(t, sim.Config{Key: tc.key,
				ToolCalls:  []sim.ToolCall{{Name: "read_file", Arguments: json.RawMessage(fmt.Sprintf(`{"file_path":%q}`, file))}},
				ToolAnswer: "The file holds: {result}"})
			p := startProxy(t, provider("gemini", gem, "api gemini", "key "+geminiProviderKey)+
				provider(tc.name, other, "api "+tc.api, "key "+tc.key, "translate gemini", "priority 1", "model * "+tc.model)+
				"hedge off\n retry {\n same_provider 0\n }\n")

			t.Cleanup(func() {
				if t.Failed() {
					t.Log(p.logs(t))
				}
			})
			out, res := runGeminiIn(t, p.URL, dir, "What does notes.txt say?", netTrap(t)...)
			if res.Exit != 0 || len(out.Error) > 0 || !strings.Contains(out.Response, token) || !strings.HasPrefix(out.Response, "The file holds:") {
				t.Fatalf("want exit 0 and the file's token %s in the answer, got %q, error %s\n%s%s\n%s", token, out.Response, out.Error, xlAgentTrace(other, ""), res, p.logs(t))
			}
			checkXLAgentLoop(t, other, tc.path, "read_file")
			for _, r := range other.Requests() {
				if r.Path != tc.path || !strings.Contains(tc.keyOf(r), tc.key) || r.Model != tc.model || !r.Stream {
					t.Errorf("the %s provider saw %s %s model %q key %q stream %v: want streamed requests of its model with its own key", tc.name, r.Method, r.Path, r.Model, tc.keyOf(r), r.Stream)
				}
			}
			if n := len(geminiRecs(gem)); n != 2 {
				t.Fatalf("the Gemini provider saw %d requests, want 2: one per turn, each failed over\n%s", n, geminiTrace(map[string]*upstream{"gemini": gem}))
			}
		})
	}
}

// Codex through a pool of one OpenAI-compatible server (api chat: Chat
// Completions only, `translate responses`), its Responses provider down
// (529). Codex's Responses turns reach the server as Chat Completions; the
// simulator, speaking only Chat, calls Codex's shell (exec_command {cmd}),
// Codex runs it, and the answer quotes its output. Codex's hosted
// web_search and its multi-agent namespace are off, as in
// TestCodexTranslated: Chat carries neither.
func TestCodexChatTranslated(t *testing.T) {
	dir := t.TempDir()
	token := fmt.Sprintf("hedge-token-%x", time.Now().UnixNano())
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte(token+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gpt := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 529}}})
	chat := newUpstream(t, sim.Config{Key: "sk-chat-own",
		ToolCalls:  []sim.ToolCall{{Name: "exec_command", Arguments: json.RawMessage(`{"cmd":"cat notes.txt"}`)}},
		ToolAnswer: "The command printed: {result}"})
	p := startProxy(t, provider("gpt", gpt, "api responses")+
		provider("chat", chat, "api chat", "key sk-chat-own", "translate responses", "priority 1", "model * qwen3-coder")+
		"hedge off\n retry {\n same_provider 0\n }\n")

	last, res := runCodexEnv(t, p, dir, "What does notes.txt say?", netTrap(t), "--dangerously-bypass-approvals-and-sandbox",
		"-c", `web_search="disabled"`, "-c", "features.multi_agent=false")
	if res.Exit != 0 || !strings.Contains(last, token) || !strings.HasPrefix(strings.TrimSpace(last), "The command printed:") {
		t.Fatalf("want exit 0 and the command's output %s in the answer, got last message %q\n%s%s\n%s", token, last, xlAgentTrace(chat, ""), res, p.logs(t))
	}
	checkXLAgentLoop(t, chat, "/v1/chat/completions", "exec_command")
	for _, r := range chat.Requests() {
		if r.Path != "/v1/chat/completions" || r.Authorization != "Bearer sk-chat-own" || r.Model != "qwen3-coder" || !r.Stream {
			t.Errorf("the Chat server saw %s %s model %q authorization %q stream %v: want streamed Chat Completions of its model with its own key", r.Method, r.Path, r.Model, r.Authorization, r.Stream)
		}
	}
	if strings.Contains(res.Stderr, "without active item") {
		t.Fatalf("Codex could not place the translated text deltas\n%s", res)
	}
	if got := attemptsOn(map[string]*upstream{"gpt": gpt}, "/v1/responses"); len(got) != 2 {
		t.Fatalf("the Responses provider saw %v, want 2 requests: one per turn, each failed over", got)
	}
}
