package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// raceAsk sends one non-streaming Anthropic request with extra headers and
// returns the status and body the client got. An error means the client
// gave up (ctx) before the proxy answered.
func raceAsk(t *testing.T, ctx context.Context, p *proxy, model string, hdr map[string]string) (int, string, error) {
	t.Helper()
	body := fmt.Sprintf(`{"model":%q,"max_tokens":64,"messages":[{"role":"user","content":"hello"}]}`, model)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.URL+"/v1/messages", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-api-key", "k")
	req.Header.Set("anthropic-version", "2023-06-01")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	return resp.StatusCode, readAll(resp), nil
}

// raceAdminReset resets a provider's breaker through the admin API.
func raceAdminReset(t *testing.T, p *proxy, name string) {
	t.Helper()
	if status, _, body := healthAdmin(t, p, http.MethodPost, "/llm_hedge/providers/"+name+"/reset"); status != http.StatusOK {
		t.Fatalf("reset %s: status %d: %s", name, status, body)
	}
}

// Case 11: a fallback_model that no provider serves must not turn an
// outage into a 404 (which SDKs do not retry): the client gets 503.
func TestTrustOutageWithUnservedFallbackModelIs503(t *testing.T) {
	broken := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 500}}})
	p := startProxy(t, provider("a", broken, "models claude-big")+
		"hedge off\n retry {\n same_provider 0\n fallback_model claude-big claude-nowhere\n }\n")

	status, body, err := raceAsk(t, ctxTimeout(t, 10*time.Second), p, "claude-big", nil)
	if err != nil {
		t.Fatal(err)
	}
	if status != http.StatusServiceUnavailable {
		t.Fatalf("status %d (%s), want 503: the provider failed, the model exists", status, body)
	}
	if strings.Contains(body, "claude-nowhere") {
		t.Fatalf("body %s names the unserved fallback model", body)
	}
	if l := retryLastLog(t, p, 1); l.FallbackModel != "" {
		t.Fatalf("log says fallback_model %q; no plan switch should have happened", l.FallbackModel)
	}
}

// Case 13: after a failover to the priority-1 tier, a session returns to
// the priority-0 provider once it can serve again; winner memory does not
// pin it to the fallback tier.
func TestTrustAffinityReturnsToPrimaryTier(t *testing.T) {
	params := anthropicParams("claude-test")
	params.Metadata = anthropic.MetadataParam{UserID: anthropic.String("conversation-13")}
	ask := func(t *testing.T, p *proxy) {
		t.Helper()
		m, err := anthropicClient(p, "k").Messages.New(ctxTimeout(t, 10*time.Second), params)
		if err != nil || messageText(*m) != wantText {
			t.Fatalf("request: %v", err)
		}
	}
	for _, tc := range []struct {
		name     string
		failures int
		reset    bool
	}{
		{name: "primary breaker reset", failures: 1, reset: true},
		{name: "primary breaker never opened", failures: 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			primary := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 500, Count: 1}}})
			secondary := newUpstream(t, sim.Config{})
			p := startProxy(t, provider("primary", primary, "priority 0")+provider("secondary", secondary, "priority 1")+
				fmt.Sprintf("hedge off\n retry {\n same_provider 0\n }\n cooldown {\n failures %d\n duration 1m\n }\n", tc.failures))

			ask(t, p) // primary 500, failover: secondary is remembered
			if completions(primary) != 1 || completions(secondary) != 1 {
				t.Fatalf("first request: primary %d, secondary %d attempts; want 1 and 1", completions(primary), completions(secondary))
			}
			if tc.reset {
				ask(t, p) // primary open: the session stays on secondary
				if completions(primary) != 1 || completions(secondary) != 2 {
					t.Fatalf("during the outage: primary %d, secondary %d; want 1 and 2", completions(primary), completions(secondary))
				}
				raceAdminReset(t, p, "primary")
			}
			before := completions(secondary)
			ask(t, p)
			ask(t, p)
			if completions(primary) != 3 || completions(secondary) != before {
				t.Fatalf("after recovery: primary %d attempts (want 3), secondary %d more (want 0): the session stayed on the fallback tier",
					completions(primary), completions(secondary)-before)
			}
		})
	}
}

// Case 14: an admin reset during an in-flight probe starts a new epoch;
// that probe failing afterwards does not re-open the breaker.
func TestTrustAdminResetDuringProbeStaysClosed(t *testing.T) {
	var n atomic.Int32
	probeArrived, release := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/messages" {
			http.NotFound(w, r)
			return
		}
		if n.Add(1) == 2 {
			close(probeArrived)
			<-release
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, `{"type":"error","error":{"type":"api_error","message":"boom"}}`)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	p := startProxy(t, provider("a", &upstream{URL: srv.URL})+
		"hedge off\n retry {\n same_provider 0\n }\n cooldown {\n failures 1\n duration 1m\n }\n")

	ctx := ctxTimeout(t, 10*time.Second)
	if status, _, err := raceAsk(t, ctx, p, "claude-test", nil); err != nil || status != http.StatusServiceUnavailable {
		t.Fatalf("first request: %d, %v; want 503", status, err)
	}
	if v := healthProvider(t, p, "a", &upstream{URL: srv.URL}); v == nil || v.State != "open" {
		t.Fatalf("after the first failure: %+v, want open", v)
	}
	answered := make(chan int, 1)
	go func() {
		status, _, _ := raceAsk(t, ctx, p, "claude-test", nil) // every candidate open: a last-resort probe
		answered <- status
	}()
	select {
	case <-probeArrived:
	case <-ctx.Done():
		t.Fatal("no probe reached the provider")
	}
	raceAdminReset(t, p, "a")
	close(release)
	if status := <-answered; status != http.StatusServiceUnavailable {
		t.Fatalf("probing request: %d, want 503", status)
	}
	v := healthProvider(t, p, "a", &upstream{URL: srv.URL})
	if v == nil || v.State != "closed" || v.ConsecutiveFailures != 0 {
		t.Fatalf("after the old probe failed: %+v; want closed with no consecutive failures", v)
	}
	if v.Failures != 2 {
		t.Fatalf("lifetime failures %d, want 2: the old probe's failure is still counted", v.Failures)
	}
	raceAsk(t, ctx, p, "claude-test", nil)
	if got := n.Load(); got != 3 {
		t.Fatalf("provider got %d requests, want 3: the reset breaker admits the next one", got)
	}
}

// Case 15: X-Stainless-Timeout lowers timeouts.total for that request,
// never raises it, and garbage is ignored.
func TestTrustClientDeadline(t *testing.T) {
	slow := newUpstream(t, sim.Config{FirstToken: caddyDur(time.Minute)})
	fast := newUpstream(t, sim.Config{})
	block := func(total string) string {
		return provider("slow", slow, "models slow-*") + provider("fast", fast, "models fast-*") +
			"hedge off\n timeouts {\n total " + total + "\n }\n"
	}

	t.Run("lowers total", func(t *testing.T) {
		p := startProxy(t, block("10m"))
		status, body, err := raceAsk(t, ctxTimeout(t, 10*time.Second), p, "slow-model", map[string]string{"X-Stainless-Timeout": "1"})
		if err != nil {
			t.Fatalf("the proxy kept working past the client's 1s deadline: %v", err)
		}
		if status != http.StatusGatewayTimeout {
			t.Fatalf("status %d (%s), want 504", status, body)
		}
	})
	t.Run("never raises total", func(t *testing.T) {
		p := startProxy(t, block("1s"))
		status, _, err := raceAsk(t, ctxTimeout(t, 10*time.Second), p, "slow-model", map[string]string{"X-Stainless-Timeout": "600"})
		if err != nil || status != http.StatusGatewayTimeout {
			t.Fatalf("%d, %v: want 504 from the configured total", status, err)
		}
	})
	t.Run("garbage ignored", func(t *testing.T) {
		p := startProxy(t, block("10m"))
		for _, v := range []string{"-1", "0", "abc", "NaN", "-Inf", "1e400", ""} {
			status, body, err := raceAsk(t, ctxTimeout(t, 10*time.Second), p, "fast-model", map[string]string{"X-Stainless-Timeout": v})
			if err != nil || status != http.StatusOK {
				t.Fatalf("X-Stainless-Timeout %q: %d %s, %v; want 200", v, status, body, err)
			}
		}
	})
}

// Case 16: while the primary's breaker is open, the fallback model is
// tried before a last-resort probe of the broken primary.
func TestTrustFallbackModelBeforeLastResortProbe(t *testing.T) {
	primary := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 500}}})
	small := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("primary", primary, "models claude-big")+provider("small", small, "models claude-small")+
		"hedge off\n retry {\n same_provider 0\n fallback_model claude-big claude-small\n }\n cooldown {\n failures 1\n duration 1m\n }\n")

	for i := 1; i <= 5; i++ {
		if m := retryAsk(t, p, anthropicParams("claude-big")); string(m.Model) != "claude-small" {
			t.Fatalf("request %d: served model %q, want claude-small", i, m.Model)
		}
	}
	if n := completions(primary); n != 1 {
		t.Fatalf("primary got %d attempts for 5 outage requests, want 1 (the one that opened its breaker)", n)
	}
	l := retryLastLog(t, p, 5)
	if len(l.Chain) != 2 || l.Chain[0].Event != "cooldown_skip" || l.Chain[1].Event != "fallback" || l.Chain[1].Provider != "small" {
		t.Fatalf("chain %+v: want cooldown_skip of primary, then fallback to small", l.Chain)
	}
}

// Case 17: a same-provider retry that the breaker will refuse is not
// waited for. The backoff is 20s and the client gives up after 10s: only
// a request that decided before waiting answers in time.
func TestTrustRefusedRetryDoesNotWait(t *testing.T) {
	broken := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 503}}})
	p := startProxy(t, provider("a", broken)+
		"hedge off\n retry {\n backoff 20s 20s\n }\n cooldown {\n failures 1\n duration 1m\n }\n")

	for i, want := range []string{"initial", "probe"} {
		status, body, err := raceAsk(t, ctxTimeout(t, 10*time.Second), p, "claude-test", nil)
		if err != nil {
			t.Fatalf("request %d: the proxy waited for a retry its breaker refuses: %v", i+1, err)
		}
		if status != http.StatusServiceUnavailable {
			t.Fatalf("request %d: %d %s, want 503", i+1, status, body)
		}
		l := retryLastLog(t, p, i+1)
		var events []string
		for _, e := range l.Chain {
			if e.Provider == "a" && e.Event != "cooldown_skip" {
				events = append(events, e.Event)
			}
		}
		if len(events) != 1 || events[0] != want {
			t.Fatalf("request %d: attempts %v, want only %s", i+1, events, want)
		}
	}
	if n := completions(broken); n != 2 {
		t.Fatalf("provider got %d attempts, want 2", n)
	}
}

// Case 18: a provider that takes the request and closes without a response
// byte is a silent route: the next candidate starts at once, with no
// same-provider retry, and the failure still counts against the provider.
func TestTrustSilentProviderFailsOverAtOnce(t *testing.T) {
	silent := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultReset, Delay: caddyDur(200 * time.Millisecond)}}})
	secondary := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("silent", silent, "priority 0")+provider("secondary", secondary, "priority 1")+
		"hedge off\n cooldown {\n failures 100\n }\n")

	retryAsk(t, p, anthropicParams("claude-test"))
	if completions(silent) != 1 || completions(secondary) != 1 {
		t.Fatalf("silent got %d attempts, secondary %d; want 1 and 1", completions(silent), completions(secondary))
	}
	l := retryLastLog(t, p, 1)
	if len(l.Chain) != 2 || l.Chain[0].Class != "reset" || l.Chain[1].Event != "failover" || l.Chain[1].Provider != "secondary" {
		t.Fatalf("chain %+v: want a reset on silent, then a failover to secondary", l.Chain)
	}
	if v := healthProvider(t, p, "silent", silent); v == nil || v.ConsecutiveFailures != 1 {
		t.Fatalf("silent provider %+v: want one provider-level failure counted", v)
	}
}
