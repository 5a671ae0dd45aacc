package llmhedge

import (
	"net/http"
	"time"
)

// failover launches the next candidate after a failure, charging the retry
// budget: every attempt after the first that is not a hedge is a retry.
//
// When the budget is spent, the request fails over once more and then ends
// with its error. That one failover past the budget only goes to a provider
// that is not failing now (no consecutive failures: its last verdict was a
// success, or it was never tried), and it is charged to the budget as debt.
// It exists to hide one provider's outage behind a healthy one; when every
// provider is failing it would only double the load the budget is there to
// bound, so upstream attempts stay within the budget in any storm.
func (h *Handler) failover(st *requestState, r *http.Request) {
	if st.attemptsLeft() == 0 {
		return
	}
	if tok, ok := h.retryBudget.take(clock()); ok {
		if h.launchFailover(st, r, false) == nil {
			h.retryBudget.refund(tok) // nothing left to try: no retry happened
		}
		return
	}
	if !st.budgetFailoverUsed && h.launchFailover(st, r, true) != nil {
		st.budgetFailoverUsed = true
		h.retryBudget.charge(clock())
		return
	}
	h.metrics.budgetExhausted("retry")
}

// launchFailover starts the next candidate of the plan, or, once every
// provider of the model failed with provider-level errors, the first of its
// fallback model. healthyOnly restricts the choice to providers without
// consecutive failures.
func (h *Handler) launchFailover(st *requestState, r *http.Request, healthyOnly bool) *attempt {
	if a := h.launchFrom(st, r, "failover", healthyOnly); a != nil {
		return a
	}
	if st.plan.remaining() == 0 && st.live == 0 && h.fallback(st) {
		if a := h.launchFrom(st, r, "fallback", healthyOnly); a != nil {
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

// launchFrom is launchNext, optionally over the healthy candidates only:
// the others are set aside for this one choice and stay in the plan.
func (h *Handler) launchFrom(st *requestState, r *http.Request, reason string, healthyOnly bool) *attempt {
	if !healthyOnly {
		return h.launchNext(st, r, reason, false)
	}
	pl := st.plan
	var aside []int
	for i, p := range pl.cands {
		if !pl.used[i] && p.health.consecutive.Load() > 0 {
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

// retryWait decides whether a failed attempt is retried on the same
// provider, and after how long: transient errors only, at most
// retry.same_provider extra tries, Retry-After up to retry_after_max (a
// 429 without it moves on), never past the total timeout, never closer
// than the backoff base, and only while the retry budget has room. The
// budget is charged when the retry starts (launchRetry), not here.
func (h *Handler) retryWait(st *requestState, a *attempt) (time.Duration, bool) {
	if !a.class.transient() || a.noRetry || st.attemptsLeft() == 0 {
		return 0, false
	}
	// tries counts the attempts made on this provider, the first included.
	if st.plan.tries[a.p] > h.Retry.sameProvider() {
		return 0, false
	}
	base := time.Duration(h.Retry.BackoffBase)
	var wait time.Duration
	switch {
	case a.hasRA && a.retryAfter > time.Duration(h.Retry.RetryAfterMax):
		return 0, false
	case a.hasRA:
		wait = max(a.retryAfter, base)
	case a.class == classRateLimited:
		return 0, false
	default:
		wait = retryBackoff(base, time.Duration(h.Retry.BackoffMax), st.plan.tries[a.p], h.rand)
	}
	if dl, ok := st.ctx.Deadline(); ok && time.Now().Add(wait).After(dl) {
		return 0, false
	}
	if !a.p.health.admitsAt(clock().Add(wait), st.plan.model) {
		// The breaker (opened by this very failure, or a failed probe)
		// would refuse the retry when its wait is over: fail over now.
		return 0, false
	}
	if !h.retryBudget.allows(clock()) {
		h.metrics.budgetExhausted("retry")
		return 0, false
	}
	h.metrics.retry(a.p.name, string(a.class))
	return wait, true
}

// launchRetry starts a same-provider retry whose wait is over, charging the
// retry budget now. It returns false, having started nothing, when the
// attempts or the budget ran out meanwhile or the provider's breaker does
// not admit it; the caller then fails over.
func (h *Handler) launchRetry(st *requestState, r *http.Request, a *attempt) bool {
	if st.attemptsLeft() == 0 {
		return false
	}
	if a.p.busy() {
		return false // max_in_flight holds for retries too: fail over instead
	}
	now := clock()
	tok, ok := h.retryBudget.take(now)
	if !ok {
		return false
	}
	ok, probe := a.p.health.admit(now, st.plan.model)
	if !ok {
		h.retryBudget.refund(tok)
		return false
	}
	a.probe = probe
	st.launch(h, r, a)
	return true
}

// fallback switches the plan to the fallback model of the current one,
// once every provider of it failed with provider-level errors.
func (h *Handler) fallback(st *requestState) bool {
	if st.pinned != nil {
		return false // only the pinned provider holds the conversation
	}
	for _, f := range h.Retry.FallbackModels {
		if !globMatch(f.From, st.plan.model) || st.fellBack[f.To] {
			continue
		}
		for _, a := range st.attempts {
			if !a.class.providerLevel() {
				return false
			}
		}
		st.fellBack[f.To] = true
		// The session key keeps a conversation on one provider of the
		// fallback model too, where its prompt cache will build up.
		cands := h.candidates(st.dialect, f.To, st.req.sessionKey)
		if len(cands) == 0 {
			// No provider serves the fallback model: the outage stays an
			// outage (503), not a 404 for a model the client never named.
			continue
		}
		st.fallbackModel = f.To
		st.plan = newPlan(cands, f.To)
		return true
	}
	return false
}

// retryCandidate picks the attempt to retry on its own provider once
// nothing else can start: the one that just failed, or, in a race, an
// earlier racer whose transient failure was passed over for a failover
// that has failed since (a 529 on one provider, then a refused connection
// on the other, must still get the 529's retry).
func (h *Handler) retryCandidate(st *requestState, last *attempt, racing bool) (*attempt, time.Duration, bool) {
	if wait, ok := h.retryWait(st, last); ok {
		return last, wait, true
	}
	if !racing {
		return nil, 0, false
	}
	seen := map[*provider]bool{last.p: true}
	for i := len(st.attempts) - 1; i >= 0; i-- {
		b := st.attempts[i]
		if seen[b.p] {
			continue
		}
		seen[b.p] = true // only a provider's latest attempt speaks for it
		if b.outcome != "retry_failed" || st.liveOn(b.p) {
			continue
		}
		if wait, ok := h.retryWait(st, b); ok {
			return b, wait, true
		}
	}
	return nil, 0, false
}
