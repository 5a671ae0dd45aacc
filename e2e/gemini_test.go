package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/genai"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// geminiClient is the Go genai SDK on the Gemini API backend, pointed at
// the proxy; it sends the key as x-goog-api-key and streams with ?alt=sse.
func geminiClient(t testing.TB, p *proxy, key string) *genai.Client {
	t.Helper()
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		Backend:     genai.BackendGeminiAPI,
		APIKey:      key,
		HTTPOptions: genai.HTTPOptions{BaseURL: p.URL},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// geminiGenerate asks for one answer, streamed or not, and returns its text,
// the usage the SDK saw last and the SDK's error.
func geminiGenerate(ctx context.Context, c *genai.Client, model string, stream bool) (string, *genai.GenerateContentResponseUsageMetadata, error) {
	if !stream {
		resp, err := c.Models.GenerateContent(ctx, model, genai.Text("hello"), nil)
		if err != nil {
			return "", nil, err
		}
		return resp.Text(), resp.UsageMetadata, nil
	}
	var b strings.Builder
	var um *genai.GenerateContentResponseUsageMetadata
	for resp, err := range c.Models.GenerateContentStream(ctx, model, genai.Text("hello"), nil) {
		if err != nil {
			return b.String(), um, err
		}
		b.WriteString(resp.Text())
		if resp.UsageMetadata != nil {
			um = resp.UsageMetadata
		}
	}
	return b.String(), um, nil
}

// geminiArray calls streamGenerateContent without alt=sse, as a raw HTTP
// client: the answer is one JSON array of chunks.
func geminiArray(ctx context.Context, p *proxy, model, query string) (int, []byte, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.URL+"/v1beta/models/"+model+":streamGenerateContent"+query,
		strings.NewReader(`{"contents":[{"role":"user","parts":[{"text":"hello"}]}]}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// arrayText joins the text parts of a JSON-array stream.
func arrayText(t testing.TB, body []byte) string {
	t.Helper()
	var chunks []genai.GenerateContentResponse
	if err := json.Unmarshal(body, &chunks); err != nil {
		t.Fatalf("JSON-array stream %s: %v", body, err)
	}
	var b strings.Builder
	for _, c := range chunks {
		b.WriteString(c.Text())
	}
	return b.String()
}

// geminiCompletions counts the Gemini completion requests an upstream got.
func geminiCompletions(u *upstream) int {
	n := 0
	for _, r := range u.Requests() {
		if strings.HasSuffix(r.Path, ":generateContent") || strings.HasSuffix(r.Path, ":streamGenerateContent") {
			n++
		}
	}
	return n
}

var geminiModes = []string{"sse", "generate", "array"}

// geminiAsk runs one request of a mode and returns its text.
func geminiAsk(t *testing.T, p *proxy, mode, model string) (string, error) {
	ctx := ctxTimeout(t, 15*time.Second)
	switch mode {
	case "array":
		status, body, err := geminiArray(ctx, p, model, "")
		if err != nil {
			return "", err
		}
		if status != 200 {
			return "", fmt.Errorf("status %d: %s", status, body)
		}
		return arrayText(t, body), nil
	}
	text, _, err := geminiGenerate(ctx, geminiClient(t, p, "client-key"), model, mode == "sse")
	return text, err
}

// Every failure a Gemini primary can have before its first byte ends with
// the secondary's answer: through the genai SDK streaming (SSE) and not,
// and as a JSON-array stream (a non-stream body to the proxy).
func TestGeminiFailoverBeforeFirstByte(t *testing.T) {
	cases := []struct {
		name    string
		primary sim.Config
		refused bool
		block   string
	}{
		{name: "503", primary: sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 503}}}},
		{name: "429 RESOURCE_EXHAUSTED with retryDelay", primary: sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 429, RetryAfter: "1"}}},
			block: "retry {\n backoff 10ms 20ms\n }"},
		{name: "connection refused", refused: true},
		// 2 s: the healthy secondary answers well within it on a loaded machine
		// under -race; the primary would take 30 s.
		{name: "first-byte timeout", primary: sim.Config{FirstToken: caddyDur(30 * time.Second)}, block: "timeouts {\n first_byte 2s\n response 2s\n }"},
		{name: "fake-200 error chunk", primary: sim.Config{Faults: []sim.Fault{{Kind: sim.FaultFake200}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			primary := newUpstream(t, tc.primary)
			if tc.refused {
				primary.URL = "http://127.0.0.1:" + fmt.Sprint(freePort(t))
			}
			secondary := newUpstream(t, sim.Config{})
			// Keyed providers: a 429 to a pass-through key would be the
			// client's own answer (SPEC 15).
			p := startProxy(t, provider("primary", primary, "priority 0", "key sk-op")+provider("secondary", secondary, "priority 1", "key sk-op")+
				"hedge off\n cooldown {\n failures 100\n }\n"+tc.block)
			for _, mode := range geminiModes {
				text, err := geminiAsk(t, p, mode, "gemini-test")
				if err != nil {
					t.Fatalf("%s: %v", mode, err)
				}
				if text != wantText {
					t.Fatalf("%s: text %q, want %q", mode, text, wantText)
				}
			}
			if n := geminiCompletions(secondary); n != len(geminiModes) {
				t.Fatalf("secondary served %d requests, want %d", n, len(geminiModes))
			}
		})
	}
}

// noRetryAfter hides the simulator's Retry-After header, so that only the
// RetryInfo in the 429 body says how long to wait, as Gemini's answers do.
type noRetryAfter struct{ http.ResponseWriter }

func (w noRetryAfter) WriteHeader(code int) {
	w.Header().Del("Retry-After")
	w.ResponseWriter.WriteHeader(code)
}

func (w noRetryAfter) Flush() { w.ResponseWriter.(http.Flusher).Flush() }

func (w noRetryAfter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// The retryDelay of a 429 RESOURCE_EXHAUSTED body is a Retry-After: the
// same provider is tried again once it has passed (retry.same_provider),
// where a bare 429 would fail over at once.
func TestGeminiRetryDelayHonoured(t *testing.T) {
	s := sim.New(sim.Config{Tokens: 9, Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 429, RetryAfter: "1", Count: 1}}})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.ServeHTTP(noRetryAfter{w}, r) }))
	t.Cleanup(srv.Close)
	primary := &upstream{Simulator: s, URL: srv.URL}
	secondary := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("primary", primary, "priority 0", "key sk-op")+provider("secondary", secondary, "priority 1", "key sk-op")+
		"hedge off\n cooldown {\n failures 100\n }\n retry {\n backoff 10ms 20ms\n }")

	text, _, err := geminiGenerate(ctxTimeout(t, 10*time.Second), geminiClient(t, p, "k"), "gemini-test", true)
	if err != nil || text != wantText {
		t.Fatalf("stream: %q, %v", text, err)
	}
	reqs := primary.Requests()
	if len(reqs) != 2 || geminiCompletions(secondary) != 0 {
		t.Fatalf("primary got %d requests, secondary %d; want the primary retried after its retryDelay", len(reqs), geminiCompletions(secondary))
	}
	if reqs[0].Status != 429 || reqs[1].Status != 200 {
		t.Fatalf("primary statuses %d, %d; want 429 then 200", reqs[0].Status, reqs[1].Status)
	}
	if gap := reqs[1].Start.Sub(reqs[0].Start); gap < 900*time.Millisecond {
		t.Fatalf("retried after %v, before the 1s retryDelay", gap)
	}
}

// A 400 INVALID_ARGUMENT is the request's own: it reaches the SDK as that
// APIError after exactly one upstream attempt, streaming or not.
func TestGeminiRequestErrorPassesThrough(t *testing.T) {
	primary := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 400}}})
	secondary := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("primary", primary, "priority 0")+provider("secondary", secondary, "priority 1"))
	for _, stream := range []bool{false, true} {
		_, _, err := geminiGenerate(ctxTimeout(t, 5*time.Second), geminiClient(t, p, "k"), "gemini-test", stream)
		var apiErr genai.APIError
		if !errors.As(err, &apiErr) || apiErr.Code != 400 || apiErr.Status != "INVALID_ARGUMENT" {
			t.Fatalf("stream %v: want a 400 INVALID_ARGUMENT APIError, got %v", stream, err)
		}
	}
	if n := geminiCompletions(primary) + geminiCompletions(secondary); n != 2 {
		t.Fatalf("upstream attempts = %d, want exactly 1 per request (2)", n)
	}
}

// A Gemini stream cut after commit reaches the SDK as an error (the error
// chunk), never as a clean end; a complete one ends cleanly with no event
// the proxy made up.
func TestGeminiCutStreamIsAnError(t *testing.T) {
	up := newUpstream(t, sim.Config{Tokens: 30, Faults: []sim.Fault{{Kind: sim.FaultCut, After: 10}}})
	p := startProxy(t, provider("only", up))
	text, _, err := geminiGenerate(ctxTimeout(t, 5*time.Second), geminiClient(t, p, "k"), "gemini-test", true)
	var apiErr genai.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != 502 {
		t.Fatalf("cut stream: text %q, err %v; want a 502 APIError", text, err)
	}
	if text == "" {
		t.Fatal("cut stream: no text before the error: the cut was not after commit")
	}
}

// Usage: the SDK sees the provider's usageMetadata, and the request log
// line and the dialect label carry the same counts.
func TestGeminiUsageThroughProxy(t *testing.T) {
	up := newUpstream(t, sim.Config{CacheRead: 5})
	p := startProxy(t, provider("only", up))
	for _, stream := range []bool{true, false} {
		text, um, err := geminiGenerate(ctxTimeout(t, 5*time.Second), geminiClient(t, p, "k"), "gemini-test", stream)
		if err != nil || text != wantText {
			t.Fatalf("stream %v: %q, %v", stream, text, err)
		}
		if um == nil || um.CandidatesTokenCount != 9 || um.CachedContentTokenCount != 5 || um.PromptTokenCount < 5 {
			t.Fatalf("stream %v: usage %+v", stream, um)
		}
	}
	lines := observeRequestLines(t, p.LogFile, 2)
	for _, l := range lines {
		if l["dialect"] != "gemini" || l["model"] != "gemini-test" || l["output_tokens"] != 9.0 || l["cache_read_tokens"] != 5.0 ||
			l["outcome"] != "success" {
			t.Errorf("request line %v: want dialect gemini, model gemini-test, 9 output and 5 cache-read tokens", l)
		}
		if in, _ := l["input_tokens"].(float64); in < 5 {
			t.Errorf("request line input_tokens = %v, want >= 5", l["input_tokens"])
		}
	}
}

// A client's key, in ?key= or x-goog-api-key, never reaches a provider that
// has a key of its own: the provider gets its key as x-goog-api-key and no
// key parameter. A provider without a key gets
// the client's as sent.
func TestGeminiClientKeyNeverReachesKeyedProvider(t *testing.T) {
	keyed := newUpstream(t, sim.Config{Key: "sk-operator"})
	open := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("keyed", keyed, "api gemini", "key sk-operator", "models gemini-keyed")+provider("open", open, "models gemini-open"))

	ctx := ctxTimeout(t, 10*time.Second)
	status, body, err := geminiArray(ctx, p, "gemini-keyed", "?key=client-key&alt=json")
	if err != nil || status != 200 || arrayText(t, body) != wantText {
		t.Fatalf("?key= to the keyed provider: %d %s %v", status, body, err)
	}
	if text, _, err := geminiGenerate(ctx, geminiClient(t, p, "client-key"), "gemini-keyed", true); err != nil || text != wantText {
		t.Fatalf("x-goog-api-key to the keyed provider: %q %v", text, err)
	}
	recs := keyed.Requests()
	if len(recs) != 2 {
		t.Fatalf("keyed provider got %d requests, want 2", len(recs))
	}
	for _, r := range recs {
		if r.KeyParam != "" || r.GoogAPIKey != "sk-operator" {
			t.Errorf("keyed provider saw key param %q, x-goog-api-key %q; want none and the operator's", r.KeyParam, r.GoogAPIKey)
		}
	}

	status, body, err = geminiArray(ctx, p, "gemini-open", "?key=client-key")
	if err != nil || status != 200 || arrayText(t, body) != wantText {
		t.Fatalf("?key= to the open provider: %d %s %v", status, body, err)
	}
	if r := open.Requests(); len(r) != 1 || r[0].KeyParam != "client-key" {
		t.Fatalf("open provider records %+v: want the client's key passed through", r)
	}
}

// A model rewrite rewrites the Gemini path, and models globs match the
// model of the path.
func TestGeminiModelRewrite(t *testing.T) {
	up := newUpstream(t, sim.Config{})
	other := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("rw", up, "models gemini-alias", "model gemini-alias gemini-real")+provider("other", other, "models claude-*"))
	text, _, err := geminiGenerate(ctxTimeout(t, 5*time.Second), geminiClient(t, p, "k"), "gemini-alias", true)
	if err != nil || text != wantText {
		t.Fatalf("%q %v", text, err)
	}
	recs := up.Requests()
	if len(recs) != 1 || recs[0].Path != "/v1beta/models/gemini-real:streamGenerateContent" || recs[0].Model != "gemini-real" {
		t.Fatalf("records %+v: want the rewritten path", recs)
	}
	if len(other.Requests()) != 0 {
		t.Fatal("a provider whose models do not match got the request")
	}
}

// A provider whose own key Gemini refuses (400 API_KEY_INVALID) is broken,
// not the request: the request fails over. With the client's key (a
// provider without one) the same answer is the client's, after one try.
func TestGeminiInvalidKey(t *testing.T) {
	wrong := newUpstream(t, sim.Config{Key: "right"})
	good := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("wrong", wrong, "key not-right", "priority 0")+provider("good", good, "priority 1")+"hedge off")
	text, _, err := geminiGenerate(ctxTimeout(t, 5*time.Second), geminiClient(t, p, "k"), "gemini-test", true)
	if err != nil || text != wantText {
		t.Fatalf("operator key refused: %q %v; want the next provider's answer", text, err)
	}

	own := newUpstream(t, sim.Config{Key: "right"})
	other := newUpstream(t, sim.Config{})
	p = startProxy(t, provider("own", own, "priority 0")+provider("other", other, "priority 1")+"hedge off")
	_, _, err = geminiGenerate(ctxTimeout(t, 5*time.Second), geminiClient(t, p, "client-wrong"), "gemini-test", false)
	var apiErr genai.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != 400 || !strings.Contains(apiErr.Message, "API key not valid") {
		t.Fatalf("client key refused: %v; want Gemini's 400 API key not valid", err)
	}
	if n := geminiCompletions(other); n != 0 {
		t.Fatalf("a refused client key was tried on another provider (%d)", n)
	}
}

// countTokens and the model list and model calls are forwarded (SPEC 10,
// other paths) in Gemini's shape, the keyed provider getting its key only.
func TestGeminiAuxPaths(t *testing.T) {
	up := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("only", up, "api gemini", "key sk-operator"))
	ctx := ctxTimeout(t, 10*time.Second)
	c := geminiClient(t, p, "client-key")
	ct, err := c.Models.CountTokens(ctx, "gemini-test", genai.Text("hello there"), nil)
	if err != nil || ct.TotalTokens <= 0 {
		t.Fatalf("countTokens: %+v %v", ct, err)
	}
	m, err := c.Models.Get(ctx, "gemini-test", nil)
	if err != nil || !strings.Contains(m.Name, "gemini-test") {
		t.Fatalf("get model: %+v %v", m, err)
	}
	if _, err := c.Models.List(ctx, nil); err != nil {
		t.Fatalf("list models: %v", err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.URL+"/v1beta/models/gemini-test:countTokens?key=client-key",
		strings.NewReader(`{"contents":[{"parts":[{"text":"hi"}]}]}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("?key= countTokens: status %d", resp.StatusCode)
	}
	recs := up.Requests()
	if len(recs) != 4 {
		t.Fatalf("provider got %d requests, want 4", len(recs))
	}
	for _, r := range recs {
		if r.GoogAPIKey != "sk-operator" || r.KeyParam != "" {
			t.Errorf("%s %s: x-goog-api-key %q, key param %q; want the operator's key only", r.Method, r.Path, r.GoogAPIKey, r.KeyParam)
		}
	}
}

// Requests that name one cachedContent go to the provider holding it (the
// cache lives where it was made: here p1, directly, so the proxy finds it
// and keeps to it), while requests without one spread.
func TestGeminiCachedContentAffinity(t *testing.T) {
	ups := []*upstream{newUpstream(t, sim.Config{}), newUpstream(t, sim.Config{}), newUpstream(t, sim.Config{})}
	block := "hedge off\n"
	for i, u := range ups {
		block += provider(fmt.Sprintf("p%d", i), u)
	}
	p := startProxy(t, block)
	c := geminiClient(t, p, "k")
	served := func(cache string) int {
		before := make([]int, len(ups))
		for i, u := range ups {
			before[i] = geminiCompletions(u)
		}
		var cfg *genai.GenerateContentConfig
		if cache != "" {
			cfg = &genai.GenerateContentConfig{CachedContent: cache}
		}
		if _, err := c.Models.GenerateContent(ctxTimeout(t, 5*time.Second), "gemini-test", genai.Text("hello"), cfg); err != nil {
			t.Fatal(err)
		}
		for i, u := range ups {
			if geminiCompletions(u) == before[i]+1 {
				return i
			}
		}
		t.Fatal("no provider served the request")
		return -1
	}
	cache, err := geminiClient(t, &proxy{URL: ups[1].URL}, "k").Caches.Create(ctxTimeout(t, 5*time.Second), "gemini-test", nil)
	if err != nil {
		t.Fatal(err)
	}
	served(cache.Name) // finds the holder: the providers asked before it answered 403
	for i := 0; i < 20; i++ {
		if got := served(cache.Name); got != 1 {
			t.Fatalf("request %d with the cache went to p%d, not p1 which holds it", i+2, got)
		}
	}
	seen := map[int]bool{}
	for i := 0; i < 40; i++ {
		seen[served("")] = true
	}
	if len(seen) < 2 {
		t.Fatalf("40 requests without a cache all went to one provider")
	}
}

// A Gemini SSE stream is hedged: a primary slow to its first chunk is
// raced, and the alternative's answer wins.
func TestGeminiHedge(t *testing.T) {
	primary := newUpstream(t, sim.Config{FirstToken: caddyDur(5 * time.Second)})
	alt := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("primary", primary, "priority 0")+provider("alternative", alt, "priority 1")+
		"hedge {\n after 300ms\n }\n")
	text, _, err := geminiGenerate(ctxTimeout(t, 10*time.Second), geminiClient(t, p, "k"), "gemini-test", true)
	if err != nil || text != wantText {
		t.Fatalf("%q %v", text, err)
	}
	if np, na := geminiCompletions(primary), geminiCompletions(alt); np != 1 || na != 1 {
		t.Fatalf("primary saw %d requests, alternative %d; want 1 each", np, na)
	}
	l := observeRequestLines(t, p.LogFile, 1)[0]
	if l["hedged"] != true || l["provider"] != "alternative" || l["dialect"] != "gemini" {
		t.Fatalf("request line %v: want hedged, served by the alternative", l)
	}
}

// The proxy's own errors reach a Gemini client in Google's shape, which
// the SDK reads as an APIError with the code and status.
func TestGeminiProxyErrorShape(t *testing.T) {
	dead := &upstream{URL: "http://127.0.0.1:" + fmt.Sprint(freePort(t))}
	p := startProxy(t, provider("dead", dead))
	for _, stream := range []bool{false, true} {
		_, _, err := geminiGenerate(ctxTimeout(t, 5*time.Second), geminiClient(t, p, "k"), "gemini-test", stream)
		var apiErr genai.APIError
		if !errors.As(err, &apiErr) || apiErr.Code != 503 || apiErr.Status != "UNAVAILABLE" || apiErr.Message == "" {
			t.Fatalf("stream %v: want a 503 UNAVAILABLE APIError, got %#v", stream, err)
		}
	}
	resp, err := http.Get(p.URL + "/v1beta/models/gemini-test:generateContent")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Error genai.APIError `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != 405 || body.Error.Code != 405 {
		t.Fatalf("GET on a completion path: %d %+v %v", resp.StatusCode, body, err)
	}
}

// A fallback model reaches a Gemini provider in the path: when the model's
// only provider is overloaded, the fallback model's provider gets
// .../models/{fallback}:streamGenerateContent and answers.
func TestGeminiFallbackModel(t *testing.T) {
	a := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 503}}})
	b := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("a", a, "models gemini-pro", "key sk-op")+provider("b", b, "models gemini-flash", "key sk-op")+
		"hedge off\n retry {\n attempts 3\n backoff 10ms 20ms\n fallback_model gemini-pro gemini-flash\n }\n")
	for _, stream := range []bool{true, false} {
		text, _, err := geminiGenerate(ctxTimeout(t, 10*time.Second), geminiClient(t, p, "k"), "gemini-pro", stream)
		if err != nil || text != wantText {
			t.Fatalf("stream %v: %q %v", stream, text, err)
		}
	}
	recs := b.Requests()
	if len(recs) != 2 {
		t.Fatalf("fallback provider got %d requests, want 2", len(recs))
	}
	for _, r := range recs {
		if !strings.HasPrefix(r.Path, "/v1beta/models/gemini-flash:") || r.Model != "gemini-flash" {
			t.Errorf("fallback request %s for %q: want the fallback model in the path", r.Path, r.Model)
		}
	}
}
