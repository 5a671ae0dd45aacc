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

// Codex (the real CLI, pinned in clients_test.go) is the client of a real
// Caddy with llm_hedge in front of two simulated OpenAI providers. Codex
// speaks only the Responses API: these tests need the proxy's and the
// simulator's /v1/responses.
//
// `codex exec` sends one request per turn, POST /v1/responses with stream
// true, store false and no previous_response_id (the whole conversation is in
// input), and nothing else: no model list, no telemetry, and with the
// config below no update check and no plugin sync (which otherwise resolves
// api.github.com and chatgpt.com); under strace its only connect is to the
// proxy. With request_max_retries and
// stream_max_retries at 0 it never retries by itself, so every completion
// request the simulators count is the proxy's doing.

const (
	codexPrimaryText   = "primary says one two three four five six seven."
	codexSecondaryText = "secondary answers alpha bravo charlie delta echo foxtrot golf."
)

// codexConfig is ~/.codex/config.toml: one provider, the proxy, selected with
// its model; Codex's own retries off.
const codexConfig = `model = "gpt-test"
model_provider = "hedge"
check_for_update_on_startup = false

[analytics]
enabled = false

[feedback]
enabled = false

# The curated plugin sync resolves api.github.com and chatgpt.com at start.
[features]
plugins = false

[model_providers.hedge]
name = "llm_hedge"
base_url = "%s/v1"
env_key = "HEDGE_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
`

// runCodex runs `codex exec --skip-git-repo-check <prompt>` against the proxy
// with a fresh home holding only the config, and returns the last agent
// message Codex wrote (empty if none). --strict-config makes a config key this
// Codex does not know an error rather than a silent default.
func runCodex(t *testing.T, p *proxy, extraArgs ...string) (last string, res cliResult) {
	t.Helper()
	return runCodexIn(t, p, "", "Say hello.", extraArgs...)
}

// runCodexIn is runCodex in dir (default: the fresh home) with prompt.
func runCodexIn(t *testing.T, p *proxy, dir, prompt string, extraArgs ...string) (last string, res cliResult) {
	t.Helper()
	return runCodexEnv(t, p, dir, prompt, nil, extraArgs...)
}

// runCodexEnv is runCodexIn with extraEnv.
func runCodexEnv(t *testing.T, p *proxy, dir, prompt string, extraEnv []string, extraArgs ...string) (last string, res cliResult) {
	t.Helper()
	bin := codexCLI.binary(t)
	home, env := cliHome(t)
	if dir == "" {
		dir = home
	}
	codexHome := filepath.Join(home, ".codex")
	if err := os.MkdirAll(codexHome, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), fmt.Appendf(nil, codexConfig, p.URL), 0o600); err != nil {
		t.Fatal(err)
	}
	env = append(env, "CODEX_HOME="+codexHome, "HEDGE_API_KEY=sk-test-client")
	env = append(env, extraEnv...)
	lastFile := filepath.Join(home, "last-message.txt")
	args := append([]string{"exec", "--strict-config", "--skip-git-repo-check", "--output-last-message", lastFile}, extraArgs...)
	res = runCLI(t, dir, bin, env, append(args, prompt)...)
	b, err := os.ReadFile(lastFile)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b), res
}

// responsesAttempts lists the /v1/responses requests of the named upstreams
// in the order they started, as "<name> stream" or "<name> plain".
func responsesAttempts(ups map[string]*upstream) []string {
	return attemptsOn(ups, "/v1/responses")
}

// checkCodexAttempts fails the test unless the upstreams saw exactly want.
func checkCodexAttempts(t *testing.T, ups map[string]*upstream, res cliResult, want ...string) {
	t.Helper()
	if got := responsesAttempts(ups); strings.Join(got, ", ") != strings.Join(want, ", ") {
		var all strings.Builder
		for name, u := range ups {
			for _, r := range u.Requests() {
				fmt.Fprintf(&all, "%s: %s %s stream=%v status=%d deltas=%d fault=%v\n", name, r.Method, r.Path, r.Stream, r.Status, r.Deltas, r.Fault != nil)
			}
		}
		t.Fatalf("attempts %v, want %v\n%s%s", got, want, all.String(), res)
	}
}

// checkCodexAnswer fails the test unless Codex exited 0 and printed want as
// its answer, on stdout and as its last message.
func checkCodexAnswer(t *testing.T, last string, res cliResult, want string) {
	t.Helper()
	if res.Exit != 0 || strings.TrimSpace(last) != want || strings.TrimSpace(res.Stdout) != want {
		t.Fatalf("want exit 0 and %q, got last message %q\n%s", want, last, res)
	}
}

// The primary is overloaded (529): the proxy retries it once (same_provider
// 1, the default, spelled out) and fails over to the secondary, all inside
// the one request Codex sends.
func TestCodexFailover529(t *testing.T) {
	primary := newUpstream(t, sim.Config{Text: codexPrimaryText, Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 529}}})
	secondary := newUpstream(t, sim.Config{Text: codexSecondaryText})
	p := startProxy(t, provider("primary", primary, "priority 0")+provider("secondary", secondary, "priority 1")+
		"hedge off\n retry {\n same_provider 1\n }\n")

	last, res := runCodex(t, p)
	ups := map[string]*upstream{"primary": primary, "secondary": secondary}
	checkCodexAnswer(t, last, res, codexSecondaryText)
	checkCodexAttempts(t, ups, res, "primary stream", "primary stream", "secondary stream")
}

// The primary's first token takes 3 s; the hedge fires after 200 ms and the
// secondary's answer wins.
func TestCodexHedge(t *testing.T) {
	primary := newUpstream(t, sim.Config{Text: codexPrimaryText, FirstToken: caddyDur(3 * time.Second)})
	secondary := newUpstream(t, sim.Config{Text: codexSecondaryText})
	p := startProxy(t, provider("primary", primary, "priority 0")+provider("secondary", secondary, "priority 1")+
		"hedge {\n after 200ms\n }\n")

	last, res := runCodex(t, p)
	ups := map[string]*upstream{"primary": primary, "secondary": secondary}
	checkCodexAnswer(t, last, res, codexSecondaryText)
	checkCodexAttempts(t, ups, res, "primary stream", "secondary stream")
}

// Every stream is cut after 3 deltas, after the proxy committed to it: the
// proxy relays the cut (continuation off: e2e_resume_responses_test.go has
// Codex with it). Codex, with its own retries off, must report the error
// and exit non-zero; it must never print the truncated text.
func TestCodexStreamCut(t *testing.T) {
	cut := []sim.Fault{{Kind: sim.FaultCut, After: 3}}
	primary := newUpstream(t, sim.Config{Text: codexPrimaryText, Faults: cut})
	secondary := newUpstream(t, sim.Config{Text: codexSecondaryText, Faults: cut})
	p := startProxy(t, provider("primary", primary, "priority 0")+provider("secondary", secondary, "priority 1")+
		"hedge off\n retry {\n same_provider 0\n }\n cooldown {\n failures 100\n }\n stream {\n resume off\n }\n")

	last, res := runCodex(t, p)
	ups := map[string]*upstream{"primary": primary, "secondary": secondary}
	if res.Exit == 0 {
		t.Fatalf("the stream was cut, yet codex exited 0 with %q\n%s", last, res)
	}
	prefix := strings.Join(strings.Fields(codexPrimaryText)[:3], " ")
	if strings.Contains(res.Stdout, prefix) || strings.Contains(last, prefix) {
		t.Fatalf("codex printed the truncated answer (last message %q)\n%s", last, res)
	}
	checkCodexAttempts(t, ups, res, "primary stream")
}

// The primary's first stream is cut after commit, once, and Codex may retry
// a stream once (stream_max_retries 1 for this run): its retry gets the whole
// answer, and Codex prints that, never the first three words (the proxy's
// continuation off, so that Codex's retry is what finishes it).
func TestCodexStreamCutRetried(t *testing.T) {
	primary := newUpstream(t, sim.Config{Text: codexPrimaryText, Faults: []sim.Fault{{Kind: sim.FaultCut, After: 3, Count: 1}}})
	secondary := newUpstream(t, sim.Config{Text: codexSecondaryText})
	p := startProxy(t, provider("primary", primary, "priority 0")+provider("secondary", secondary, "priority 1")+
		"hedge off\n retry {\n same_provider 0\n }\n cooldown {\n failures 100\n }\n stream {\n resume off\n }\n")

	last, res := runCodex(t, p, "-c", "model_providers.hedge.stream_max_retries=1")
	ups := map[string]*upstream{"primary": primary, "secondary": secondary}
	checkCodexAnswer(t, last, res, codexPrimaryText)
	checkCodexAttempts(t, ups, res, "primary stream", "primary stream")
}

// Item 12: Codex runs a whole tool loop through faults. Codex 0.171 offers
// its shell as the function exec_command {cmd} (read from the tools of its
// request): the simulators answer its first turn with a call of it that
// prints a file holding a unique token, and the turn carrying the output
// with a text that quotes it. The primary answers 529 to everything; the
// answer's stream is cut after commit and the proxy continues it on the
// secondary (replay-match: Responses providers take no prefill by
// default). Codex runs the command (no sandbox, no approval: headless exec)
// and exits 0 with the token in its answer.
func TestCodexToolLoop(t *testing.T) {
	dir := t.TempDir()
	token := fmt.Sprintf("hedge-token-%x", time.Now().UnixNano())
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte(token+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	call := sim.ToolCall{Name: "exec_command", Arguments: json.RawMessage(`{"cmd":"cat notes.txt"}`)}
	primary, secondary := toolLoopUpstreams(t, call, "The command printed: {result}")
	p := startProxy(t, provider("primary", primary, "priority 0")+provider("secondary", secondary, "priority 1")+
		"hedge off\n retry {\n same_provider 0\n }\n")

	last, res := runCodexIn(t, p, dir, "What does notes.txt say?", "--dangerously-bypass-approvals-and-sandbox")
	ups := map[string]*upstream{"primary": primary, "secondary": secondary}
	if res.Exit != 0 || !strings.Contains(last, token) || !strings.HasPrefix(strings.TrimSpace(last), "The command printed:") {
		t.Fatalf("want exit 0 and the command's output %s in the answer, got last message %q\n%s", token, last, res)
	}
	checkToolLoop(t, p, ups, "/v1/responses", res)
}
