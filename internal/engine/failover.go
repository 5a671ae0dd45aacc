package engine

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
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
func failoverRouteAt(st *requestState, now time.Time) failoverRoute {
	h := st.h
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
func launchFailover(st *requestState, r *http.Request, within tierBound) *attempt {
	h := st.h
	now := clock()
	switch failoverRouteAt(st, now) {
	case failoverNone:
		return nil
	case failoverBudgeted:
		if tok, ok := h.retryBudget.Take(now); ok {
			a := launchReplacement(st, r, false, within)
			if a == nil {
				h.retryBudget.Refund(tok) // nothing left to try: no retry happened
			}
			return a
		}
		fallthrough // another request took the last of the budget meanwhile
	case failoverPastBudget:
		if !st.budgetFailoverUsed {
			if a := launchReplacement(st, r, true, within); a != nil {
				st.budgetFailoverUsed = true
				h.retryBudget.Charge(clock())
				return a
			}
		}
	}
	h.obs.BudgetExhausted("retry")
	return nil
}

// launchReplacement starts the next candidate of the plan, or, once every
// provider of the model failed with provider-level errors, the first of its
// fallback model. healthyOnly restricts the choice to providers without
// consecutive failures; a set bound to its tier, whose same-provider retry
// comes before any fallback or probe.
func launchReplacement(st *requestState, r *http.Request, healthyOnly bool, within tierBound) *attempt {
	if a := launchFrom(st, r, "failover", healthyOnly, within); a != nil {
		return a
	}
	if within.set {
		return nil
	}
	if st.plan.remaining() == 0 && st.live == 0 && fallback(st) {
		if a := launchFrom(st, r, "fallback", healthyOnly, within); a != nil {
			return a
		}
	}
	if st.live == 0 && !healthyOnly && !st.probed() {
		// The rest of the candidates are cooling down: rather than fail
		// while attempts remain, probe the one that recovers first (one
		// probe at a time per provider, as at the start of a request). A
		// request that already probed ends with its error instead.
		return launchProbe(st, r)
	}
	return nil
}

// launchFrom is launchNext, optionally over the healthy candidates only,
// and within the bound: the others are set aside for this one choice and
// stay in the plan.
func launchFrom(st *requestState, r *http.Request, reason string, healthyOnly bool, within tierBound) *attempt {
	if !healthyOnly && !within.set {
		return launchNext(st, r, reason, false)
	}
	pl := st.plan
	var aside []int
	for i, p := range pl.cands {
		if !pl.used[i] && (healthyOnly && p.health.Consecutive.Load() > 0 || !within.admits(p)) {
			pl.used[i] = true
			aside = append(aside, i)
		}
	}
	a := launchNext(st, r, reason, false)
	for _, i := range aside {
		pl.used[i] = false
	}
	return a
}

// answerFailure writes the final error when no attempt could commit: a
// request-level error passes through as the provider sent it;
// a client that left gets nothing; otherwise 503 (or 504, or the 4xx every
// provider agreed on) with the last upstream error in the message.
func answerFailure(w http.ResponseWriter, st *requestState) {
	last := st.lastFailure()
	switch {
	case st.outcome == OutcomeClientAbort:
		return
	case last != nil && last.class == wire.ClassObjectMissing && st.objectUnsure():
		st.answerHolderDown(w, st.plan.cands) // holder.go: not a not-found while a holder may be down
		return
	case last != nil && last.class.PassedThrough():
		st.outcome, st.status = OutcomeClientError, last.status
		passThrough(w, last)
		return
	}
	if st.plan != nil && len(st.attempts) == 0 && refuseUntranslatable(w, st) {
		return
	}
	if st.plan != nil && len(st.plan.cands) == 0 {
		// No configured provider serves this model in this dialect: the
		// request names something that does not exist here.
		st.refuse(w, http.StatusNotFound,
			fmt.Sprintf("model %q: no configured provider serves it for the %s API", st.req.Model, st.dialect))
		return
	}
	if st.outOfQuota() {
		secs := max(1, int(math.Ceil(float64(st.quotaUntil-clock().UnixNano())/float64(time.Second))))
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		st.outcome, st.status = OutcomeExhausted, http.StatusTooManyRequests
		wire.WriteError(w, st.dialect, http.StatusTooManyRequests, "all providers are out of quota: retry after the reset")
		return
	}
	// The client reads what kind of failure it was, never which provider
	// failed or why: that is in the request log line, where an operator
	// reads it; a client's message must not reveal the upstreams.
	status, msg := unservedStatus(st) // candidates.go
	if last != nil {
		if s := st.agreedStatus(); s != 0 {
			status = s
		}
		msg = failureMessage(status, last.class)
		if secs := failureRetryAfter(clock(), st.plan, last); secs > 0 { // candidates.go
			w.Header().Set("Retry-After", strconv.Itoa(secs))
		}
	}
	if st.timedOut() {
		status, msg = http.StatusGatewayTimeout, "request exceeded the total timeout: upstream timed out"
		st.outcome = OutcomeTimeout
	} else if shutdownCut(st.ctx) {
		status, msg = http.StatusServiceUnavailable, "the proxy is shutting down before an answer came: retry the request"
		w.Header().Set("Retry-After", "1")
	} else if !st.recoverAt.IsZero() {
		// The recovery as it stands now, not as it was when the candidates
		// were skipped: a failed probe has re-opened its provider since.
		if secs := recoverySeconds(clock(), st.plan.cands); secs > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(secs))
		}
	}
	if st.outcome == "" {
		st.outcome = OutcomeExhausted
		if len(st.attempts) == 0 {
			st.outcome = OutcomeUpstreamError
		}
	}
	st.status = status // finish logs it: one line per request, not a second one here
	wire.WriteError(w, st.dialect, status, msg)
}

// failureMessage is the client's message when every attempt failed for
// the providers' reasons: generic, in the words of the status.
func failureMessage(status int, last wire.FailClass) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "all providers failed: upstream rate limited"
	case status == http.StatusNotFound:
		return "all providers failed: model not found"
	case last == wire.ClassFirstByteTimeout || last == wire.ClassResponseTimeout:
		return "all providers failed: upstream timed out"
	}
	return "all providers failed: upstream unavailable"
}

// passThrough relays a request-level upstream error unchanged.
func passThrough(w http.ResponseWriter, a *attempt) {
	hdr := w.Header()
	for _, k := range []string{"Content-Type", "Request-Id", "X-Request-Id", "Retry-After", "X-Should-Retry"} {
		if v := a.errHeader.Get(k); v != "" {
			hdr.Set(k, v)
		}
	}
	if hdr.Get("Content-Type") == "" {
		hdr.Set("Content-Type", "application/json")
	}
	hdr.Set("Content-Length", strconv.Itoa(len(a.errBody)))
	w.WriteHeader(a.status)
	_, _ = w.Write(a.errBody)
}
