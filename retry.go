package llmhedge

import (
	"net/http"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/limit"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// retryWait decides whether a failed attempt is retried on the same
// provider, and after how long: transient errors only, at most
// retry.same_provider extra tries, Retry-After up to retry_after_max (a
// 429 without it moves on), never past the total timeout, never closer
// than the backoff base, and only while the retry budget has room. The
// budget is charged when the retry starts (launchRetry), not here.
func (h *Handler) retryWait(st *requestState, a *attempt) (time.Duration, bool) {
	wait, ok, _ := h.retryVerdict(st, a)
	return wait, ok
}

// retryVerdict is retryWait that also tells whether the retry budget was
// what refused the retry (the budget_exhausted metric).
func (h *Handler) retryVerdict(st *requestState, a *attempt) (wait time.Duration, ok, budgetRefused bool) {
	if !a.class.Transient() || a.noRetry || st.attemptsLeft() == 0 {
		return 0, false, false
	}
	// tries counts the attempts made on this provider, the first included.
	if st.plan.tries[a.p] > h.Retry.sameProvider() {
		return 0, false, false
	}
	base := time.Duration(h.Retry.BackoffBase)
	switch {
	case a.hasRA && a.retryAfter > time.Duration(h.Retry.RetryAfterMax):
		return 0, false, false
	case a.hasRA:
		wait = max(a.retryAfter, base)
	case a.class == wire.ClassRateLimited:
		return 0, false, false
	default:
		wait = limit.Backoff(base, time.Duration(h.Retry.BackoffMax), st.plan.tries[a.p], h.rand)
	}
	// The deadline is the context's, on the wall clock: time.Now, not clock.
	if dl, ok := st.ctx.Deadline(); ok && time.Now().Add(wait).After(dl) {
		return 0, false, false
	}
	if !a.p.health.AdmitsAt(clock().Add(wait), st.plan.model) {
		// The breaker (opened by this very failure, or a failed probe)
		// would refuse the retry when its wait is over: fail over now.
		return 0, false, false
	}
	if !h.retryBudget.Allows(clock()) {
		return 0, false, true
	}
	return wait, true, false
}

// fallback switches the plan to the fallback model of the current one,
// once every provider of it failed with provider-level errors.
func (h *Handler) fallback(st *requestState) bool {
	if st.pinned != nil || st.discover != nil {
		return false // only the pinned provider holds the conversation
	}
	for _, f := range h.Retry.FallbackModels {
		if !globMatch(f.From, st.plan.model) || st.fellBack[f.To] {
			continue
		}
		for _, a := range st.attempts {
			if !a.class.ProviderLevel() {
				return false
			}
		}
		st.fellBack[f.To] = true
		// The session key keeps a conversation on one provider of the
		// fallback model too, where its prompt cache will build up.
		cands := h.translatable(st, h.candidates(st.dialect, f.To, st.req.SessionKey), f.To)
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

// contextFallbackTo is the model a context_fallback rule retries a failed
// attempt with, or "": the attempt's 400 says the prompt is too long, the
// plan's model matches the rule's <from>, a provider serves its <to>, and
// the request has not fallen back for its context yet and still has an
// attempt and room in the retry budget. A continuation never switches
// model: its too-long prefill goes on to replay-match (resume.go).
func (h *Handler) contextFallbackTo(st *requestState, a *attempt) string {
	if len(h.Retry.ContextFallbacks) == 0 || st.contextFellBack > 0 || st.pinned != nil || st.resuming != "" ||
		a.status != 400 || st.attemptsLeft() == 0 || !st.dialect.PromptTooLong(a.errBody) {
		return ""
	}
	for _, f := range h.Retry.ContextFallbacks {
		if f.To == st.plan.model || !globMatch(f.From, st.plan.model) {
			continue
		}
		for _, p := range h.providers {
			if p.serves(st.dialect, f.To) {
				if !h.retryBudget.Allows(clock()) {
					return ""
				}
				return f.To
			}
		}
	}
	return ""
}

// launchContextFallback switches the plan to the context_fallback model
// for a's too-long prompt and starts its first admissible candidate,
// charged to the retry budget. It returns nil when nothing started; the
// 400 is then the answer.
func (h *Handler) launchContextFallback(st *requestState, r *http.Request, a *attempt) *attempt {
	to := h.contextFallbackTo(st, a)
	if to == "" {
		return nil
	}
	tok, ok := h.retryBudget.Take(clock())
	if !ok {
		return nil
	}
	st.contextFellBack = len(st.attempts)
	st.fallbackModel = to
	st.plan = newPlan(h.translatable(st, h.candidates(st.dialect, to, st.req.SessionKey), to), to)
	n := h.launchNext(st, r, launchContextFallbackReason, false)
	if n == nil {
		h.retryBudget.Refund(tok) // every provider of it is cooling down: no retry happened
	}
	return n
}

// retryCandidate picks the attempt to retry on its own provider once
// nothing else can start: the one that just failed, or, in a race, an
// earlier racer whose transient failure was passed over for a failover
// that has failed since (a 529 on one provider, then a refused connection
// on the other, must still get the 529's retry). In a race the best
// priority tier wins; within a tier, the latest failure.
//
// refused counts the retries the retry budget refused on the way.
func (h *Handler) retryCandidate(st *requestState, last *attempt, racing bool) (b *attempt, wait time.Duration, ok bool, refused int) {
	wait, ok, byBudget := h.retryVerdict(st, last)
	if byBudget {
		refused++
	}
	if ok {
		b = last
	}
	if !racing {
		return b, wait, ok, refused
	}
	seen := map[*provider]bool{last.p: true}
	for i := len(st.attempts) - 1; i >= 0; i-- {
		c := st.attempts[i]
		if seen[c.p] {
			continue
		}
		seen[c.p] = true // only a provider's latest attempt speaks for it
		if c.outcome != "provider_error" || st.liveOn(c.p) || b != nil && c.p.cfg.Priority >= b.p.cfg.Priority {
			continue
		}
		cwait, cok, byBudget := h.retryVerdict(st, c)
		if byBudget {
			refused++
		}
		if cok {
			b, wait = c, cwait
		}
	}
	return b, wait, b != nil, refused
}

// retryStep decides between a same-provider retry of a failed attempt
// (retryCandidate) and, for sequential attempts, a failover. A race
// (racing) that could start nothing else waits on its racers instead.
func (h *Handler) retryStep(st *requestState, last *attempt, racing bool) step {
	b, wait, ok, refused := h.retryCandidate(st, last, racing)
	switch {
	case ok:
		return step{kind: stepRetryLater, attempt: b, wait: wait, retryBudgetRefused: refused}
	case racing:
		return step{kind: stepNone, retryBudgetRefused: refused}
	}
	return step{kind: stepLaunch, reason: launchFailoverReason, retryBudgetRefused: refused}
}
