package e2e

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmhedge/caddy-llm-hedge/internal/engine"
	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// TestOutcomeBookkeepingPairs runs races of every shape through a real
// proxy and checks each request's provider bookkeeping: every attempt that
// began ended once, and every completion attempt (every probe among them)
// had exactly one verdict. A missed end leaks max_in_flight; a missed or
// doubled verdict on a probe wedges or re-opens a breaker.
func TestOutcomeBookkeepingPairs(t *testing.T) {
	reports := watchBookkeeping(t)
	slow := newUpstream(t, sim.Config{FirstToken: caddy.Duration(2 * time.Second)})
	fast := newUpstream(t, sim.Config{})
	once529 := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 529, Count: 1}}})
	dead := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 503}}})
	bad := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 400}}})
	p := startProxy(t,
		provider("slow", slow, "models race-*", "vendor a", "priority 0")+
			provider("fast", fast, "models race-*", "vendor b", "priority 1")+
			provider("once529", once529, "models retry-*")+
			provider("dead", dead, "models dead-*")+
			provider("bad", bad, "models bad-*")+
			"hedge {\n after 50ms\n budget 100%\n }\n retry {\n backoff 10ms 100ms\n budget 100%\n }\n cooldown {\n failures 2\n duration 1m\n }")
	client := anthropicClient(p, "k")

	next := func(what string) engine.BookkeepingReport {
		t.Helper()
		select {
		case rep := <-reports:
			for _, pr := range rep.Problems {
				t.Errorf("%s: %s", what, pr)
			}
			return rep
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the request never finished", what)
		}
		return engine.BookkeepingReport{}
	}

	// A hedge race: the slow provider loses and is cancelled.
	if _, err := streamAnthropic(ctxTimeout(t, 10*time.Second), client, anthropicParams("race-1")); err != nil {
		t.Fatalf("race: %v", err)
	}
	if rep := next("race"); rep.Attempts != 2 {
		t.Errorf("race: %d attempts, want the first and its hedge", rep.Attempts)
	}

	// A same-provider retry after a 529, not streamed.
	if _, err := client.Messages.New(ctxTimeout(t, 10*time.Second), anthropicParams("retry-1")); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if rep := next("retry"); rep.Attempts != 2 {
		t.Errorf("retry: %d attempts, want the 529 and its retry", rep.Attempts)
	}

	// A dead provider opens its breaker; the next request probes it and
	// the probe fails.
	for i, what := range []string{"dead", "dead probe"} {
		_, err := client.Messages.New(ctxTimeout(t, 10*time.Second), anthropicParams("dead-1"))
		var apiErr *anthropic.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("%s: want 503, got %v", what, err)
		}
		if rep := next(what); i == 1 && rep.Probes != 1 {
			t.Errorf("%s: %d probes, want 1", what, rep.Probes)
		}
	}

	// A request-level 400 ends the race.
	if _, err := client.Messages.New(ctxTimeout(t, 10*time.Second), anthropicParams("bad-1")); err == nil {
		t.Fatal("bad: want the 400")
	}
	next("bad")

	// A forwarded call.
	resp, err := http.Get(p.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	next("models")
}
