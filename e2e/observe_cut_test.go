package e2e

import (
	"testing"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// A provider that cuts its stream after the commit failed that attempt,
// even when a continuation on another provider gives the client the whole
// answer: attempts_total says failed_stream_upstream_cut, as the breaker,
// the admin view's failures, the dashboard (error) and the trace (failed)
// do, so the failure-ratio query of docs/observability.md sees a provider
// that cuts its streams. It counted as won.
func TestMetricsCutWinnerFailed(t *testing.T) {
	cut := newUpstream(t, sim.Config{Tokens: 60, Text: longText, Faults: []sim.Fault{{Kind: sim.FaultCut, After: 40}}})
	other := newUpstream(t, sim.Config{Tokens: 60, Text: longText})
	p := startProxy(t, provider("mcut-cut", cut, "priority 1", "api anthropic")+
		provider("mcut-other", other, "priority 2", "api anthropic")+"hedge off\ncooldown {\n failures 100\n}\n")

	before, _ := observeScrape(t, p)
	m, err := streamAnthropic(ctxTimeout(t, 10*time.Second), anthropicClient(p, "k"), anthropicParams("claude-test"))
	if err != nil || messageText(m) != longText {
		t.Fatalf("continued stream: %v (text %q)", err, messageText(m))
	}
	after := observeScrapeUntil(t, p, func(m observeMetrics) bool {
		return m.delta(before, `caddy_llm_hedge_requests_total{outcome="success"}`) >= 1
	})
	want := map[string]float64{
		`caddy_llm_hedge_attempts_total{provider="mcut-cut",result="failed_stream_upstream_cut"}`: 1,
		`caddy_llm_hedge_attempts_total{provider="mcut-cut",result="won"}`:                        0,
		`caddy_llm_hedge_attempts_total{provider="mcut-other",result="resumed"}`:                  1,
		`caddy_llm_hedge_first_event_seconds_count{provider="mcut-cut"}`:                          1,
	}
	for series, n := range want {
		if d := after.delta(before, series); d != n {
			t.Errorf("%s: want +%v, got +%v", series, n, d)
		}
	}
}
