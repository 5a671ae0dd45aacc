package engine

import (
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/health"
)

// hedgeRoom reports whether one more racer may start now: something is
// running to race against, fewer than max_attempts race, the request has
// attempts left and a candidate is unused.
func hedgeRoom(st *requestState) bool {
	h := st.h
	return st.live > 0 && int(st.live) < h.Hedge.MaxAttempts && st.attemptsLeft() > 0 && st.plan.remaining() > 0
}

// hedgeDelay is how long the first attempt on p may take to its first
// valid event before an alternative is launched.
func (h *Engine) hedgeDelay(p *provider, class int) time.Duration {
	d := hedgeDelay(p.latency, class, time.Duration(h.Hedge.Delay), h.Hedge.Percentile,
		time.Duration(h.Hedge.Min), time.Duration(h.Hedge.Max), clock())
	if p.health != nil {
		p.health.HedgeDelayNs.Store(int64(d))
	}
	return d
}

// hedgeMinSamples is how many samples a size class needs before its
// percentile is trusted; below it the hedge delay is the bootstrap max/4.
const hedgeMinSamples = 20

// hedgeDelay is how long the first attempt runs alone before a hedge is
// launched: fixed when set, otherwise the pct-th percentile (pct like 90) of
// the provider's recent first-event times for this size class, clamped to
// [min, max]. A class with fewer than 20 recent samples uses max/4, so a cold
// start hedges neither instantly nor never. A max <= 0 leaves the delay
// unclamped from above.
func hedgeDelay(t *health.LatencyTracker, sizeClass int, fixed time.Duration, pct float64, min, max time.Duration, now time.Time) time.Duration {
	if fixed > 0 {
		return fixed
	}
	d := max / 4
	if t != nil {
		if v, n := t.Quantile(sizeClass, pct/100, now); n >= hedgeMinSamples {
			d = v
		}
	}
	if max > 0 && d > max {
		d = max
	}
	if d < min {
		d = min
	}
	return d
}
