package engine

import (
	"math"
	"slices"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/health"
	"github.com/llmhedge/caddy-llm-hedge/internal/routing"
)

// Routing within a priority tier (docs/routing.md): the handler's lb_policy
// orders each tier of a request's candidates, and the first tier's front is
// the pick. The measurements live in each provider's health entry
// (routing.Stats), fed where the engine reports an attempt's first event,
// failure or loss (outcome.go).

// Why a session's affinity decided, besides routing's own reasons.
const (
	whyAffinity      = "affinity"       // the session's pick, within the bound
	whyAffinityMoved = "affinity_moved" // the session's pick was over affinitySlowdown x the tier's fastest
)

// affinitySlowdown is how much slower than the tier's fastest a session's
// affinity pick may be (recent first-event times) before the session
// moves: a prompt-cache hit saves more than a faster first token, until
// the pick is this much slower.
const affinitySlowdown = 3

// quotaPlenty is the requests a key must have left to count as having
// plenty: below it the key counts in proportion.
const quotaPlenty = 50

// maxTier is the largest tier whose costs are kept on the stack.
const maxTier = 16

// routeDecision is what the first tier's policy chose for a request: the
// provider put first in its plan and why, with the figures the decision
// chain shows.
type routeDecision struct {
	policy routing.Policy
	pick   *provider
	why    string
	cost   float64 // the pick's cost (ns of expected first-event time)
	est    time.Duration
	// best is the tier's least-cost provider (adaptive), when another
	// than the pick; moved is the affinity pick a session left.
	best     *provider
	bestCost float64
	bestEst  time.Duration
	moved    *provider
	movedEst time.Duration
	tier     int // providers in the tier
}

// routeInput is what routing reads of p for a request of sizeClass.
func routeInput(p *provider, sizeClass int, now time.Time) routing.Input {
	est, _ := p.health.Route.FirstEvent(sizeClass, now)
	return routing.Input{
		FirstEvent: float64(est),
		InFlight:   p.health.InFlightNow(),
		Capacity:   int64(p.cfg.MaxInFlight),
		Failure:    p.health.Route.FailureRate(now),
		Quota:      p.quotaLeft(now),
		Weight:     float64(p.weight),
	}
}

// quotaLeft is the share of p's key pool that may serve (QuotaOf each
// key): 1 without configured keys.
func (p *provider) quotaLeft(now time.Time) float64 {
	if len(p.keys) == 0 {
		return 1
	}
	t := now.UnixNano()
	sum := 0.0
	for _, k := range p.keys {
		sum += QuotaOf(k.St, t, p.reserve)
	}
	return sum / float64(len(p.keys))
}

// QuotaOf is what a key counts for in its pool's quota: 0 when it may not
// serve (cooling, exhausted, disabled), its requests left over
// quotaPlenty when fewer, else 1 (a quota not known counts whole).
func QuotaOf(k *health.Key, t, reserve int64) float64 {
	if state, _ := k.Verdict(t, 0, reserve); state != health.KeyOK {
		return 0
	}
	if n, ok := health.Left(k.ReqLeft.Load(), k.ReqReset.Load(), t); ok && n < quotaPlenty {
		return float64(n) / quotaPlenty
	}
	return 1
}

// orderTier orders one priority tier by the handler's policy. When first
// (the request's best tier) its front is the pick and the decision says

// routePick, when set, replaces the adaptive pick (routing.Pick): the
// routing bench swaps in power of two choices to measure it beside the
// full scan. nil in production.
var routePick func(costs, weights []float64, measured bool, u, v, x float64) (int, string)

// why; a lower tier is only ordered (by cost, without exploration).
func (h *Engine) orderTier(tier []*provider, sizeClass int, now time.Time, first bool) routeDecision {
	dec := routeDecision{policy: h.policy, tier: len(tier)}
	switch {
	case len(tier) == 1:
		dec.pick, dec.why = tier[0], routing.WhyBest
		return dec
	case h.policy == routing.First:
		dec.pick, dec.why = tier[0], routing.WhyFirst
		return dec
	case h.policy == routing.WeightedRandom || len(tier) > maxTier:
		h.weightedOrder(tier)
		dec.pick, dec.why = tier[0], routing.WhyWeighted
		return dec
	}
	var ins [maxTier]routing.Input
	var costs, weights [maxTier]float64
	n := len(tier)
	for i, p := range tier {
		ins[i] = routeInput(p, sizeClass, now)
		weights[i] = float64(p.weight)
	}
	unmeasured := routing.Unmeasured(ins[:n])
	measured := false
	for i, p := range tier {
		costs[i] = routing.Cost(ins[i], unmeasured)
		if p.health.State(now) == health.StateOpen {
			costs[i] = math.Inf(1) // not admitted: last, never the least cost
			continue
		}
		measured = measured || ins[i].FirstEvent > 0
	}
	k, why := 0, routing.WhyBest
	if first {
		if routePick != nil {
			// The bench's pick gets copies: handing the arrays to a func
			// value would move them to the heap on every request.
			k, why = routePick(slices.Clone(costs[:n]), slices.Clone(weights[:n]), measured, h.rand(), h.rand(), h.rand())
		} else {
			k, why = routing.Pick(costs[:n], weights[:n], measured, h.rand(), h.rand(), h.rand())
		}
	}
	// The pick first, the rest by cost (stable: ties keep the order
	// written): failovers and hedges take them in that order.
	pk, pc, pi := tier[k], costs[k], ins[k]
	copy(tier[1:k+1], tier[:k])
	copy(costs[1:k+1], costs[:k])
	copy(ins[1:k+1], ins[:k])
	tier[0], costs[0], ins[0] = pk, pc, pi
	from := 0
	if first {
		from = 1
	}
	for i := from + 1; i < n; i++ {
		for j := i; j > from && costs[j] < costs[j-1]; j-- {
			tier[j], tier[j-1] = tier[j-1], tier[j]
			costs[j], costs[j-1] = costs[j-1], costs[j]
			ins[j], ins[j-1] = ins[j-1], ins[j]
		}
	}
	if !first {
		return dec
	}
	dec.pick, dec.why, dec.cost, dec.est = tier[0], why, costs[0], time.Duration(ins[0].FirstEvent)
	if n > 1 && costs[1] < costs[0] {
		dec.best, dec.bestCost, dec.bestEst = tier[1], costs[1], time.Duration(ins[1].FirstEvent)
	}
	return dec
}

// weightedOrder is a weighted random permutation of tier
// (Efraimidis-Spirakis: by u^(1/w) descending), stable for equal keys.
func (h *Engine) weightedOrder(tier []*provider) {
	var keys [maxTier]float64
	if len(tier) > maxTier {
		// Selection of the front only, so a very large tier allocates nothing.
		best, bk := 0, -1.0
		for i, p := range tier {
			if k := math.Pow(h.rand(), 1/float64(p.weight)); k > bk {
				best, bk = i, k
			}
		}
		tier[0], tier[best] = tier[best], tier[0]
		return
	}
	for i, p := range tier {
		keys[i] = math.Pow(h.rand(), 1/float64(p.weight))
	}
	for i := 1; i < len(tier); i++ {
		for j := i; j > 0 && keys[j] > keys[j-1]; j-- {
			tier[j], tier[j-1] = tier[j-1], tier[j]
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
}

// affinityTooSlow reports whether a session's pick p is over
// affinitySlowdown x slower to its first event than the fastest of its
// tier in cands (both measured; providers whose breaker is open aside),
// and returns that fastest provider's time and p's.
func affinityTooSlow(cands []*provider, p *provider, sizeClass int, now time.Time) (bool, time.Duration, time.Duration) {
	est, ok := p.health.Route.FirstEvent(sizeClass, now)
	if !ok {
		return false, 0, 0
	}
	var fastest time.Duration
	for _, c := range cands {
		if c.cfg.Priority != p.cfg.Priority || c.health.State(now) == health.StateOpen {
			continue
		}
		if e, ok := c.health.Route.FirstEvent(sizeClass, now); ok && (fastest == 0 || e < fastest) {
			fastest = e
		}
	}
	return fastest > 0 && est > affinitySlowdown*fastest, fastest, est
}

// notePick counts the provider of a request's first attempt: the policy's
// pick (with its reason), or the provider the plan fell through to when
// the pick could not take it (cooling, busy, out of keys).
func notePick(st *requestState, first *attempt) {
	h := st.h
	if st.route.pick == nil || st.route.tier < 2 || first == nil {
		return
	}
	why := st.route.why
	if first.p != st.route.pick {
		why = "fallthrough"
	}
	first.p.health.Route.NotePick(clock())
	h.obs.RoutePick(first.p.name, why)
}

// exploreHedgeSlowdown bounds what an exploration may cost the client: its
// attempt is raced once it has taken this many times the least-cost
// provider's recent first-event time (the slowdown affinity tolerates).
const exploreHedgeSlowdown = affinitySlowdown

// hedgeDelayFirst is the hedge delay of a race's first attempt a: its
// provider's, or, when a explores, at most exploreHedgeSlowdown x the
// least-cost provider's recent first-event time, below hedge.min if need
// be. An exploration is an experiment, not the request's best bet: a
// provider that answers within that has shown it is worth more traffic
// (a real sample), one that does not is raced by the least-cost provider
// and recorded as at least that slow.
func hedgeDelayFirst(st *requestState, a *attempt) time.Duration {
	h := st.h
	d := h.hedgeDelay(a.p, st.req.SizeClass)
	if h.Hedge.LargeTokens > 0 && st.inputEstimate() >= h.Hedge.LargeTokens {
		// A large prompt's hedge costs a second large prompt (often where
		// its cache is cold): it waits for the longer delay, and no
		// exploration shortens it.
		return max(d, h.Hedge.LargeAfter)
	}
	if a.n != 1 || st.route.why != routing.WhyExplore || st.route.pick != a.p || st.route.bestEst <= 0 {
		return d
	}
	return min(d, exploreHedgeSlowdown*st.route.bestEst)
}

// Route is a routing decision as the log line shows it, on the chain
// entry of the request's first attempt: the policy, its pick and why, the
// pick's cost and recent first-event time, and the least-cost provider (or
// the session's former pick) when the pick was another. Figures are in ms
// to 0.1, zero when unknown.
type Route struct {
	Policy, Pick, Reason    string
	CostMs, FirstEventEstMs float64
	LeastCost               string
	LeastCostMs             float64
	MovedFrom               string
	MovedFromEstMs          float64
	FastestEstMs            float64
}

func (d *routeDecision) view() *Route {
	v := &Route{Policy: d.policy.String(), Pick: d.pick.name, Reason: d.why}
	if d.cost > 0 && !math.IsInf(d.cost, 1) {
		v.CostMs = roundMs(d.cost)
	}
	if d.est > 0 {
		v.FirstEventEstMs = roundMs(float64(d.est))
	}
	if d.best != nil {
		v.LeastCost, v.LeastCostMs = d.best.name, roundMs(d.bestCost)
	}
	if d.moved != nil {
		v.MovedFrom, v.MovedFromEstMs = d.moved.name, roundMs(float64(d.movedEst))
		if d.bestEst > 0 {
			v.FastestEstMs = roundMs(float64(d.bestEst))
		}
	}
	return v
}

// roundMs is nanoseconds as milliseconds to 0.1.
func roundMs(ns float64) float64 { return math.Round(ns/1e5) / 10 }

// rerank orders the unused candidates of each priority tier of st's plan
// by their cost now (adaptive only), so that a hedge takes the provider
// that is cheapest when the hedge starts, a hedge delay after the plan was
// made (its attempts in flight and recent first events have moved since).
// The used candidates keep their places; a pinned, discovering or
// continuing request keeps its plan's order.
func rerank(st *requestState) {
	h := st.h
	if h.policy != routing.Adaptive || st.pinned != nil || st.discover != nil || st.resuming != "" {
		return
	}
	pl, now := st.plan, clock()
	for i := 0; i < len(pl.cands); {
		j := i + 1
		for j < len(pl.cands) && pl.cands[j].cfg.Priority == pl.cands[i].cfg.Priority {
			j++
		}
		rerankRun(pl, i, j, st.req.SizeClass, now)
		i = j
	}
}

// rerankRun orders the unused candidates of pl.cands[from:to] (one
// priority) by cost, in the places they hold.
func rerankRun(pl *plan, from, to, sizeClass int, now time.Time) {
	var idx [maxTier]int
	var ps [maxTier]*provider
	var ins [maxTier]routing.Input
	var costs [maxTier]float64
	n := 0
	for i := from; i < to && n < maxTier; i++ {
		if !pl.used[i] {
			idx[n], ps[n], ins[n] = i, pl.cands[i], routeInput(pl.cands[i], sizeClass, now)
			n++
		}
	}
	if n < 2 {
		return
	}
	unmeasured := routing.Unmeasured(ins[:n])
	for k := range n {
		costs[k] = routing.Cost(ins[k], unmeasured)
		if ps[k].health.State(now) == health.StateOpen {
			costs[k] = math.Inf(1)
		}
	}
	for i := 1; i < n; i++ {
		for j := i; j > 0 && costs[j] < costs[j-1]; j-- {
			ps[j], ps[j-1] = ps[j-1], ps[j]
			costs[j], costs[j-1] = costs[j-1], costs[j]
		}
	}
	for k := range n {
		pl.cands[idx[k]] = ps[k]
	}
}
