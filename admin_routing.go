package llmhedge

import (
	"fmt"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/llmhedge/caddy-llm-hedge/internal/engine"
	"github.com/llmhedge/caddy-llm-hedge/internal/health"
	"github.com/llmhedge/caddy-llm-hedge/internal/routing"
)

// routingView is what adaptive routing thinks of a provider now: the
// figures of its cost (for a request of the smallest size class, the
// usual one; the first-event time falls back to every size's average) and
// its share of its tier's first attempts over the last ~10 s.
type routingView struct {
	Priority        int64    `json:"priority"`
	Weight          int64    `json:"weight"`
	FirstEventEstMs *float64 `json:"first_event_est_ms,omitempty"` // absent: not measured in the last 5 minutes
	FailureRate     float64  `json:"failure_rate"`
	QuotaLeft       float64  `json:"quota_left"`
	CostMs          float64  `json:"cost_ms"`
	Share           float64  `json:"share"`

	input    routing.Input
	pickRate float64
}

// snapshotRouting reads ph's routing figures; the cost and the share need
// the provider's tier and are set by tierRouting.
func snapshotRouting(ph *health.Provider, now time.Time) *routingView {
	r := &ph.Route
	v := &routingView{Priority: r.Priority.Load(), Weight: max(r.Weight.Load(), 1), FailureRate: r.FailureRate(now), QuotaLeft: 1}
	if keys := ph.Keys.All(); len(keys) > 0 {
		t, sum := now.UnixNano(), 0.0
		for _, k := range keys {
			sum += engine.QuotaOf(k, t, k.Reserve.Load())
		}
		v.QuotaLeft = sum / float64(len(keys))
	}
	est, ok := r.FirstEvent(0, now)
	if ok {
		ms := viewMs(est)
		v.FirstEventEstMs = &ms
	}
	v.input = routing.Input{FirstEvent: float64(est), InFlight: ph.InFlight.Load(), Capacity: maxInFlightOf(ph.Name),
		Failure: v.FailureRate, Quota: v.QuotaLeft, Weight: float64(v.Weight)}
	v.pickRate = r.PickRate(now)
	return v
}

// tierRouting sets each view's cost and share within its priority tier
// (the providers of one priority among views).
func tierRouting(views []providerView) {
	tiers := map[int64][]*routingView{}
	for i := range views {
		if r := views[i].Routing; r != nil {
			tiers[r.Priority] = append(tiers[r.Priority], r)
		}
	}
	for _, tier := range tiers {
		ins := make([]routing.Input, len(tier))
		total := 0.0
		for i, r := range tier {
			ins[i] = r.input
			total += r.pickRate
		}
		unmeasured := routing.Unmeasured(ins)
		for _, r := range tier {
			r.CostMs = viewMs(time.Duration(routing.Cost(r.input, unmeasured)))
			if total > 0 {
				r.Share = float64(int(r.pickRate/total*1000+0.5)) / 1000
			}
		}
	}
}

// routeCell is the text table's cost and share of a provider.
func routeCell(v providerView) string {
	if v.Routing == nil {
		return "-"
	}
	return fmt.Sprintf("%s ms/%d%%", humanize.FtoaWithDigits(v.Routing.CostMs, 0), int(v.Routing.Share*100+0.5))
}
