package llmhedge

import (
	"net/http"
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
