package llmhedge

import (
	"time"
)

// hedgeRoom reports whether one more racer may start now: something is
// running to race against, fewer than max_attempts race, the request has
// attempts left and a candidate is unused.
func (h *Handler) hedgeRoom(st *requestState) bool {
	return st.live > 0 && st.live < h.Hedge.MaxAttempts && st.attemptsLeft() > 0 && st.plan.remaining() > 0
}

// hedgeDelay is how long the first attempt on p may take to its first
// valid event before an alternative is launched.
func (h *Handler) hedgeDelay(p *provider, class int) time.Duration {
	d := hedgeDelay(p.latency, class, time.Duration(h.Hedge.Delay), h.Hedge.Percentile,
		time.Duration(h.Hedge.Min), time.Duration(h.Hedge.Max), clock())
	if p.latency != nil {
		p.latency.lastHedgeDelay.Store(int64(d))
	}
	return d
}
