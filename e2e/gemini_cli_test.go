package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// Gemini CLI (the real CLI, pinned here like the others in clients_test.go;
// bump after checking `npm view @google/gemini-cli version`) is the client.
//
// How it is pointed at a local base URL (read in the 0.61.0 bundle):
//   - GOOGLE_GEMINI_BASE_URL is the base URL of its genai SDK (any URL that
//     parses; http on loopback is fine).
//   - That variable alone makes the auth type "gateway", which `gemini -p`
//     refuses ("Invalid auth method selected.", exit 41), so the home's
//     .gemini/settings.json selects "gemini-api-key" and GEMINI_API_KEY holds
//     the key, sent as x-goog-api-key.
//   - Without -m the CLI first asks a classifier model (a non-streaming
//     :generateContent with a JSON response schema) which model to use, and
//     hangs when the answer is not that JSON: -m names the model, and then
//     one turn is exactly one POST /v1beta/models/{model}:streamGenerateContent?alt=sse.
//   - It needs a trusted folder (GEMINI_CLI_TRUST_WORKSPACE=true, else exit 55).
const geminiCLIVersion = "0.61.0"

var geminiCLI = &npmCLI{
	pkg:     "@google/gemini-cli",
	version: geminiCLIVersion,
	native:  "@google/gemini-cli/bundle/gemini.js", // a node script with a shebang; the package has no native binary
}

// geminiModel is the model the CLI is told to use.
const geminiModel = "gemini-2.5-flash"

const (
	geminiPrimaryText   = "primary says one two three four five six seven."
	geminiSecondaryText = "secondary answers alpha bravo charlie delta echo foxtrot golf."
	geminiClientKey     = "gemini-client-key"
	geminiProviderKey   = "gemini-provider-key"
)

// geminiResult is the part of `gemini -p --output-format json` the tests read.
type geminiResult struct {
	Response string          `json:"response"`
	Error    json.RawMessage `json:"error"`
}

// runGemini runs `gemini -m <model> -p <prompt> --output-format json` against
// baseURL with a fresh home, telemetry and usage statistics off.
func runGemini(t *testing.T, baseURL string) (geminiResult, cliResult) {
	t.Helper()
	return runGeminiIn(t, baseURL, "", "Say hello.")
}

// runGeminiIn is runGemini in dir (default: a fresh directory in the home)
// with prompt, and extraEnv.
func runGeminiIn(t *testing.T, baseURL, dir, prompt string, extraEnv ...string) (geminiResult, cliResult) {
	t.Helper()
	bin := geminiCLI.binary(t)
	home, env := cliHome(t)
	settings := `{"security":{"auth":{"selectedType":"gemini-api-key"}},"privacy":{"usageStatisticsEnabled":false},"telemetry":{"enabled":false}}`
	if err := os.MkdirAll(filepath.Join(home, ".gemini"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".gemini", "settings.json"), []byte(settings), 0o644); err != nil {
		t.Fatal(err)
	}
	work, tmp := dir, filepath.Join(home, "tmp")
	if work == "" {
		work = filepath.Join(home, "work")
	}
	for _, dir := range []string{work, tmp} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	env = append(env,
		"GOOGLE_GEMINI_BASE_URL="+baseURL,
		"GEMINI_API_KEY="+geminiClientKey,
		"GEMINI_TELEMETRY_ENABLED=false",
		"GEMINI_CLI_TRUST_WORKSPACE=true",
		"TMPDIR="+tmp, // its error reports go to the temp dir
	)
	env = append(env, extraEnv...)
	res := runCLI(t, work, bin, env, "-m", geminiModel, "-p", prompt, "--output-format", "json")
	// On an error the JSON goes to stderr and stdout stays empty: the zero
	// result fails the callers' checks, which print res.
	var out geminiResult
	_ = json.Unmarshal([]byte(strings.TrimSpace(res.Stdout)), &out)
	return out, res
}

// geminiRecs returns the generate requests an upstream saw, oldest first.
func geminiRecs(u *upstream) []sim.RequestRecord {
	var out []sim.RequestRecord
	for _, r := range u.Requests() {
		if strings.Contains(r.Path, ":generateContent") || strings.Contains(r.Path, ":streamGenerateContent") {
			out = append(out, r)
		}
	}
	return out
}

func geminiTrace(ups map[string]*upstream) string {
	var b strings.Builder
	for name, u := range ups {
		for _, r := range u.Requests() {
			fmt.Fprintf(&b, "%s: %s %s stream=%v status=%d deltas=%d fault=%v goog-key=%q key-param=%q\n",
				name, r.Method, r.Path, r.Stream, r.Status, r.Deltas, r.Fault != nil, r.GoogAPIKey, r.KeyParam)
		}
	}
	return b.String()
}

// The CLI straight against a simulator: it works with a local base URL, and
// one turn is one streaming request with the key in x-goog-api-key.
func TestGeminiCLIDirect(t *testing.T) {
	s := sim.New(sim.Config{Text: geminiSecondaryText, Tokens: 9})
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
		mu.Unlock()
		s.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	out, res := runGemini(t, srv.URL)
	mu.Lock()
	defer mu.Unlock()
	if res.Exit != 0 || len(out.Error) > 0 || out.Response != geminiSecondaryText {
		t.Fatalf("want exit 0 and %q, got %q, error %s; requests %v\n%s", geminiSecondaryText, out.Response, out.Error, seen, res)
	}
	want := []string{"POST /v1beta/models/" + geminiModel + ":streamGenerateContent?alt=sse"}
	if !slices.Equal(seen, want) {
		t.Errorf("requests %v, want %v", seen, want)
	}
	for _, r := range s.Requests() {
		if r.GoogAPIKey != geminiClientKey || r.KeyParam != "" || r.Model != geminiModel || !r.Stream {
			t.Errorf("record %+v", r)
		}
	}
}

// The primary answers 503; the proxy fails over to the secondary inside the
// CLI's one request, and the CLI prints the secondary's answer. Each
// provider gets its own key, never the client's.
func TestGeminiCLIFailover503(t *testing.T) {
	p, primary, secondary, ups := geminiPrimarySecondary(t,
		sim.Config{Text: geminiPrimaryText, Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 503}}},
		sim.Config{Text: geminiSecondaryText})
	out, res := runGemini(t, p.URL)
	if res.Exit != 0 || len(out.Error) > 0 || out.Response != geminiSecondaryText {
		t.Fatalf("want exit 0 and the secondary's text %q, got %q, error %s\n%s\n%s", geminiSecondaryText, out.Response, out.Error, geminiTrace(ups), res)
	}
	if np, ns := len(geminiRecs(primary)), len(geminiRecs(secondary)); np != 1 || ns != 1 {
		t.Fatalf("primary saw %d requests, secondary %d; want 1 each\n%s\n%s", np, ns, geminiTrace(ups), res)
	}
	for name, u := range ups {
		for _, r := range u.Requests() {
			if r.GoogAPIKey != geminiProviderKey || r.KeyParam != "" {
				t.Errorf("%s got x-goog-api-key %q and ?key=%q, want the provider's key only", name, r.GoogAPIKey, r.KeyParam)
			}
		}
	}
}

// The only provider is rate limited for an hour (429, Retry-After 3600).
// The proxy answers 429 with that Retry-After, and its Google error body
// carries it as a RetryInfo detail, which is what Gemini CLI reads (not the
// header): a delay over its 5-minute limit is a terminal quota error, so the
// CLI reports it at once. Without the detail the CLI retries ten times with
// backoff, for minutes, against a pool that said when it will recover.
func TestGeminiCLIRetryAfterLong(t *testing.T) {
	only := newUpstream(t, sim.Config{Text: geminiPrimaryText, Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 429, RetryAfter: "3600"}}})
	p := startProxy(t, provider("only", only, "key "+geminiProviderKey)+"hedge off\n")

	out, res := runGemini(t, p.URL)
	ups := map[string]*upstream{"only": only}
	if res.Exit == 0 || out.Response != "" {
		t.Fatalf("the only provider is rate limited, yet the CLI exited %d with %q\n%s\n%s", res.Exit, out.Response, geminiTrace(ups), res)
	}
	if strings.Contains(res.Stderr, "Attempt 2") || len(geminiRecs(only)) != 1 {
		t.Fatalf("the CLI retried a 429 that said to come back in an hour: upstream saw %d requests\n%s\n%s", len(geminiRecs(only)), geminiTrace(ups), res)
	}
}

// geminiPrimarySecondary starts a primary and a secondary simulated Gemini
// provider, each with the proxy's own key, behind a proxy with no hedge and
// no retry on the same provider; ups names them for geminiTrace.
func geminiPrimarySecondary(t *testing.T, primaryCfg, secondaryCfg sim.Config) (p *proxy, primary, secondary *upstream, ups map[string]*upstream) {
	t.Helper()
	primary, secondary = newUpstream(t, primaryCfg), newUpstream(t, secondaryCfg)
	p = startProxy(t, provider("primary", primary, "key "+geminiProviderKey, "priority 0")+
		provider("secondary", secondary, "key "+geminiProviderKey, "priority 1")+
		"hedge off\n retry {\n same_provider 0\n }\n")
	return p, primary, secondary, map[string]*upstream{"primary": primary, "secondary": secondary}
}
