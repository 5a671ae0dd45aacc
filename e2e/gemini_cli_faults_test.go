package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// Gemini CLI (runGemini, e2e_gemini_cli_test.go) through the faults its
// users meet: a stream cut after commit, a slow first token, a tool loop
// across an outage.

// The primary's stream is cut after commit, once; the proxy continues it
// (replay-match on the secondary, which answers the same text) and the CLI
// prints the whole text from its one request.
func TestGeminiCLIStreamContinued(t *testing.T) {
	p, primary, secondary, ups := geminiPrimarySecondary(t,
		sim.Config{Text: geminiPrimaryText, Faults: []sim.Fault{{Kind: sim.FaultCut, After: 3, Count: 1}}},
		sim.Config{Text: geminiPrimaryText})
	out, res := runGemini(t, p.URL)
	if res.Exit != 0 || len(out.Error) > 0 || out.Response != geminiPrimaryText {
		t.Fatalf("want exit 0 and the whole text %q, got %q, error %s\n%s\n%s", geminiPrimaryText, out.Response, out.Error, geminiTrace(ups), res)
	}
	if np, ns := len(geminiRecs(primary)), len(geminiRecs(secondary)); np != 1 || ns != 1 {
		t.Fatalf("primary saw %d requests, secondary %d; want the cut stream and its one continuation\n%s", np, ns, geminiTrace(ups))
	}
}

// The primary's first token takes 3 s; the hedge fires after 200 ms and
// the CLI prints the secondary's answer.
func TestGeminiCLIHedge(t *testing.T) {
	primary := newUpstream(t, sim.Config{Text: geminiPrimaryText, FirstToken: caddyDur(3 * time.Second)})
	secondary := newUpstream(t, sim.Config{Text: geminiSecondaryText})
	p := startProxy(t, provider("primary", primary, "key "+geminiProviderKey, "priority 0")+
		provider("secondary", secondary, "key "+geminiProviderKey, "priority 1")+
		"hedge {\n after 200ms\n }\n")

	out, res := runGemini(t, p.URL)
	if res.Exit != 0 || len(out.Error) > 0 || out.Response != geminiSecondaryText {
		t.Fatalf("want exit 0 and the hedge's text %q, got %q, error %s\n%s", geminiSecondaryText, out.Response, out.Error, res)
	}
}

// The CLI reads a file with its read_file tool while the primary answers
// 503 to everything; the secondary's answer turn (the one carrying the
// functionResponse) is cut after commit once and continued. The CLI exits
// 0 with the file's token.
func TestGeminiCLIToolLoop(t *testing.T) {
	dir := t.TempDir()
	token := fmt.Sprintf("hedge-token-%x", time.Now().UnixNano())
	file := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(file, []byte(token+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	call := sim.ToolCall{Name: "read_file", Arguments: json.RawMessage(fmt.Sprintf(`{"file_path":%q}`, file))}
	script := sim.Config{ToolCalls: []sim.ToolCall{call}, ToolAnswer: "The file holds: {result}"}
	pc, sc := script, script
	pc.Faults = []sim.Fault{{Kind: sim.FaultStatus, Status: 503}}
	sc.Faults = []sim.Fault{{Kind: sim.FaultCut, After: 3, Count: 1, Turn: sim.TurnToolResult}}
	primary, secondary := newUpstream(t, pc), newUpstream(t, sc)
	p := startProxy(t, provider("primary", primary, "key "+geminiProviderKey, "priority 0")+
		provider("secondary", secondary, "key "+geminiProviderKey, "priority 1")+
		"hedge off\n retry {\n same_provider 0\n }\n")

	out, res := runGeminiIn(t, p.URL, dir, "What does notes.txt say?")
	ups := map[string]*upstream{"primary": primary, "secondary": secondary}
	if res.Exit != 0 || len(out.Error) > 0 || !strings.Contains(out.Response, token) || !strings.HasPrefix(out.Response, "The file holds:") {
		t.Fatalf("want exit 0 and the file's token %s in the answer, got %q, error %s\n%s\n%s", token, out.Response, out.Error, geminiTrace(ups), res)
	}
	var calls, results int
	for _, r := range geminiRecs(secondary) {
		switch {
		case r.ToolCall == "read_file" && r.Status == 200:
			calls++
		case r.ToolResult && r.Status == 200:
			results++
		}
	}
	if calls != 1 || results != 2 {
		t.Fatalf("the secondary saw %d calls and %d answer turns, want 1 and 2 (the cut answer and its continuation)\n%s", calls, results, geminiTrace(ups))
	}
}
