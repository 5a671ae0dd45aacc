package llmhedge

import (
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/dashboard"
)

// board is what the live dashboard shows (admin /llm_hedge/recent,
// /llm_hedge/series and /llm_hedge/ui/, and the llm_hedge_dashboard
// handler): the last requests and per-provider time series, of fixed size,
// shared by every llm_hedge site of the process like providerPool.
var board struct {
	recent dashboard.Recent
	series dashboard.Series
}

// recordDashboard adds a finished request to the board: names, counts and
// durations only, never a prompt, an answer, a key or a client address.
func recordDashboard(st *requestState, now time.Time, total time.Duration, model, provider string, firstMs int64, u usage) {
	var chain [dashboard.MaxAttempts]dashboard.Attempt
	n := 0
	for _, a := range st.attempts {
		end := a.offset + a.elapsed
		if a == st.winner || end <= a.offset {
			end = total // a winner lasts the whole stream; one not yet reported ended with the request
		}
		board.series.RecordAttemptEvents(a.p.name, now, dashboard.ClassifyOutcome(a.outcome), a.firstEvent, dashboard.ClassifyEvents(a.reason, a.outcome))
		if n == len(chain) {
			continue
		}
		c := dashboard.Attempt{
			Provider: a.p.name, Reason: a.reason, Outcome: a.outcome, Status: a.status,
			StartMs: a.offset.Milliseconds(), EndMs: end.Milliseconds(),
		}
		if a.class != classNone && a.class != classLoser {
			c.Class = string(a.class)
		}
		if a.firstEvent > 0 {
			c.FirstEventMs = max(a.firstEvent.Milliseconds(), 1)
		}
		chain[n] = c
		n++
	}
	board.recent.Record(dashboard.Request{
		Time: now, Site: st.r.Host, Dialect: st.dialect.String(), Model: model, Provider: provider,
		Attempts: len(st.attempts), Hedged: st.hedged, Outcome: st.outcome, FirstEventMs: firstMs,
		TotalMs: total.Milliseconds(), InputTokens: u.Input, OutputTokens: u.Output, Chain: chain[:n],
	})
}

// configuredProvider reports whether a provider name is in a loaded
// config: the providers the health pool holds.
func configuredProvider() func(string) bool {
	names := map[string]bool{}
	providerPool.Range(func(_, val any) bool {
		if ph, ok := val.(*providerHealth); ok {
			names[ph.name] = true
		}
		return true
	})
	return func(n string) bool { return names[n] }
}
