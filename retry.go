package llmhedge

import (
	"net/http"
	"time"
)

// failover launches the next candidate after a failure, within the retry
// budget: when it is spent, a request fails over once more and then ends
// with its error, so an outage is not multiplied by retries.
func (h *Handler) failover(st *requestState, r *http.Request) {
	if st.attemptsLeft() == 0 {
		return
	}
	if !h.retryBudget.tryAcquire(clock()) {
		if st.budgetFailoverUsed {
			h.metrics.budgetExhausted("retry")
			return
		}
		st.budgetFailoverUsed = true
	}
	if h.launchNext(st, r, "failover", false) != nil {
		return
	}
	if st.plan.remaining() == 0 && st.live == 0 && h.fallback(st) {
		h.launchNext(st, r, "fallback", false)
	}
}

// retryWait decides whether a failed attempt is retried on the same
// provider, and after how long: transient errors only, at most
// retry.same_provider extra tries, Retry-After up to retry_after_max (a
// 429 without it moves on), never past the total timeout, never closer
// than the backoff base, and only within the retry budget.
func (h *Handler) retryWait(st *requestState, a *attempt) (time.Duration, bool) {
	if !a.class.transient() || a.noRetry || st.attemptsLeft() == 0 {
		return 0, false
	}
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
	if !h.retryBudget.tryAcquire(clock()) {
		h.metrics.budgetExhausted("retry")
		return 0, false
	}
	h.metrics.retry(a.p.name, string(a.class))
	return wait, true
}

// fallback switches the plan to the fallback model of the current one,
// once every provider of it failed with provider-level errors.
func (h *Handler) fallback(st *requestState) bool {
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
		st.fallbackModel = f.To
		st.plan = newPlan(h.candidates(st.dialect, f.To, ""), f.To)
		return st.plan.remaining() > 0
	}
	return false
}
