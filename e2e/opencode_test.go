package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// opencode (the real CLI, pinned here like the others in clients_test.go;
// bump after checking `npm view opencode-ai version`) is a Chat Completions
// client: a custom provider of @ai-sdk/openai-compatible (bundled in its
// binary) whose baseURL is the proxy's /v1.
//
// How it runs headless here (read in the 1.18.33 binary, checked under
// strace: its only connect is to the proxy):
//   - `opencode run --pure --title <t> --format json <prompt>`: --title names
//     the session, so it asks no model for a title (else one more Chat
//     request per run); --pure loads no external plugin; --format json
//     prints one JSON event per line (text parts, tool parts, errors).
//   - The config is the home's ~/.config/opencode/opencode.json: one
//     provider, "hedge", the only one enabled; autoupdate and sharing off.
//   - In every config directory it installs @opencode-ai/plugin with npm
//     (arborist, from registry.npmjs.org) in the background, unless that
//     directory has a node_modules and a package.json whose dependencies
//     the package-lock.json lists: the home's config directory gets those
//     three, so it installs nothing.
//   - OPENCODE_DISABLE_AUTOUPDATE, _MODELS_FETCH (models.dev),
//     _DEFAULT_PLUGINS, _LSP_DOWNLOAD, _SHARE and _CLAUDE_CODE keep it off
//     every other host and out of ~/.claude.
//
// One turn is one POST /v1/chat/completions with stream true and
// stream_options.include_usage; its read tool is `read {filePath}` (an
// absolute path), which prints the file's lines numbered.
const opencodeVersion = "1.18.33"

var opencodeCLI = &npmCLI{
	pkg:     "opencode-ai",
	version: opencodeVersion,
	// The package's own bin is a stub its postinstall replaces; the binary
	// is in opencode-<os>-<arch> (npm also installs the -baseline build
	// for CPUs without AVX2 beside it on x64: this names the other one).
	native: "opencode-" + opencodeOS() + "-" + opencodeArch() + "/bin/opencode" + exeSuffix(),
}

func opencodeOS() string {
	if runtime.GOOS == "windows" {
		return "windows"
	}
	return runtime.GOOS
}

func opencodeArch() string {
	if runtime.GOARCH == "amd64" {
		return "x64"
	}
	return runtime.GOARCH
}

const (
	opencodePrimaryText   = "primary says one two three four five six seven."
	opencodeSecondaryText = "secondary answers alpha bravo charlie delta echo foxtrot golf."
	opencodeModel         = "gpt-test"
)

// opencodeConfig is ~/.config/opencode/opencode.json: the proxy as the one
// provider, selected with its model.
const opencodeConfig = `{
  "$schema": "https://opencode.ai/config.json",
  "autoupdate": false,
  "share": "disabled",
  "lsp": false,
  "formatter": false,
  "enabled_providers": ["hedge"],
  "model": "hedge/%[2]s",
  "small_model": "hedge/%[2]s",
  "provider": {
    "hedge": {
      "npm": "@ai-sdk/openai-compatible",
      "name": "llm_hedge",
      "options": {"baseURL": "%[1]s/v1", "apiKey": "sk-test-client"},
      "models": {"%[2]s": {"name": "%[2]s"}}
    }
  }
}
`

// opencodeEvent is one line of `opencode run --format json`.
type opencodeEvent struct {
	Type string `json:"type"`
	Part struct {
		Type  string `json:"type"`
		Text  string `json:"text"`
		Tool  string `json:"tool"`
		State struct {
			Status string `json:"status"`
			Output string `json:"output"`
		} `json:"state"`
	} `json:"part"`
	Error json.RawMessage `json:"error"`
}

// opencodeRun is what one run printed: the text parts, in order, the tools
// it ran, and the errors it reported.
type opencodeRun struct {
	Texts  []string
	Tools  []string
	Errors []string
}

// Last is the last text part: the answer.
func (r opencodeRun) Last() string {
	if len(r.Texts) == 0 {
		return ""
	}
	return r.Texts[len(r.Texts)-1]
}

// runOpencode runs `opencode run` with prompt against the proxy, in dir
// (default: a fresh directory in the home), with every other host out of
// reach (trap), and decodes its events.
func runOpencode(t *testing.T, p *proxy, dir, prompt string) (opencodeRun, cliResult) {
	t.Helper()
	bin := opencodeCLI.binary(t)
	home, env := cliHome(t)
	cfgDir := filepath.Join(home, ".config", "opencode")
	if dir == "" {
		dir = filepath.Join(home, "work")
	}
	for _, d := range []string{cfgDir, filepath.Join(cfgDir, "node_modules"), dir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		"opencode.json":     fmt.Sprintf(opencodeConfig, p.URL, opencodeModel),
		"package.json":      `{"dependencies":{"@opencode-ai/plugin":"*"}}`,
		"package-lock.json": `{"lockfileVersion":3,"packages":{"":{"dependencies":{"@opencode-ai/plugin":"*"}}}}`,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(cfgDir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env = append(env,
		"OPENCODE_DISABLE_AUTOUPDATE=1",
		"OPENCODE_DISABLE_MODELS_FETCH=1",
		"OPENCODE_DISABLE_DEFAULT_PLUGINS=1",
		"OPENCODE_DISABLE_LSP_DOWNLOAD=1",
		"OPENCODE_DISABLE_SHARE=1",
		"OPENCODE_DISABLE_CLAUDE_CODE=1",
	)
	env = append(env, netTrap(t)...)
	res := runCLI(t, dir, bin, env, "run", "--pure", "--title", "llm_hedge e2e", "--format", "json", prompt)
	var out opencodeRun
	for _, line := range strings.Split(res.Stdout, "\n") {
		var ev opencodeEvent
		if json.Unmarshal([]byte(line), &ev) != nil {
			continue
		}
		switch {
		case ev.Type == "text" && ev.Part.Type == "text":
			out.Texts = append(out.Texts, ev.Part.Text)
		case ev.Part.Type == "tool":
			out.Tools = append(out.Tools, ev.Part.Tool+":"+ev.Part.State.Status)
		case ev.Type == "error":
			out.Errors = append(out.Errors, string(ev.Error))
		}
	}
	return out, res
}

// checkOpencodeAnswer fails the test unless opencode exited 0, reported no
// error and answered want.
func checkOpencodeAnswer(t *testing.T, out opencodeRun, res cliResult, ups map[string]*upstream, want string) {
	t.Helper()
	if res.Exit != 0 || len(out.Errors) > 0 || out.Last() != want {
		t.Fatalf("want exit 0 and %q, got %q (errors %v)\n%s%s", want, out.Last(), out.Errors, chatTrace(ups), res)
	}
}

// chatAttempts lists the /v1/chat/completions requests of the named
// upstreams in the order they started, as "<name> stream" or "<name>
// plain"; requests on any other path fail the test (the agent asked the
// proxy something besides its turns).
func chatAttempts(t *testing.T, ups map[string]*upstream) []string {
	t.Helper()
	for name, u := range ups {
		for _, r := range u.Requests() {
			if r.Path != "/v1/chat/completions" {
				t.Errorf("%s saw %s %s: the agent asks only for completions", name, r.Method, r.Path)
			}
		}
	}
	return attemptsOn(ups, "/v1/chat/completions")
}

// chatTrace lists every request of the named upstreams, for failure
// messages.
func chatTrace(ups map[string]*upstream) string {
	var b strings.Builder
	for name, u := range ups {
		for _, r := range u.Requests() {
			fmt.Fprintf(&b, "%s: %s %s stream=%v status=%d deltas=%d fault=%v call=%q result=%v prefill=%q\n",
				name, r.Method, r.Path, r.Stream, r.Status, r.Deltas, r.Fault != nil, r.ToolCall, r.ToolResult, r.Prefill)
		}
	}
	return b.String()
}

// The primary Chat provider is overloaded (529): the proxy retries it once
// and fails over to the secondary inside opencode's one request; opencode
// prints the secondary's answer.
func TestOpencodeFailover529(t *testing.T) {
	primary := newUpstream(t, sim.Config{Text: opencodePrimaryText, Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 529}}})
	secondary := newUpstream(t, sim.Config{Text: opencodeSecondaryText})
	p := startProxy(t, provider("primary", primary, "api chat", "priority 0")+provider("secondary", secondary, "api chat", "priority 1")+
		"hedge off\n retry {\n same_provider 1\n }\n")

	out, res := runOpencode(t, p, "", "Say hello.")
	ups := map[string]*upstream{"primary": primary, "secondary": secondary}
	checkOpencodeAnswer(t, out, res, ups, opencodeSecondaryText)
	if got, want := chatAttempts(t, ups), "primary stream, primary stream, secondary stream"; strings.Join(got, ", ") != want {
		t.Fatalf("attempts %v, want %s (the attempt, its same-provider retry, the failover)\n%s", got, want, res)
	}
}

// The primary's first token takes 30 s; the hedge fires after 300 ms and
// the secondary's answer wins, long before the primary would have spoken:
// opencode prints the secondary's text.
func TestOpencodeHedge(t *testing.T) {
	primary := newUpstream(t, sim.Config{Text: opencodePrimaryText, FirstToken: caddyDur(30 * time.Second)})
	secondary := newUpstream(t, sim.Config{Text: opencodeSecondaryText})
	p := startProxy(t, provider("primary", primary, "api chat", "priority 0")+provider("secondary", secondary, "api chat", "priority 1")+
		"hedge {\n after 300ms\n }\n")

	out, res := runOpencode(t, p, "", "Say hello.")
	ups := map[string]*upstream{"primary": primary, "secondary": secondary}
	checkOpencodeAnswer(t, out, res, ups, opencodeSecondaryText)
	if got, want := chatAttempts(t, ups), "primary stream, secondary stream"; strings.Join(got, ", ") != want {
		t.Fatalf("attempts %v, want %s (the first attempt and its hedge)\n%s", got, want, res)
	}
	if res.Took > 25*time.Second {
		t.Fatalf("opencode took %v: it waited for the slow primary", res.Took)
	}
}

// The primary's stream is cut after commit, after 3 of its 9 deltas, once.
// The proxy continues it (replay-match: both providers answer the same
// text) and only what follows the delivered words reaches opencode, which
// reads one whole answer: the full text, no error, no retry of its own.
func TestOpencodeStreamCut(t *testing.T) {
	primary := newUpstream(t, sim.Config{Text: opencodePrimaryText, Faults: []sim.Fault{{Kind: sim.FaultCut, After: 3, Count: 1}}})
	secondary := newUpstream(t, sim.Config{Text: opencodePrimaryText})
	p := startProxy(t, provider("primary", primary, "api chat", "priority 0")+provider("secondary", secondary, "api chat", "priority 1")+
		"hedge off\n retry {\n same_provider 0\n }\n")

	out, res := runOpencode(t, p, "", "Say hello.")
	ups := map[string]*upstream{"primary": primary, "secondary": secondary}
	checkOpencodeAnswer(t, out, res, ups, opencodePrimaryText)
	if got, want := chatAttempts(t, ups), "primary stream, secondary stream"; strings.Join(got, ", ") != want {
		t.Fatalf("attempts %v, want %s (the cut stream and its continuation)\n%s%s", got, want, chatTrace(ups), res)
	}
	line := streamLogLine(t, p, 1)
	var resumes []string
	chain, _ := line["chain"].([]any)
	for _, e := range chain {
		if m, _ := e.(map[string]any); m["event"] == "resume" {
			resumes = append(resumes, fmt.Sprint(m["outcome"]))
		}
	}
	if len(resumes) != 1 || resumes[0] != "completed" {
		t.Fatalf("continuations %v, want one, completed\n%s", resumes, p.logs(t))
	}
}

// opencode through an Anthropic-only pool: its Chat provider is down
// (every request 529), and the only provider that answers speaks Anthropic
// Messages with `translate openai` and its own key. The simulator, speaking
// only Messages, answers the first turn with a call of opencode's read tool
// on a file of its working directory, and the turn carrying the result
// with a text quoting it. opencode reads the file and exits 0 with the
// file's token in its answer; both turns reached the Anthropic provider
// translated, with its key, never the client's.
func TestOpencodeTranslatedToolLoop(t *testing.T) {
	dir := t.TempDir()
	token := fmt.Sprintf("hedge-token-%x", time.Now().UnixNano())
	file := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(file, []byte(token+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gpt := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 529}}})
	claude := newUpstream(t, sim.Config{Key: "sk-ant-own",
		ToolCalls:  []sim.ToolCall{{Name: "read", Arguments: json.RawMessage(fmt.Sprintf(`{"filePath":%q}`, file))}},
		ToolAnswer: "The file holds: {result}"})
	p := startProxy(t, provider("gpt", gpt, "api chat")+
		provider("claude", claude, "api anthropic", "key sk-ant-own", "translate openai", "priority 1", "model * claude-sonnet-4-5")+
		"hedge off\n retry {\n same_provider 0\n }\n")

	out, res := runOpencode(t, p, dir, "What does notes.txt say?")
	if res.Exit != 0 || len(out.Errors) > 0 || !strings.Contains(out.Last(), token) || !strings.HasPrefix(out.Last(), "The file holds:") {
		t.Fatalf("want exit 0 and the file's token %s in the answer, got %q (errors %v, tools %v)\n%s%s\n%s", token, out.Last(), out.Errors, out.Tools, xlAgentTrace(claude, ""), res, p.logs(t))
	}
	if strings.Join(out.Tools, ",") != "read:completed" {
		t.Fatalf("opencode ran tools %v, want read once, completed\n%s", out.Tools, res)
	}
	checkXLAgentLoop(t, claude, "/v1/messages", "read")
	for _, r := range claude.Requests() {
		if r.Path != "/v1/messages" || r.APIKey != "sk-ant-own" || r.Model != "claude-sonnet-4-5" || !r.Stream {
			t.Errorf("the Anthropic provider saw %s %s model %q key %q stream %v: want streamed Messages of its model with its own key", r.Method, r.Path, r.Model, r.APIKey, r.Stream)
		}
	}
	if n := len(chatAttempts(t, map[string]*upstream{"gpt": gpt})); n != 2 {
		t.Fatalf("the Chat provider saw %d requests, want 2: one per turn, each failed over", n)
	}
}
