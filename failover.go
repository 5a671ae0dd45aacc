package llmhedge

import "time"

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
	case h.retryBudget.allows(now):
		return failoverBudgeted
	case !st.budgetFailoverUsed:
		return failoverPastBudget
	}
	return failoverSpent
}
