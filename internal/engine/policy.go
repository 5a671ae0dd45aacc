package engine

import (
	"net/http"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/limit"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// The race's policy: what happens next after an attempt failed, the hedge
// timer fired or a retry's wait is over. Each decision reads the request's
// state (its plan, attempts, budgets, the providers' health) and returns a
// step; it starts nothing and changes nothing. runRace carries the step
// out: it launches, arms the timers and reaps.

// stepKind is what runRace does next.
type stepKind uint8

const (
	stepNone       stepKind = iota // start nothing: wait on what is running
	stepLaunch                     // start an attempt: step.reason says which kind
	stepRetryLater                 // retry step.attempt's provider after step.wait
	stepEnd                        // the race is over: step.reason is endFatal or endAbandon
	stepRecord                     // note step.reason in the decision chain, start nothing
)

// Reasons of a stepEnd.
const (
	endFatal   = "fatal"   // step.attempt's error is the answer: the request or the client's key is wrong
	endAbandon = "abandon" // the client left or the total timeout ran out
)

// Reasons of a stepLaunch; "failover" also covers a fallback model and a
// last-resort probe when no candidate of the plan is left (launchReplacement).
const (
	launchFailoverReason = "failover"
	launchHedgeReason    = "hedge_triggered"
	launchRetryReason    = "retry"
	// a too-long prompt retried once with a larger model (policy.go)
	launchContextFallbackReason = "context_fallback"
)

// step is one decision of the policy.
type step struct {
	kind   stepKind
	reason string
	// attempt is the attempt the step is about: the fatal one of an
	// endFatal, the failed one a stepRetryLater retries (and a failover
	// falls back to retrying), the prepared retry a stepLaunch starts.
	attempt *attempt
	wait    time.Duration // stepRetryLater
	// ifNone is what a stepLaunch falls back to when it starts nothing:
	// "" nothing, "retry" the retry decision, "failover" a failover.
	ifNone string
	// retryBudgetRefused counts the same-provider retries the retry budget
	// refused on the way to this decision (a metric).
	retryBudgetRefused int
	// within bounds a failover to the tier that still holds a
	// same-provider retry (racerFailed).
	within tierBound
}

// tierBound limits a failover to the candidates of priority max or better
// when set: a same-provider retry of that tier is still allowed, so
// neither a lower tier, nor a fallback model, nor a probe may start yet.
type tierBound struct {
	max int
	set bool
}

// admits reports whether the bound lets p start.
func (b tierBound) admits(p *provider) bool {
	return !b.set || p.cfg.Priority <= b.max
}

// afterFailure decides what follows a settled, failed attempt a.
// pending is the same-provider retry already waiting, or nil.
func afterFailure(st *requestState, a *attempt, hedging bool, pending *attempt) step {
	switch a.class {
	case wire.ClassRequest:
		if contextFallbackTo(st, a) != "" {
			return step{kind: stepLaunch, reason: launchContextFallbackReason, attempt: a, ifNone: endFatal}
		}
		if st.contextFellBack > 0 && a.n <= int(st.contextFellBack) && (st.live > 0 || pending != nil) && st.dialect.PromptTooLong(a.errBody) {
			// A racer of the too-long model said so too: the attempt on
			// the larger model answers.
			return step{kind: stepNone}
		}
		return step{kind: stepEnd, reason: endFatal, attempt: a}
	case wire.ClassClientKey:
		// The request itself is wrong (every other racer would say so too),
		// or the client's own key was refused (its answer: a failover would
		// carry that key to another host). The others lose the race, they
		// did not fail.
		return step{kind: stepEnd, reason: endFatal, attempt: a}
	case wire.ClassClientAbort, wire.ClassTotalTimeout:
		return step{kind: stepEnd, reason: endAbandon}
	case wire.ClassObjectMissing:
		// Not there: the next candidate, at once; none left, the
		// not-found answer is the client's.
		return step{kind: stepLaunch, reason: launchDiscoverReason, attempt: a, ifNone: endFatal}
	}
	if st.ctx.Err() != nil {
		return step{kind: stepEnd, reason: endAbandon}
	}
	if hedging {
		return racerFailed(st, a, pending)
	}
	if pending != nil {
		return step{kind: stepNone}
	}
	return retryStep(st, a, false)
}

// racerFailed decides what follows a provider-level failure in a race.
// The next attempt stays within the highest priority tier that still has a
// candidate or an allowed same-provider retry: a candidate of that tier
// starts at once (no backoff, no hedge delay); without one, the retry
// waits out its backoff or Retry-After. Only when no same-provider retry
// is allowed does the failover reach a lower tier, a fallback model or a
// probe, so hedging never costs a request its model on a transient error
// (a lower tier is still reached by the hedge timer, for slowness).
func racerFailed(st *requestState, a, pending *attempt) step {
	within := retryTier(st, a, pending)
	if within.set && !st.plan.unusedWithin(within.max) {
		if pending != nil {
			return step{kind: stepNone} // the tier's retry is already waiting
		}
		return retryStep(st, a, true)
	}
	s := step{kind: stepLaunch, reason: launchFailoverReason, attempt: a, within: within}
	if pending == nil {
		// Only when no candidate can start is a same-provider retry
		// considered.
		s.ifNone = launchRetryReason
	}
	return s
}

// retryTier bounds the next failover by the best tier that holds a
// same-provider retry: the one already pending, else the one a failed
// racer is still allowed (retryCandidate's choice); unset when there is
// none.
func retryTier(st *requestState, a, pending *attempt) tierBound {
	if pending != nil {
		return tierBound{max: pending.p.cfg.Priority, set: true}
	}
	if b, _, ok, _ := retryCandidate(st, a, true); ok {
		return tierBound{max: b.p.cfg.Priority, set: true}
	}
	return tierBound{}
}

// onHedgeTimer decides what the hedge delay's end starts: a hedge when
// another racer fits and the hedge budget has room. With the budget spent
// the request waits on what is running (up to first_byte), and the
// decision chain says so.
func onHedgeTimer(st *requestState, now time.Time) step {
	h := st.h
	if !hedgeRoom(st) {
		return step{kind: stepNone}
	}
	if !h.hedgeBudget.AllowsN(now, st.inputEstimate()) {
		return step{kind: stepRecord, reason: "hedge_budget_exhausted"}
	}
	return step{kind: stepLaunch, reason: launchHedgeReason}
}

// onRetryTimer decides what the end of a retry's wait starts: the retry,
// prepared as pending, unless the request is over or the retry can no
// longer go (no attempts left, the provider at max_in_flight, the retry
// budget spent, its breaker refusing): then a failover when nothing else
// runs or the request races, else nothing.
func onRetryTimer(st *requestState, pending *attempt, hedging bool, now time.Time) step {
	h := st.h
	if st.ctx.Err() != nil {
		return step{kind: stepEnd, reason: endAbandon}
	}
	failover := step{kind: stepNone}
	if st.live == 0 || hedging {
		failover = step{kind: stepLaunch, reason: launchFailoverReason}
	}
	if st.attemptsLeft() == 0 || pending.p.busy() || !h.retryBudget.Allows(now) ||
		!pending.p.health.AdmitsAt(now, st.plan.model) {
		return failover
	}
	s := step{kind: stepLaunch, reason: launchRetryReason, attempt: pending}
	if failover.kind == stepLaunch {
		s.ifNone = launchFailoverReason // the probe slot went to another request meanwhile
	}
	return s
}

// retryWait decides whether a failed attempt is retried on the same
// provider, and after how long: transient errors only, at most
// retry.same_provider extra tries, Retry-After up to retry_after_max (a
// 429 without it moves on), never past the total timeout, never closer
// than the backoff base, and only while the retry budget has room. The
// budget is charged when the retry starts (launchRetry), not here.
func retryWait(st *requestState, a *attempt) (time.Duration, bool) {
	wait, ok, _ := retryVerdict(st, a)
	return wait, ok
}

// retryVerdict is retryWait that also tells whether the retry budget was
// what refused the retry (the budget_exhausted metric).
func retryVerdict(st *requestState, a *attempt) (wait time.Duration, ok, budgetRefused bool) {
	h := st.h
	if !a.class.Transient() || a.noRetry || st.attemptsLeft() == 0 {
		return 0, false, false
	}
	// tries counts the attempts made on this provider, the first included.
	if st.plan.tries[a.p] > h.Retry.SameProvider {
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
func fallback(st *requestState) bool {
	h := st.h
	if st.pinned != nil || st.discover != nil {
		return false // only the pinned provider holds the conversation
	}
	for _, f := range h.Retry.FallbackModels {
		if !GlobMatch(f.From, st.plan.model) || st.fellBack[f.To] {
			continue
		}
		for _, a := range st.attempts {
			if !a.class.ProviderLevel() {
				return false
			}
		}
		if st.fellBack == nil { // made here: most requests never fall back
			st.fellBack = map[string]bool{}
		}
		st.fellBack[f.To] = true
		// The session key keeps a conversation on one provider of the
		// fallback model too, where its prompt cache will build up.
		cands, _ := h.candidates(st.dialect, f.To, st.req.SessionKey, st.req.SizeClass)
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
func contextFallbackTo(st *requestState, a *attempt) string {
	h := st.h
	if len(h.Retry.ContextFallbacks) == 0 || st.contextFellBack > 0 || st.pinned != nil || st.resuming != "" ||
		a.status != 400 || st.attemptsLeft() == 0 || !st.dialect.PromptTooLong(a.errBody) {
		return ""
	}
	for _, f := range h.Retry.ContextFallbacks {
		if f.To == st.plan.model || !GlobMatch(f.From, st.plan.model) {
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
func launchContextFallback(st *requestState, r *http.Request, a *attempt) *attempt {
	h := st.h
	to := contextFallbackTo(st, a)
	if to == "" {
		return nil
	}
	tok, ok := h.retryBudget.Take(clock())
	if !ok {
		return nil
	}
	st.contextFellBack = int32(len(st.attempts))
	st.fallbackModel = to
	cands, _ := h.candidates(st.dialect, to, st.req.SessionKey, st.req.SizeClass)
	st.plan = newPlan(cands, to)
	n := launchNext(st, r, launchContextFallbackReason, false)
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
func retryCandidate(st *requestState, last *attempt, racing bool) (b *attempt, wait time.Duration, ok bool, refused int) {
	wait, ok, byBudget := retryVerdict(st, last)
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
		cwait, cok, byBudget := retryVerdict(st, c)
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
func retryStep(st *requestState, last *attempt, racing bool) step {
	b, wait, ok, refused := retryCandidate(st, last, racing)
	switch {
	case ok:
		return step{kind: stepRetryLater, attempt: b, wait: wait, retryBudgetRefused: refused}
	case racing:
		return step{kind: stepNone, retryBudgetRefused: refused}
	}
	return step{kind: stepLaunch, reason: launchFailoverReason, retryBudgetRefused: refused}
}
