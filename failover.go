package llmhedge

import (
	"net/http"
	"time"
)

// failoverRoute is how the next failover of a request is paid for.
type failoverRoute uint8

const (
	failoverNone       failoverRoute = iota // the request has no attempts left
	failoverBudgeted                        // the retry budget pays for it
	failoverPastBudget                      // the one failover past the budget, to a healthy provider
	failoverSpent                           // the budget is spent and so is that one failover
)

// failoverRouteAt decides how a failover after a failure is charged: every
// attempt after the first that is not a hedge is a retry, paid from the
// retry budget.
//
// When the budget is spent, the request fails over once more and then ends
// with its error. That one failover past the budget only goes to a provider
// that is not failing now (no consecutive failures: its last verdict was a
// success, or it was never tried), and it is charged to the budget as debt.
// It exists to hide one provider's outage behind a healthy one; when every
// provider is failing it would only double the load the budget is there to
// bound, so upstream attempts stay within the budget in any storm.
func (h *Handler) failoverRouteAt(st *requestState, now time.Time) failoverRoute {
	switch {
	case st.attemptsLeft() == 0:
		return failoverNone
	case h.retryBudget.Allows(now):
		return failoverBudgeted
	case !st.budgetFailoverUsed:
		return failoverPastBudget
	}
	return failoverSpent
}

// launchFailover starts the next candidate after a failure, within the
// bound, charged to the retry budget as failoverRouteAt decides. It
// returns nil when nothing started.
func (h *Handler) launchFailover(st *requestState, r *http.Request, within tierBound) *attempt {
	now := clock()
	switch h.failoverRouteAt(st, now) {
	case failoverNone:
		return nil
	case failoverBudgeted:
		if tok, ok := h.retryBudget.Take(now); ok {
			a := h.launchReplacement(st, r, false, within)
			if a == nil {
				h.retryBudget.Refund(tok) // nothing left to try: no retry happened
			}
			return a
		}
		fallthrough // another request took the last of the budget meanwhile
	case failoverPastBudget:
		if !st.budgetFailoverUsed {
			if a := h.launchReplacement(st, r, true, within); a != nil {
				st.budgetFailoverUsed = true
				h.retryBudget.Charge(clock())
				return a
			}
		}
	}
	h.metrics.budgetExhausted("retry")
	return nil
}

// launchReplacement starts the next candidate of the plan, or, once every
// provider of the model failed with provider-level errors, the first of its
// fallback model. healthyOnly restricts the choice to providers without
// consecutive failures; a set bound to its tier, whose same-provider retry
// comes before any fallback or probe.
func (h *Handler) launchReplacement(st *requestState, r *http.Request, healthyOnly bool, within tierBound) *attempt {
	if a := h.launchFrom(st, r, "failover", healthyOnly, within); a != nil {
		return a
	}
	if within.set {
		return nil
	}
	if st.plan.remaining() == 0 && st.live == 0 && h.fallback(st) {
		if a := h.launchFrom(st, r, "fallback", healthyOnly, within); a != nil {
			return a
		}
	}
	if st.live == 0 && !healthyOnly && !st.probed() {
		// The rest of the candidates are cooling down: rather than fail
		// while attempts remain, probe the one that recovers first (one
		// probe at a time per provider, as at the start of a request). A
		// request that already probed ends with its error instead.
		return h.launchProbe(st, r)
	}
	return nil
}

// launchFrom is launchNext, optionally over the healthy candidates only,
// and within the bound: the others are set aside for this one choice and
// stay in the plan.
func (h *Handler) launchFrom(st *requestState, r *http.Request, reason string, healthyOnly bool, within tierBound) *attempt {
	if !healthyOnly && !within.set {
		return h.launchNext(st, r, reason, false)
	}
	pl := st.plan
	var aside []int
	for i, p := range pl.cands {
		if !pl.used[i] && (healthyOnly && p.health.Consecutive.Load() > 0 || !within.admits(p)) {
			pl.used[i] = true
			aside = append(aside, i)
		}
	}
	a := h.launchNext(st, r, reason, false)
	for _, i := range aside {
		pl.used[i] = false
	}
	return a
}
