package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// The metrics collectors are package-level and registered into every
// config's registry, so counts accumulate across the tests of one process:
// every assertion here compares two scrapes.

// After a hedged request, a failed-over request and a 400, /metrics holds
// exactly the expected increments; an unknown model name never becomes a
// label; hedges refused by the budget are counted.
func TestObserveMetrics(t *testing.T) {
	slow := newUpstream(t, sim.Config{FirstToken: caddyDur(2 * time.Second)})
	fast := newUpstream(t, sim.Config{})
	down := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 503}}})
	up := newUpstream(t, sim.Config{})
	bad := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 400}}})
	catchAll := newUpstream(t, sim.Config{})
	p := startProxy(t,
		provider("obs-slow", slow, "vendor v-slow", "models claude-hedge", "priority 0")+
			provider("obs-fast", fast, "vendor v-fast", "models claude-hedge", "priority 1")+
			provider("obs-down", down, "vendor v-down", "models claude-failover", "priority 0")+
			provider("obs-up", up, "vendor v-up", "models claude-failover", "priority 1")+
			provider("obs-bad", bad, "vendor v-bad", "models claude-bad")+
			provider("obs-any", catchAll, "vendor v-any", "priority 5")+
			// The hedge fires at 100ms against a 2s first token: the margin
			// absorbs a loaded machine.
			"hedge {\n after 100ms\n }\nretry {\n backoff 10ms 20ms\n }\ncooldown {\n failures 2\n }")

	before, _ := observeScrape(t, p)

	// hedged: obs-slow is raced by obs-fast, which wins.
	if m, err := streamAnthropic(ctxTimeout(t, 10*time.Second), anthropicClient(p, "k"), anthropicParams("claude-hedge")); err != nil || messageText(m) != wantText {
		t.Fatalf("hedged request: %q, %v", messageText(m), err)
	}
	// failed over: obs-down answers 503, is retried once, opens, and obs-up serves.
	if m, err := anthropicClient(p, "k").Messages.New(ctxTimeout(t, 10*time.Second), anthropicParams("claude-failover")); err != nil || messageText(*m) != wantText {
		t.Fatalf("failed-over request: %v", err)
	}
	// 400: the client's problem, passed through after one attempt.
	var apiErr *anthropic.Error
	if _, err := anthropicClient(p, "k").Messages.New(ctxTimeout(t, 10*time.Second), anthropicParams("claude-bad")); !errors.As(err, &apiErr) || apiErr.StatusCode != 400 {
		t.Fatalf("bad request: want a 400, got %v", err)
	}

	// The response reaches the client before the handler publishes its
	// metrics: wait for the three requests to be counted.
	after := observeScrapeUntil(t, p, func(m observeMetrics) bool {
		return m.sum("caddy_llm_hedge_requests_total")-before.sum("caddy_llm_hedge_requests_total") >= 3
	})
	want := map[string]float64{
		`caddy_llm_hedge_requests_total{outcome="success"}`:                                2,
		`caddy_llm_hedge_requests_total{outcome="client_error"}`:                           1,
		`caddy_llm_hedge_attempts_total{provider="obs-slow",result="lost"}`:                1,
		`caddy_llm_hedge_attempts_total{provider="obs-fast",result="won"}`:                 1,
		`caddy_llm_hedge_attempts_total{provider="obs-down",result="failed_overloaded"}`:   2,
		`caddy_llm_hedge_attempts_total{provider="obs-up",result="won"}`:                   1,
		`caddy_llm_hedge_attempts_total{provider="obs-bad",result="failed_request_error"}`: 1,
		`caddy_llm_hedge_hedges_total{provider="obs-fast"}`:                                1,
		`caddy_llm_hedge_first_event_seconds_count{provider="obs-fast"}`:                   1,
		`caddy_llm_hedge_first_event_seconds_count{provider="obs-up"}`:                     1,
		`caddy_llm_hedge_tokens_total{kind="output",provider="obs-fast"}`:                  9,
		`caddy_llm_hedge_tokens_total{kind="output",provider="obs-up"}`:                    9,
		`caddy_llm_hedge_retries_total{provider="obs-down",reason="overloaded"}`:           1,
		// every attempt's tokens by purpose (docs/cost.md): the answers'
		// output; the hedge loser's input is an input line
		`caddy_llm_hedge_purpose_tokens_total{kind="output",provider="obs-fast",purpose="answer"}`: 9,
		`caddy_llm_hedge_purpose_tokens_total{kind="output",provider="obs-up",purpose="answer"}`:   9,
	}
	for series, v := range after {
		if !strings.HasPrefix(series, "caddy_llm_hedge_") || strings.HasPrefix(series, "caddy_llm_hedge_provider_state") ||
			strings.Contains(series, "_bucket{") || strings.Contains(series, "_sum{") || strings.Contains(series, `kind="input"`) {
			continue
		}
		if d := v - before[series]; d != want[series] {
			t.Errorf("%s grew by %g, want %g", series, d, want[series])
		}
	}
	for series := range want {
		if _, ok := after[series]; !ok {
			t.Errorf("%s missing from /metrics", series)
		}
	}
	for _, prov := range []string{"obs-fast", "obs-up"} {
		series := fmt.Sprintf(`caddy_llm_hedge_tokens_total{kind="input",provider=%q}`, prov)
		if d := after[series] - before[series]; d <= 0 {
			t.Errorf("%s grew by %g, want > 0", series, d)
		}
	}
	for prov, state := range map[string]float64{"obs-down": 2, "obs-up": 0, "obs-slow": 0, "obs-fast": 0} {
		series := fmt.Sprintf(`caddy_llm_hedge_provider_state{provider=%q}`, prov)
		if v, ok := after[series]; !ok || v != state {
			t.Errorf("%s = %g (present %v), want %g", series, v, ok, state)
		}
	}

	// A model name is client input: it must not become a label.
	const unknown = "zz-unlisted-model-7b1f3c"
	if _, err := anthropicClient(p, "k").Messages.New(ctxTimeout(t, 10*time.Second), anthropicParams(unknown)); err != nil {
		t.Fatalf("unknown model (served by the catch-all provider): %v", err)
	}
	if _, err := openaiClient(p, "k").Chat.Completions.New(ctxTimeout(t, 10*time.Second), openaiParams(unknown)); err != nil {
		t.Fatalf("unknown model, openai: %v", err)
	}
	observeScrapeUntil(t, p, func(m observeMetrics) bool {
		return m.delta(before, `caddy_llm_hedge_attempts_total{provider="obs-any",result="won"}`) >= 2
	})
	if _, raw := observeScrape(t, p); strings.Contains(raw, unknown) {
		t.Fatalf("client-supplied model name %q appears in /metrics", unknown)
	}

	// 16 hedgeable requests at once: the hedge budget (10%% of requests +
	// 1/s over 10s) lets about 12 hedge in total; each request either
	// hedges or is counted as refused by the budget, exactly once.
	before, _ = observeScrape(t, p)
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			if _, err := streamAnthropic(ctxTimeout(t, 20*time.Second), anthropicClient(p, "k"), anthropicParams("claude-hedge")); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent hedgeable request: %v", err)
	}
	after = observeScrapeUntil(t, p, func(m observeMetrics) bool {
		return m[`caddy_llm_hedge_requests_total{outcome="success"}`]-before[`caddy_llm_hedge_requests_total{outcome="success"}`] >= n
	})
	hedged := after.delta(before, `caddy_llm_hedge_hedges_total{provider="obs-fast"}`)
	refused := after.delta(before, `caddy_llm_hedge_budget_exhausted_total{kind="hedge"}`)
	if hedged+refused != n || refused < 1 {
		t.Fatalf("of %d hedgeable requests %g hedged and %g were refused by the budget; want a sum of %d and at least one refusal", n, hedged, refused, n)
	}
}

// The request log line of a hedged request carries the whole decision
// chain; a lone success logs at debug, a success after a hedge or a
// failover and a client abort at info; no prompt and no completion text is
// ever logged.
func TestObserveRequestLog(t *testing.T) {
	slow := newUpstream(t, sim.Config{FirstToken: caddyDur(2 * time.Second)})
	fast := newUpstream(t, sim.Config{})
	down := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 503}}})
	p := startProxy(t,
		provider("log-slow", slow, "vendor v-slow", "models claude-hedge claude-abort", "priority 0")+
			provider("log-fast", fast, "vendor v-fast", "models claude-hedge claude-quick claude-fo", "priority 1")+
			provider("log-down", down, "vendor v-down", "models claude-fo", "priority 0")+
			"hedge {\n after 100ms\n }\nretry {\n backoff 10ms 20ms\n }\ncooldown {\n failures 100\n }")

	prompt := fmt.Sprintf("observe-prompt-%d: tell me about the secret plan", time.Now().UnixNano())
	params := func(model string) anthropic.MessageNewParams {
		return anthropic.MessageNewParams{
			Model: anthropic.Model(model), MaxTokens: 64,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))},
		}
	}
	if _, err := streamAnthropic(ctxTimeout(t, 10*time.Second), anthropicClient(p, "k"), params("claude-hedge")); err != nil {
		t.Fatalf("hedged: %v", err)
	}
	if _, err := anthropicClient(p, "k").Messages.New(ctxTimeout(t, 10*time.Second), params("claude-quick")); err != nil {
		t.Fatalf("single attempt: %v", err)
	}
	if _, err := anthropicClient(p, "k").Messages.New(ctxTimeout(t, 10*time.Second), params("claude-fo")); err != nil {
		t.Fatalf("failover: %v", err)
	}
	// A client that leaves before its first token: the only candidate is
	// slow, so nothing was committed when it went.
	abortCtx, abort := context.WithCancel(context.Background())
	aborted := make(chan error, 1)
	go func() {
		_, err := streamAnthropic(abortCtx, anthropicClient(p, "k"), params("claude-abort"))
		aborted <- err
	}()
	observeEventually(t, func() bool {
		for _, r := range slow.Requests() {
			if r.Model == "claude-abort" {
				return true
			}
		}
		return false
	}, func() string { return "the slow provider never saw the request the client aborts" })
	abort()
	if err := <-aborted; err == nil {
		t.Fatal("aborted stream finished cleanly")
	}
	lines := observeRequestLines(t, p.LogFile, 4)

	byModel := map[string]map[string]any{}
	for _, l := range lines {
		byModel[l["model"].(string)] = l
	}
	h := byModel["claude-hedge"]
	if h == nil {
		t.Fatalf("no request log line for the hedged request in %v", lines)
	}
	if h["level"] != "info" || h["msg"] != "llm request" {
		t.Errorf("hedged line: level %v msg %q; want info and the static message", h["level"], h["msg"])
	}
	for k, v := range map[string]any{"dialect": "anthropic", "provider": "log-fast", "outcome": "success", "hedged": true,
		"status": 200.0, "output_tokens": 9.0, "served_model": "claude-hedge"} {
		if h[k] != v {
			t.Errorf("hedged line: %s = %v, want %v", k, h[k], v)
		}
	}
	if fe, _ := h["first_event_ms"].(float64); fe < 1 {
		t.Errorf("hedged line: first_event_ms = %v, want >= 1", h["first_event_ms"])
	}
	chain := observeChain(t, h)
	if len(chain) != 2 {
		t.Fatalf("hedged chain has %d entries, want 2: %v", len(chain), chain)
	}
	first, hedge := chain[0], chain[1]
	if first["provider"] != "log-slow" || first["event"] != "initial" || first["outcome"] != "hedge_loser_cancelled" ||
		first["status"] != 200.0 || first["error_class"] != nil || first["first_event_ms"] != nil {
		t.Errorf("first attempt: %v; want log-slow initial hedge_loser_cancelled, status 200 (headers came), no class, no first event", first)
	}
	if off := first["offset_ms"].(float64); off >= 100 {
		t.Errorf("first attempt offset %vms, want it to start at once (< the 100ms hedge delay)", off)
	}
	if hedge["provider"] != "log-fast" || hedge["event"] != "hedge_triggered" || hedge["outcome"] != "hedge_winner" || hedge["status"] != 200.0 {
		t.Errorf("hedge attempt: %v; want log-fast hedge_triggered hedge_winner, status 200", hedge)
	}
	if off := hedge["offset_ms"].(float64); off < 100 {
		t.Errorf("hedge offset %vms, want >= the 100ms hedge delay", off)
	}
	if fe, _ := hedge["first_event_ms"].(float64); fe < 1 {
		t.Errorf("hedge winner first_event_ms = %v, want >= 1", hedge["first_event_ms"])
	}

	q := byModel["claude-quick"]
	if q == nil || q["level"] != "debug" || q["outcome"] != "success" || len(observeChain(t, q)) != 1 ||
		observeChain(t, q)[0]["outcome"] != "request_success" {
		t.Errorf("a lone successful attempt must log at debug with one request_success step; got %v", q)
	}

	fo := byModel["claude-fo"]
	if fo == nil || fo["level"] != "info" || fo["provider"] != "log-fast" {
		t.Fatalf("failed-over request: want an info line served by log-fast, got %v", fo)
	}
	var steps []string
	for _, e := range observeChain(t, fo) {
		steps = append(steps, fmt.Sprintf("%v/%v/%v/%v/%v", e["provider"], e["event"], e["outcome"], e["status"], e["error_class"]))
	}
	wantSteps := []string{
		"log-down/initial/provider_error/503/overloaded",
		"log-down/retry/provider_error/503/overloaded",
		"log-fast/failover/request_success/200/<nil>",
	}
	if strings.Join(steps, " ") != strings.Join(wantSteps, " ") {
		t.Errorf("failover chain:\n got %v\nwant %v", steps, wantSteps)
	}

	ab := byModel["claude-abort"]
	if ab == nil || ab["level"] != "info" || ab["outcome"] != "client_abort" || ab["status"] != 499.0 || ab["provider"] != "" {
		t.Errorf("aborted request: want an info line, outcome client_abort, status 499, no provider; got %v", ab)
	} else if c := observeChain(t, ab); len(c) != 1 || c[0]["outcome"] != "client_abort" || c[0]["error_class"] != "client_abort" {
		t.Errorf("aborted request chain: %v; want one attempt ended by client_abort", c)
	}

	all := p.logs(t)
	for _, secret := range []string{prompt, "secret plan", sim.DefaultText, "jumps over the lazy"} {
		if strings.Contains(all, secret) {
			t.Errorf("log file contains prompt or completion text %q", secret)
		}
	}
}

// No key, configured or the client's own, appears in any log line at any
// level: neither the module's log nor Caddy's access log with the filter
// the README documents. Without that filter the access log does show an
// Anthropic client's X-Api-Key, which is why the filter is documented.
func TestObserveKeysNeverLogged(t *testing.T) {
	const (
		providerKey  = "sk-live-SECRET-prov-7f3a9c"
		anthropicKey = "sk-client-SECRET-ant-91d2"
		openaiKey    = "sk-client-SECRET-oai-42e8"
	)
	// The key is written as {env.VAR}, as the README says: a literal key is
	// part of the config, which Caddy itself logs at debug level (the
	// http.auto_https "adjusted config" line), autosaves and serves at
	// GET /config/. The placeholder is expanded only inside the module.
	t.Setenv("OBSERVE_TEST_PROVIDER_KEY", providerKey)
	keyed := newUpstream(t, sim.Config{Key: providerKey})
	// This one rejects the key it is configured with: an info-level line
	// with a 401 in its chain. (A 401 to a client's pass-through key is
	// the client's answer and would end the request.)
	t.Setenv("OBSERVE_TEST_REJECTED_KEY", "sk-live-SECRET-rejected-5e1b")
	rejecting := newUpstream(t, sim.Config{Key: "sk-something-else"})
	block := provider("obs-rejecting", rejecting, "vendor v-r", "key {env.OBSERVE_TEST_REJECTED_KEY}", "priority 0") +
		provider("obs-keyed", keyed, "vendor v-k", "key {env.OBSERVE_TEST_PROVIDER_KEY}", "priority 1") +
		"cooldown {\n failures 100\n }"

	// Control: an access log without the filter logs X-Api-Key.
	plainLog := filepath.Join(t.TempDir(), "access.log")
	p := startProxy(t, block, fmt.Sprintf("log {\n\t\toutput file %s\n\t\tformat json\n\t}", plainLog))
	if _, err := anthropicClient(p, anthropicKey).Messages.New(ctxTimeout(t, 10*time.Second), anthropicParams("claude-test")); err != nil {
		t.Fatal(err)
	}
	observeWaitFor(t, plainLog, anthropicKey)

	accessLog := filepath.Join(t.TempDir(), "access.log")
	p = startProxy(t, block, fmt.Sprintf(`log {
		output file %s
		format filter {
			request>headers>X-Api-Key delete
			request>headers>Authorization delete
		}
	}`, accessLog))
	ctx := ctxTimeout(t, 10*time.Second)
	if _, err := anthropicClient(p, anthropicKey).Messages.New(ctx, anthropicParams("claude-test")); err != nil {
		t.Fatal(err)
	}
	if _, err := streamAnthropic(ctx, anthropicClient(p, anthropicKey), anthropicParams("claude-test")); err != nil {
		t.Fatal(err)
	}
	if _, err := openaiClient(p, openaiKey).Chat.Completions.New(ctx, openaiParams("gpt-test")); err != nil {
		t.Fatal(err)
	}
	if _, err := streamOpenAI(ctx, openaiClient(p, openaiKey), openaiParams("gpt-test")); err != nil {
		t.Fatal(err)
	}
	// Not vacuous: the module's four request lines (info: each had a 401
	// first) and four access log entries with request headers are there.
	lines := observeRequestLines(t, p.LogFile, 4)
	for _, l := range lines {
		if l["level"] != "info" || len(observeChain(t, l)) != 2 || observeChain(t, l)[0]["status"] != 401.0 {
			t.Errorf("want an info line whose chain starts with the 401: %v", l)
		}
	}
	entries := observeAccessEntries(t, accessLog, 4)
	for _, e := range entries {
		hdr, _ := e["request"].(map[string]any)["headers"].(map[string]any)
		if hdr == nil || hdr["User-Agent"] == nil {
			t.Errorf("access entry without request headers: %v", e)
		}
	}
	for _, file := range []string{p.LogFile, accessLog} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{providerKey, anthropicKey, openaiKey, "SECRET"} {
			for _, line := range strings.Split(string(b), "\n") {
				if strings.Contains(line, key) {
					t.Errorf("%s contains key material %q: %s", filepath.Base(file), key, line)
					break
				}
			}
		}
	}
}

// The module's placeholders feed log_append, and its own llm_hedge object
// lands in the access log entry.
func TestObservePlaceholdersInAccessLog(t *testing.T) {
	primary := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 529}}})
	secondary := newUpstream(t, sim.Config{})
	accessLog := filepath.Join(t.TempDir(), "access.log")
	fields := []string{"provider", "model", "attempts", "hedged", "outcome", "first_byte_ms", "input_tokens", "output_tokens"}
	extra := []string{fmt.Sprintf("log {\n\t\toutput file %s\n\t\tformat json\n\t}", accessLog)}
	for _, f := range fields {
		extra = append(extra, fmt.Sprintf("log_append llm_%s {http.llm_hedge.%s}", f, f))
	}
	p := startProxy(t, provider("ph-primary", primary, "priority 0", "vendor a")+provider("ph-secondary", secondary, "priority 1", "vendor b")+
		"retry {\n same_provider 0\n }\ncooldown {\n failures 100\n }", extra...)

	if _, err := streamAnthropic(ctxTimeout(t, 10*time.Second), anthropicClient(p, "k"), anthropicParams("claude-placeholder")); err != nil {
		t.Fatal(err)
	}
	e := observeAccessEntries(t, accessLog, 1)[0]
	want := map[string]any{
		"provider": "ph-secondary", "model": "claude-placeholder", "hedged": false, "outcome": "success", "output_tokens": 9.0,
	}
	attempts := completions(primary) + completions(secondary)
	want["attempts"] = float64(attempts)
	obj, _ := e["llm_hedge"].(map[string]any)
	if obj == nil {
		t.Fatalf("access entry has no llm_hedge object: %v", e)
	}
	for _, f := range fields {
		appended, ok := e["llm_"+f]
		if !ok {
			t.Errorf("log_append llm_%s missing from the access entry", f)
			continue
		}
		if appended != obj[f] {
			t.Errorf("llm_%s = %v (%T) but llm_hedge.%s = %v (%T)", f, appended, appended, f, obj[f], obj[f])
		}
		if w, ok := want[f]; ok && appended != w {
			t.Errorf("llm_%s = %v, want %v", f, appended, w)
		}
	}
	if attempts < 2 {
		t.Errorf("the primary's 529 should have caused a failover; %d attempts", attempts)
	}
	for _, f := range []string{"first_byte_ms", "input_tokens"} {
		if v, _ := e["llm_"+f].(float64); v <= 0 {
			t.Errorf("llm_%s = %v, want a positive number", f, e["llm_"+f])
		}
	}
}

// The admin view shows, after traffic, each provider's recent first-event
// p50/p95, hedges won and lost and tokens, as JSON and as a text table.
func TestObserveAdminView(t *testing.T) {
	slow := newUpstream(t, sim.Config{FirstToken: caddyDur(2 * time.Second)})
	fast := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("adm-slow", slow, "vendor v-slow", "priority 0")+provider("adm-fast", fast, "vendor v-fast", "priority 1")+
		"hedge {\n after 100ms\n }")
	// Anthropic streams: an OpenAI stream reports usage only when the
	// client asks for it (stream_options.include_usage).
	for range 2 {
		if _, err := streamAnthropic(ctxTimeout(t, 10*time.Second), anthropicClient(p, "k"), anthropicParams("claude-test")); err != nil {
			t.Fatal(err)
		}
	}

	type view struct {
		Name       string   `json:"name"`
		HedgesWon  int64    `json:"hedges_won"`
		HedgesLost int64    `json:"hedges_lost"`
		P50        *float64 `json:"first_event_p50_ms"`
		P95        *float64 `json:"first_event_p95_ms"`
		Tokens     struct {
			Input  int64 `json:"input"`
			Output int64 `json:"output"`
		} `json:"tokens"`
	}
	var views map[string]view
	observeEventually(t, func() bool {
		var list []view
		if err := json.Unmarshal([]byte(observeGet(t, p.AdminURL+"/llm_hedge/providers")), &list); err != nil {
			t.Fatal(err)
		}
		views = map[string]view{}
		for _, v := range list {
			views[v.Name] = v
		}
		return views["adm-fast"].HedgesWon == 2 && views["adm-slow"].HedgesLost == 2
	}, func() string {
		return fmt.Sprintf("admin view %+v: want adm-fast 2 hedges won, adm-slow 2 lost", views)
	})

	f, s := views["adm-fast"], views["adm-slow"]
	if f.HedgesLost != 0 || s.HedgesWon != 0 {
		t.Errorf("fast lost %d, slow won %d; want 0 and 0", f.HedgesLost, s.HedgesWon)
	}
	if f.Tokens.Output != 18 || f.Tokens.Input <= 0 || s.Tokens.Output != 0 {
		t.Errorf("tokens: fast %+v slow %+v; want fast 18 output and some input, slow (a loser) none", f.Tokens, s.Tokens)
	}
	for _, v := range []view{f, s} {
		if v.P50 == nil || v.P95 == nil || *v.P50 <= 0 || *v.P95 < *v.P50 {
			t.Errorf("%s: first-event p50/p95 = %v/%v, want 0 < p50 <= p95", v.Name, v.P50, v.P95)
		}
	}
	// The loser's sample is how long it ran before it was cancelled (at
	// least the hedge delay): the tail must not hide behind cancellations.
	if s.P50 != nil && *s.P50 < 100 {
		t.Errorf("adm-slow p50 %vms, want >= the 100ms hedge delay", *s.P50)
	}

	text := observeGet(t, p.AdminURL+"/llm_hedge/providers?format=text")
	rows := map[string][]string{}
	for _, line := range strings.Split(text, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			rows[f[0]] = f
		}
	}
	if !strings.Contains(text, "HEDGES WON/LOST") || !strings.Contains(text, "FIRST EVENT p50/p95") {
		t.Fatalf("text view has no header:\n%s", text)
	}
	for name, want := range map[string][]string{"adm-fast": {"2/0", "/18", "ms"}, "adm-slow": {"0/2", "ms"}} {
		row := strings.Join(rows[name], " ")
		for _, w := range want {
			if !strings.Contains(row, w) {
				t.Errorf("text row %q lacks %q\n%s", row, w, text)
			}
		}
	}
}

// observeMetrics is one scrape: series ("name{labels}") -> value.
type observeMetrics map[string]float64

func (m observeMetrics) sum(name string) float64 {
	var s float64
	for k, v := range m {
		if strings.HasPrefix(k, name+"{") || k == name {
			s += v
		}
	}
	return s
}

func (m observeMetrics) delta(before observeMetrics, series string) float64 {
	return m[series] - before[series]
}

func observeGet(t testing.TB, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body := readAll(resp)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	return body
}

// observeScrape reads the admin /metrics endpoint in the text format.
func observeScrape(t testing.TB, p *proxy) (observeMetrics, string) {
	t.Helper()
	raw := observeGet(t, p.AdminURL+"/metrics")
	m := observeMetrics{}
	for _, line := range strings.Split(raw, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if i < 0 || err != nil {
			t.Fatalf("unparsable metrics line %q", line)
		}
		m[line[:i]] = v
	}
	return m, raw
}

// observeScrapeUntil scrapes until ready holds: the handler publishes a
// request's metrics after the client already has its response.
func observeScrapeUntil(t testing.TB, p *proxy, ready func(observeMetrics) bool) observeMetrics {
	t.Helper()
	var m observeMetrics
	observeEventually(t, func() bool { m, _ = observeScrape(t, p); return ready(m) },
		func() string { return "metrics never reached the expected state" })
	return m
}

// observeEventually polls cond for up to 10 seconds (generous: the
// machines are shared and the tests run with -race).
func observeEventually(t testing.TB, cond func() bool, why func() string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(why())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// observeJSONLines parses every JSON line of a log file.
func observeJSONLines(t testing.TB, file string) []map[string]any {
	t.Helper()
	f, err := os.Open(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// observeRequestLines waits for n request log lines of the module.
func observeRequestLines(t testing.TB, file string, n int) []map[string]any {
	t.Helper()
	var lines []map[string]any
	observeEventually(t, func() bool {
		lines = lines[:0]
		for _, l := range observeJSONLines(t, file) {
			logger, _ := l["logger"].(string)
			msg, _ := l["msg"].(string)
			if strings.Contains(logger, "llm_hedge") && msg == "llm request" {
				lines = append(lines, l)
			}
		}
		return len(lines) >= n
	}, func() string { return fmt.Sprintf("%d request log lines, want %d", len(lines), n) })
	return lines
}

// observeAccessEntries waits for n access log entries of completion requests.
func observeAccessEntries(t testing.TB, file string, n int) []map[string]any {
	t.Helper()
	var entries []map[string]any
	observeEventually(t, func() bool {
		entries = entries[:0]
		for _, l := range observeJSONLines(t, file) {
			if req, ok := l["request"].(map[string]any); ok && strings.HasPrefix(fmt.Sprint(req["uri"]), "/v1/") {
				entries = append(entries, l)
			}
		}
		return len(entries) >= n
	}, func() string { return fmt.Sprintf("%d access log entries, want %d", len(entries), n) })
	return entries
}

func observeWaitFor(t testing.TB, file, s string) {
	t.Helper()
	observeEventually(t, func() bool {
		b, _ := os.ReadFile(file)
		return strings.Contains(string(b), s)
	}, func() string { return fmt.Sprintf("%s never contained %q", filepath.Base(file), s) })
}

func observeChain(t testing.TB, line map[string]any) []map[string]any {
	t.Helper()
	raw, _ := line["chain"].([]any)
	out := make([]map[string]any, 0, len(raw))
	for _, e := range raw {
		m, ok := e.(map[string]any)
		if !ok {
			t.Fatalf("chain entry %v is not an object", e)
		}
		out = append(out, m)
	}
	return out
}
