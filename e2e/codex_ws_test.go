package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// codexBuiltinConfig points Codex's built-in OpenAI provider at the proxy
// (openai_base_url), as an operator does who keeps Codex's own provider.
// That provider opens the Responses WebSocket (GET /v1/responses, Upgrade:
// websocket) before any HTTP request; Codex's own retries keep their
// defaults (stream_max_retries 5).
const codexBuiltinConfig = `model = "gpt-test"
openai_base_url = "%s/v1"
check_for_update_on_startup = false

[analytics]
enabled = false

[feedback]
enabled = false

[features]
plugins = false
`

// A completion path asked with another method than POST is refused with the
// request log line and the client_error count of every refusal. A WebSocket
// upgrade gets 426, the one status on which Codex falls back to HTTP at
// once: with the 405 of a plain GET it retried the handshake five times
// (about 6 s, "Reconnecting... 5/5" on its stderr) in every session.
func TestCodexWebSocketFallsBackAtOnce(t *testing.T) {
	up := newUpstream(t, sim.Config{Text: codexPrimaryText})
	p := startProxy(t, provider("ws-primary", up)+"hedge off\n")

	home, env := cliHome(t)
	codexHome := filepath.Join(home, ".codex")
	if err := os.MkdirAll(codexHome, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), fmt.Appendf(nil, codexBuiltinConfig, p.URL), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := codexCLI.binary(t)
	before, _ := observeScrape(t, p)
	lastFile := filepath.Join(home, "last-message.txt")
	res := runCLI(t, home, bin, append(env, "CODEX_HOME="+codexHome, "OPENAI_API_KEY=sk-test-client"),
		"exec", "--strict-config", "--skip-git-repo-check", "--output-last-message", lastFile, "Say hello.")
	last, _ := os.ReadFile(lastFile)
	if res.Exit != 0 || strings.TrimSpace(string(last)) != codexPrimaryText {
		t.Fatalf("want exit 0 and %q, got %q\n%s", codexPrimaryText, last, res)
	}
	if strings.Contains(res.Stderr, "Reconnecting") {
		t.Errorf("codex retried its WebSocket handshake instead of falling back to HTTP at once\n%s", res)
	}
	checkCodexAttempts(t, map[string]*upstream{"ws-primary": up}, res, "ws-primary stream")

	// The one handshake, refused with 426 and logged as a refusal; the
	// stream that followed, served.
	lines := observeRequestLines(t, p.LogFile, 2)
	var refused []map[string]any
	for _, l := range lines {
		if l["outcome"] == "client_error" {
			refused = append(refused, l)
		}
	}
	if len(refused) != 1 || refused[0]["status"] != 426.0 || refused[0]["method"] != "GET" ||
		refused[0]["path"] != "/v1/responses" || refused[0]["level"] != "info" {
		t.Errorf("want one info line refusing GET /v1/responses with 426, got %v\n%s", refused, p.logs(t))
	}
	after := observeScrapeUntil(t, p, func(m observeMetrics) bool {
		return m.delta(before, `caddy_llm_hedge_requests_total{outcome="success"}`) >= 1
	})
	if d := after.delta(before, `caddy_llm_hedge_requests_total{outcome="client_error"}`); d != 1 {
		t.Errorf("client_error requests: want 1 (the handshake), got %v", d)
	}
}

// Any client: a WebSocket handshake on each completion path is a 426 in the
// path's dialect; a plain GET stays a 405 with Allow: POST. Both are logged.
func TestCompletionPathRefusesMethod(t *testing.T) {
	up := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("method-primary", up))
	paths := []string{"/v1/messages", "/v1/chat/completions", "/v1/responses", "/v1beta/models/gemini-2.5-flash:streamGenerateContent"}
	for _, path := range paths {
		for _, ws := range []bool{true, false} {
			req, _ := http.NewRequestWithContext(ctxTimeout(t, 10*time.Second), http.MethodGet, p.URL+path, nil)
			want, allow := http.StatusMethodNotAllowed, "POST"
			if ws {
				req.Header.Set("Connection", "Upgrade")
				req.Header.Set("Upgrade", "websocket")
				req.Header.Set("Sec-WebSocket-Version", "13")
				req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
				want, allow = http.StatusUpgradeRequired, ""
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != want || resp.Header.Get("Allow") != allow || !strings.Contains(string(body), `"error"`) {
				t.Errorf("GET %s (websocket %v): want %d, Allow %q and an error body, got %d, %q: %s",
					path, ws, want, allow, resp.StatusCode, resp.Header.Get("Allow"), body)
			}
		}
	}
	lines := observeRequestLines(t, p.LogFile, 2*len(paths))
	for _, l := range lines {
		if l["outcome"] != "client_error" || l["method"] != "GET" || l["refused"] == nil || l["level"] != "info" {
			t.Errorf("want an info client_error line naming the method and the refusal, got %v", l)
		}
	}
	if n := len(up.Requests()); n != 0 {
		t.Errorf("a refused method reached the provider %d times", n)
	}
}
