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

// Claude Code (the real CLI, pinned in clients_test.go) is the client of a
// real Caddy with llm_hedge in front of two simulated Anthropic providers.
//
// With CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC set, `claude -p` sends one
// request per turn, POST /v1/messages?beta=true with stream true, and nothing
// else (no title, quota or telemetry call): every completion request the
// simulators count below comes from the turn itself. On a broken stream
// Claude Code retries the streaming request once, then falls back to one
// non-streaming request (stream false, smaller max_tokens).

// The providers answer different texts, so the CLI's result names the
// provider it came from.
const (
	claudePrimaryText   = "primary says one two three four five six seven."
	claudeSecondaryText = "secondary answers alpha bravo charlie delta echo foxtrot golf."
)

// claudeResult is the part of `claude -p --output-format json` the tests read.
type claudeResult struct {
	Type     string `json:"type"`
	Subtype  string `json:"subtype"`
	IsError  bool   `json:"is_error"`
	Result   string `json:"result"`
	APIError string `json:"api_error"`
	NumTurns int    `json:"num_turns"`
}

// runClaude runs `claude -p <prompt> --output-format json` against the proxy
// with a fresh home and no login, and decodes its result.
func runClaude(t *testing.T, p *proxy, extraEnv ...string) (claudeResult, cliResult) {
	t.Helper()
	return runClaudeIn(t, p, "", []string{"-p", "Say hello."}, extraEnv...)
}

// runClaudeIn is runClaude in dir (default: the fresh home) with args
// (before --output-format json).
func runClaudeIn(t *testing.T, p *proxy, dir string, args []string, extraEnv ...string) (claudeResult, cliResult) {
	t.Helper()
	bin := claudeCodeCLI.binary(t)
	home, env := cliHome(t)
	if dir == "" {
		dir = home
	}
	env = append(env,
		"ANTHROPIC_BASE_URL="+p.URL,
		"ANTHROPIC_API_KEY=sk-ant-test-client",
		"DISABLE_TELEMETRY=1",
		"DISABLE_ERROR_REPORTING=1",
		"DISABLE_AUTOUPDATER=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
	)
	env = append(env, extraEnv...)
	res := runCLI(t, dir, bin, env, append(args, "--output-format", "json")...)
	var out claudeResult
	if err := json.Unmarshal([]byte(strings.TrimSpace(res.Stdout)), &out); err != nil || out.Type != "result" {
		t.Fatalf("claude printed no JSON result (%v)\n%s", err, res)
	}
	return out, res
}

// trace lists the completion requests of the named upstreams, for failure
// messages.
func trace(ups map[string]*upstream) string {
	var b strings.Builder
	for name, u := range ups {
		for _, r := range messageRecs(u) {
			fmt.Fprintf(&b, "%s: %s %s stream=%v status=%d deltas=%d fault=%v canceled=%v start=%s\n",
				name, r.Method, r.Path, r.Stream, r.Status, r.Deltas, r.Fault != nil, r.Canceled, r.Start.Format("15:04:05.000"))
		}
	}
	return b.String()
}

// messageRecs returns the /v1/messages requests an upstream saw, oldest first.
func messageRecs(u *upstream) []sim.RequestRecord {
	var out []sim.RequestRecord
	for _, r := range u.Requests() {
		if r.Path == "/v1/messages" {
			out = append(out, r)
		}
	}
	return out
}

// The primary is overloaded (529): the proxy retries it once (same_provider
// 1, the default, spelled out) and fails over to the secondary, all inside
// the one request Claude Code sends; the CLI prints the secondary's answer.
func TestClaudeCodeFailover529(t *testing.T) {
	primary := newUpstream(t, sim.Config{Text: claudePrimaryText, Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 529}}})
	secondary := newUpstream(t, sim.Config{Text: claudeSecondaryText})
	p := startProxy(t, provider("primary", primary, "priority 0")+provider("secondary", secondary, "priority 1")+
		"hedge off\n retry {\n same_provider 1\n }\n")

	out, res := runClaude(t, p)
	ups := map[string]*upstream{"primary": primary, "secondary": secondary}
	if res.Exit != 0 || out.IsError || out.Result != claudeSecondaryText {
		t.Fatalf("want exit 0 and the secondary's text %q, got is_error=%v result=%q\n%s\n%s", claudeSecondaryText, out.IsError, out.Result, trace(ups), res)
	}
	if np, ns := len(messageRecs(primary)), len(messageRecs(secondary)); np != 2 || ns != 1 {
		t.Fatalf("primary saw %d requests, secondary %d; want 2 (the attempt and its same-provider retry) and 1 (the failover)\n%s\n%s", np, ns, trace(ups), res)
	}
}

// The primary's first token takes 3 s; the hedge fires after 200 ms and the
// secondary's answer wins. The primary's text in the result would mean the
// CLI waited for it.
func TestClaudeCodeHedge(t *testing.T) {
	primary := newUpstream(t, sim.Config{Text: claudePrimaryText, FirstToken: caddyDur(3 * time.Second)})
	secondary := newUpstream(t, sim.Config{Text: claudeSecondaryText})
	p := startProxy(t, provider("primary", primary, "priority 0")+provider("secondary", secondary, "priority 1")+
		"hedge {\n after 200ms\n }\n")

	out, res := runClaude(t, p)
	if res.Exit != 0 || out.IsError || out.Result != claudeSecondaryText {
		t.Fatalf("want exit 0 and the hedge's text %q, got is_error=%v result=%q\n%s", claudeSecondaryText, out.IsError, out.Result, res)
	}
	if np, ns := len(messageRecs(primary)), len(messageRecs(secondary)); np != 1 || ns != 1 {
		t.Fatalf("primary saw %d requests, secondary %d; want 1 each (the first attempt and its hedge)\n%s", np, ns, res)
	}
}

// Every response of both providers is cut after commit (a stream after 3
// deltas, a non-streaming body halfway). Claude Code must report the error;
// it must never print the truncated text as its result.
//
// What happens, step by step: the stream is cut on the primary after the
// proxy committed to it, so the proxy relays the cut. Claude Code falls back
// to one non-streaming request; the proxy tries the primary (cut body) and
// fails over to the secondary (cut body) before committing, then answers
// 503. CLAUDE_CODE_MAX_RETRIES=0 keeps Claude Code from retrying that 503
// with backoff (ten times by default: half a minute of waiting).
func TestClaudeCodeStreamCut(t *testing.T) {
	cut := []sim.Fault{{Kind: sim.FaultCut, After: 3}}
	primary := newUpstream(t, sim.Config{Text: claudePrimaryText, Faults: cut})
	secondary := newUpstream(t, sim.Config{Text: claudeSecondaryText, Faults: cut})
	p := startProxy(t, provider("primary", primary, "priority 0")+provider("secondary", secondary, "priority 1")+
		"hedge off\n retry {\n same_provider 0\n }\n cooldown {\n failures 100\n }\n")

	out, res := runClaude(t, p, "CLAUDE_CODE_MAX_RETRIES=0")
	ups := map[string]*upstream{"primary": primary, "secondary": secondary}
	if res.Exit == 0 || !out.IsError {
		t.Fatalf("every attempt was cut, yet claude reported success with %q\n%s\n%s", out.Result, trace(ups), res)
	}
	for _, text := range []string{claudePrimaryText, claudeSecondaryText} {
		if prefix := strings.Join(strings.Fields(text)[:3], " "); strings.Contains(out.Result, prefix) {
			t.Fatalf("claude printed the truncated answer %q\n%s", out.Result, res)
		}
	}
	// The proxy tries to continue the cut stream first: replay-match on the
	// secondary (another text: cancelled), then on the primary (the same
	// text, cut again before it adds anything); then the client's error
	// event and Claude Code's own non-streaming fallback.
	want := []string{"primary stream", "secondary stream", "primary stream", "primary plain", "secondary plain"}
	if got := attempts(ups); strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Fatalf("attempts %v, want %v (the cut stream, its two continuations, then Claude Code's non-streaming fallback failing over)\n%s\n%s", got, want, trace(ups), res)
	}
}

// The primary's first stream is cut after commit, once. The proxy
// continues it by replay-match: the secondary answers another text (its
// continuation is cancelled), the primary answers the same text again and
// only what follows the delivered words reaches Claude Code. The CLI prints
// the whole text and never sends a request of its own again.
func TestClaudeCodeStreamCutRetried(t *testing.T) {
	primary := newUpstream(t, sim.Config{Text: claudePrimaryText, Faults: []sim.Fault{{Kind: sim.FaultCut, After: 3, Count: 1}}})
	secondary := newUpstream(t, sim.Config{Text: claudeSecondaryText})
	p := startProxy(t, provider("primary", primary, "priority 0")+provider("secondary", secondary, "priority 1")+
		"hedge off\n retry {\n same_provider 0\n }\n cooldown {\n failures 100\n }\n")

	out, res := runClaude(t, p, "CLAUDE_CODE_MAX_RETRIES=0")
	ups := map[string]*upstream{"primary": primary, "secondary": secondary}
	if res.Exit != 0 || out.IsError || out.Result != claudePrimaryText {
		t.Fatalf("want exit 0 and the primary's whole text %q, got is_error=%v result=%q\n%s\n%s", claudePrimaryText, out.IsError, out.Result, trace(ups), res)
	}
	want := []string{"primary stream", "secondary stream", "primary stream"}
	if got := attempts(ups); strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Fatalf("attempts %v, want %v (the cut stream, then the proxy's two replay-match continuations)\n%s\n%s", got, want, trace(ups), res)
	}
}

// The primary's stream is cut after commit; the secondary is an Anthropic
// API (prefill on) that serves the same model: the proxy sends it the
// delivered text as an assistant turn and splices the rest. Claude Code
// prints the complete text with exit 0, and the simulators saw one full
// request from it: the other is the continuation with its prefill.
func TestClaudeCodeStreamContinued(t *testing.T) {
	primary := newUpstream(t, sim.Config{Text: claudePrimaryText, Faults: []sim.Fault{{Kind: sim.FaultCut, After: 3}}})
	secondary := newUpstream(t, sim.Config{Text: claudePrimaryText})
	p := startProxy(t, provider("primary", primary, "priority 0", "api anthropic")+provider("secondary", secondary, "priority 1", "api anthropic")+
		"hedge off\n retry {\n same_provider 0\n }\n")

	out, res := runClaude(t, p, "CLAUDE_CODE_MAX_RETRIES=0")
	ups := map[string]*upstream{"primary": primary, "secondary": secondary}
	if res.Exit != 0 || out.IsError || out.Result != claudePrimaryText {
		t.Fatalf("want exit 0 and the whole text %q, got is_error=%v result=%q\n%s\n%s", claudePrimaryText, out.IsError, out.Result, trace(ups), res)
	}
	full, prefilled := 0, 0
	for _, u := range ups {
		for _, r := range messageRecs(u) {
			if r.Prefilled {
				prefilled++
				if r.Prefill != "primary says one" {
					t.Errorf("prefill %q, want the delivered text without its trailing space", r.Prefill)
				}
			} else {
				full++
			}
		}
	}
	if full != 1 || prefilled != 1 {
		t.Fatalf("%d full requests and %d continuations, want 1 and 1\n%s\n%s", full, prefilled, trace(ups), res)
	}
}

// attempts lists the completion requests of the named upstreams in the
// order they started, as "<name> stream" or "<name> plain".
func attempts(ups map[string]*upstream) []string { return attemptsOn(ups, "/v1/messages") }

// toolLoopUpstreams is the pool of the tool-loop tests: both simulators
// script the same call and answer; the primary is overloaded (529) on
// every request, and the secondary cuts the stream of the answer turn (the
// one carrying the tool result) once after 3 deltas, after commit.
func toolLoopUpstreams(t *testing.T, call sim.ToolCall, answer string) (primary, secondary *upstream) {
	script := sim.Config{ToolCalls: []sim.ToolCall{call}, ToolAnswer: answer}
	p, s := script, script
	p.Faults = []sim.Fault{{Kind: sim.FaultStatus, Status: 529}}
	s.Faults = []sim.Fault{{Kind: sim.FaultCut, After: 3, Count: 1, Turn: sim.TurnToolResult}}
	return newUpstream(t, p), newUpstream(t, s)
}

// checkToolLoop fails the test unless the loop ran as scripted: the call
// was streamed once in full (no retry, no continuation of a stream that
// carried a tool call), the answer's cut stream was continued once, and no
// request log line has a continuation on the call's turn.
func checkToolLoop(t *testing.T, p *proxy, ups map[string]*upstream, path string, res cliResult) {
	t.Helper()
	var calls, answers, answerCuts, continued int
	var all strings.Builder
	for name, u := range ups {
		for _, r := range u.Requests() {
			if r.Path != path {
				continue
			}
			fmt.Fprintf(&all, "%s: stream=%v status=%d deltas=%d fault=%v call=%q result=%v prefill=%q\n", name, r.Stream, r.Status, r.Deltas, r.Fault != nil, r.ToolCall, r.ToolResult, r.Prefill)
			switch {
			case r.ToolCall != "" && r.Prefilled:
				t.Errorf("%s continued a tool call's stream by prefill", name)
			case r.ToolCall != "" && r.Fault == nil:
				calls++
			case r.ToolResult && r.Fault != nil && r.Fault.Kind == sim.FaultCut:
				answerCuts++
			case r.ToolResult && r.Fault == nil && r.Status == 200:
				if r.Prefilled {
					continued++
				}
				answers++
			}
		}
	}
	if calls != 1 || answerCuts != 1 || answers != 1 {
		t.Fatalf("%d whole call streams, %d cut answers, %d answers after the cut (%d by prefill); want 1, 1, 1\n%s%s", calls, answerCuts, answers, continued, all.String(), res)
	}
	lines := streamLogLines(t, p, 2)
	var resumes []string
	for _, line := range lines {
		chain, _ := line["chain"].([]any)
		for _, e := range chain {
			if m, _ := e.(map[string]any); m["event"] == "resume" {
				resumes = append(resumes, fmt.Sprint(m["outcome"]))
			}
		}
	}
	// One continuation attempt may fail on the overloaded primary before
	// the secondary completes it; none is ever on the call's turn, which
	// was never cut.
	if len(resumes) == 0 || resumes[len(resumes)-1] != "completed" {
		t.Fatalf("continuations %v, want the answer's, completed\n%s%s", resumes, all.String(), res)
	}
}

// Item 12: Claude Code runs a whole tool loop through faults. The
// simulators answer its first turn with a Read of a file holding a unique
// token and the turn carrying the result with a text that quotes it. The
// primary answers 529 to everything: the proxy fails over on both turns.
// The answer's stream is cut after commit and the proxy continues it on the
// secondary (prefill). Claude Code exits 0 with the token in its answer.
func TestClaudeCodeToolLoop(t *testing.T) {
	dir := t.TempDir()
	token := fmt.Sprintf("hedge-token-%x", time.Now().UnixNano())
	file := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(file, []byte(token+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	call := sim.ToolCall{Name: "Read", Arguments: json.RawMessage(fmt.Sprintf(`{"file_path":%q}`, file))}
	primary, secondary := toolLoopUpstreams(t, call, "The file holds: {result}")
	p := startProxy(t, provider("primary", primary, "priority 0", "api anthropic")+provider("secondary", secondary, "priority 1", "api anthropic")+
		"hedge off\n retry {\n same_provider 0\n }\n")

	out, res := runClaudeIn(t, p, dir, []string{"-p", "What does notes.txt say?", "--allowedTools", "Read"}, "CLAUDE_CODE_MAX_RETRIES=0")
	ups := map[string]*upstream{"primary": primary, "secondary": secondary}
	if res.Exit != 0 || out.IsError || !strings.Contains(out.Result, token) || !strings.HasPrefix(out.Result, "The file holds:") {
		t.Fatalf("want exit 0 and the file's token %s in the answer, got is_error=%v result=%q\n%s\n%s", token, out.IsError, out.Result, trace(ups), res)
	}
	checkToolLoop(t, p, ups, "/v1/messages", res)
}
