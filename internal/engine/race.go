package engine

import (
	"context"
	"net/http"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/health"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// race runs the attempts of one request until one is ready to commit and
// returns it, or returns nil when none can be (the state says why). Without
// hedging it is plain sequential failover; with hedging a slow streaming
// attempt is raced by an alternative after the hedge delay, and a failed
// racer is replaced at once. Every attempt reports once on st.done, so
// nothing blocks and nothing leaks.
//
// When it returns nil every attempt has reported and been settled (the
// ones still running were cancelled first), so the caller may read their
// outcomes to answer the client; the losers of a winner are reaped by
// st.drain after the commit.
func race(st *requestState, r *http.Request) *attempt {
	if a := runRace(st, r); a != nil {
		return a
	}
	st.drain()
	return nil
}

func runRace(st *requestState, r *http.Request) *attempt {
	h := st.h
	req := st.req
	failback(st)
	cands, route := h.candidates(req.Dialect, req.Model, req.SessionKey, req.SizeClass)
	if st.pinned == nil && st.discover == nil {
		st.route = route // a pinned or discovering request is not routed
	}
	st.plan = newPlan(st.holderPlan(cands), req.Model)
	// Every launch path checks attemptsLeft, the forced probe included, so
	// at most Retry.Attempts attempts ever report: none blocks on its
	// report, even after race returned (drain reaps them).
	st.done = make(chan *attempt, h.Retry.Attempts)
	return racePlan(st, r)
}

// racePlan runs the race over st.plan with st.req: a request's, or a
// continuation's (resume.go).
func racePlan(st *requestState, r *http.Request) *attempt {
	h := st.h
	req := st.req

	hedging := req.Stream && h.Hedge.Enabled && st.pinned == nil && st.discover == nil
	var hedgeC, retryC <-chan time.Time
	// Made when first armed: a request that neither hedges nor waits to
	// retry (most) makes no timer.
	var hedgeTimer, retryTimer *time.Timer
	defer func() {
		stopTimer(hedgeTimer)
		stopTimer(retryTimer)
	}()
	var pending *attempt // a same-provider retry waiting for its backoff

	// rearm restarts the hedge delay for the attempt just launched when it
	// runs alone (the delay measures how long the current attempt takes,
	// not the one that failed before it), and arms it when it is idle and
	// another racer would fit.
	rearm := func(launched bool) {
		if !hedging || !hedgeRoom(st) || (hedgeC != nil && !(launched && st.live == 1)) {
			return
		}
		newest := st.attempts[len(st.attempts)-1]
		hedgeC = armTimer(&hedgeTimer, hedgeDelayFirst(st, newest))
	}

	// carryOut does what a step of the policy says; it reports whether
	// the race is over.
	var carryOut func(s step) bool
	carryOut = func(s step) bool {
		for range s.retryBudgetRefused {
			h.obs.BudgetExhausted("retry")
		}
		switch s.kind {
		case stepEnd:
			if s.reason == endFatal {
				st.fatal = s.attempt
				st.cancelLive(wire.ErrHedgeLost)
			} else {
				abandon(st, r)
			}
			return true
		case stepRecord:
			st.skips = append(st.skips, ChainEntry{OffsetMs: msSince(st.start), Event: s.reason})
			h.obs.BudgetExhausted("hedge")
		case stepRetryLater:
			h.obs.Retry(s.attempt.p.name, string(s.attempt.class))
			pending = st.prepare(s.attempt.p, s.attempt.model, launchRetryReason, false)
			retryC = armTimer(&retryTimer, s.wait)
		case stepLaunch:
			if launchStep(st, r, s) != nil {
				return false
			}
			switch s.ifNone {
			case launchFailoverReason:
				return carryOut(step{kind: stepLaunch, reason: launchFailoverReason})
			case launchRetryReason:
				return carryOut(retryStep(st, s.attempt, true))
			case endFatal: // a context_fallback that could not start
				return carryOut(step{kind: stepEnd, reason: endFatal, attempt: s.attempt})
			}
		}
		return false
	}

	st.inlineFirst, st.hedging = true, hedging
	first := launchFirst(st, r)
	st.inlineFirst = false
	if first == nil {
		return nil
	}
	if st.resuming == "" {
		notePick(st, first)
	}
	rearm(true)

	for st.live > 0 || pending != nil {
		var s step
		fromHedgeTimer := false
		select {
		case a := <-st.done:
			st.live--
			if a.ok() {
				st.win(a)
				return a
			}
			settle(st, a)
			s = afterFailure(st, a, hedging, pending)
		case <-hedgeC:
			hedgeC = nil
			fromHedgeTimer = true
			s = onHedgeTimer(st, clock())
		case <-retryC:
			retryC = nil
			s = onRetryTimer(st, pending, hedging, clock())
			pending = nil
		case <-st.ctx.Done():
			s = step{kind: stepEnd, reason: endAbandon}
		}
		n := len(st.attempts)
		if carryOut(s) {
			return nil
		}
		// A hedge timer rearms only with the hedge it launched: with the
		// budget spent or no admissible candidate it waits on what runs.
		if !fromHedgeTimer || len(st.attempts) > n {
			rearm(len(st.attempts) > n)
		}
	}
	return nil
}

// launchFirst starts a request's first attempt: the first admissible
// candidate; when every candidate of the model is cooling down, its
// fallback model comes before a last-resort probe of a provider known to
// fail.
func launchFirst(st *requestState, r *http.Request) *attempt {
	reason := "initial"
	if st.resuming != "" {
		reason = "resume_" + st.resuming
	}
	first := launchNext(st, r, reason, false)
	if first == nil && len(st.plan.cands) > 0 && st.plan.remaining() == 0 && st.resuming == "" && fallback(st) {
		first = launchNext(st, r, "fallback", false)
	}
	if first == nil {
		first = launchProbe(st, r)
	}
	return first
}

// launchStep carries out a stepLaunch: a failover, a hedge (charged to the
// hedge budget, which it gives back when no candidate could start) or the
// prepared same-provider retry. It returns nil when nothing started.
func launchStep(st *requestState, r *http.Request, s step) *attempt {
	h := st.h
	switch s.reason {
	case launchHedgeReason:
		tok, ok := h.hedgeBudget.TakeN(clock(), st.inputEstimate())
		if !ok { // another request took the last of the budget meanwhile
			st.skips = append(st.skips, ChainEntry{OffsetMs: msSince(st.start), Event: "hedge_budget_exhausted"})
			h.obs.BudgetExhausted("hedge")
			return nil
		}
		rerank(st) // the hedge goes to the cheapest now (another vendor first)
		a := launchNext(st, r, launchHedgeReason, true)
		if a == nil {
			// Every candidate left is cooling down or busy: no hedge
			// started, so none is charged.
			h.hedgeBudget.RefundN(tok, st.inputEstimate())
			return nil
		}
		st.hedged = true
		h.obs.HedgeLaunched(a.p.name)
		return a
	case launchRetryReason:
		if launchRetry(st, r, s.attempt) { // charges the retry budget as it starts
			return s.attempt
		}
		return nil
	case launchContextFallbackReason:
		return launchContextFallback(st, r, s.attempt)
	case launchDiscoverReason:
		return launchNext(st, r, launchDiscoverReason, false)
	}
	return launchFailover(st, r, s.within)
}

// abandon ends a race whose request is over (client gone, total timeout):
// every attempt is cancelled, and a client that left is marked so, so no
// error response is written to a closed connection.
func abandon(st *requestState, r *http.Request) {
	st.cancelLive(nil)
	if r.Context().Err() != nil {
		st.outcome = OutcomeClientAbort
	}
}

// launchNext starts an attempt on the next admissible candidate; a hedge
// prefers a vendor that no live attempt uses. Cooling-down candidates are
// skipped and recorded.
func launchNext(st *requestState, r *http.Request, reason string, otherVendor bool) *attempt {
	h := st.h
	if st.attemptsLeft() == 0 {
		return nil
	}
	now := clock()
	for pass := 0; pass < 2; pass++ {
		for i, p := range st.plan.cands {
			if st.plan.used[i] {
				continue
			}
			if pass == 0 && otherVendor && st.liveVendor(p.vendor) {
				continue
			}
			if max := p.cfg.MaxInFlight; max > 0 && p.health.InFlightNow() >= int64(max) {
				st.skip(p, "busy_skip")
				continue
			}
			if !carries(st, p) {
				st.plan.used[i] = true
				continue
			}
			key, ok := keyFor(st, p, now)
			if !ok {
				st.plan.used[i] = true
				continue
			}
			ok, probe := p.health.Admit(now, st.plan.model)
			if !ok {
				key.release(now)
				st.plan.used[i] = true
				st.skip(p, "cooldown_skip")
				st.recoverBy(p.health.OpenUntil())
				continue
			}
			st.plan.used[i] = true
			if probe {
				reason = "probe"
			}
			a := st.prepare(p, p.upstreamModel(st.plan.model), reason, probe)
			key.attach(a)
			st.launch(h, r, a)
			return a
		}
		if !otherVendor {
			break
		}
	}
	return nil
}

// launchProbe handles every candidate being open: rather than failing
// outright, one probe goes to the provider whose open period ends first,
// unless its 429 set that period with a Retry-After, which is honoured as
// a key pool's is (docs/health.md).
// Only a provider skipped for its breaker is probed: one that is busy or
// lacks the model has a closed breaker, and forcing it would break its
// max_in_flight and let a single failure open it.
func launchProbe(st *requestState, r *http.Request) *attempt {
	h := st.h
	if len(st.plan.cands) == 0 || st.attemptsLeft() == 0 {
		return nil
	}
	now := clock()
	var open []*provider
	var healths []*health.Provider
	for _, p := range st.plan.cands {
		if p.health.State(now) == health.StateClosed || p.health.ModelCooling(now, st.plan.model) || p.busy() || st.plan.tries[p] > 0 {
			continue // only providers skipped for their breaker, not yet tried by this request
		}
		if p.health.RateLimited(now) {
			// Its 429 said when to come back: not before (SPEC 14).
			st.rateLimited = true
			st.recoverBy(p.health.OpenUntil())
			continue
		}
		open = append(open, p)
		healths = append(healths, p.health)
	}
	ph, until := earliestRecovery(healths)
	if ph == nil {
		return nil
	}
	st.recoverAt = until
	for _, p := range open {
		if p.health != ph || !carries(st, p) {
			continue
		}
		key, ok := keyFor(st, p, now)
		if ok && !ph.ForceProbe(now) {
			key.release(now)
			ok = false
		}
		if ok {
			a := st.prepare(p, p.upstreamModel(st.plan.model), "probe", true)
			key.attach(a)
			st.launch(h, r, a)
			return a
		}
	}
	return nil
}

// launchRetry starts a same-provider retry whose wait is over, charging the
// retry budget now. It returns false, having started nothing, when the
// attempts or the budget ran out meanwhile or the provider's breaker does
// not admit it; the caller then fails over.
func launchRetry(st *requestState, r *http.Request, a *attempt) bool {
	h := st.h
	if st.attemptsLeft() == 0 {
		return false
	}
	if a.p.busy() {
		return false // max_in_flight holds for retries too: fail over instead
	}
	now := clock()
	tok, ok := h.retryBudget.Take(now)
	if !ok {
		return false
	}
	key, ok := keyFor(st, a.p, now)
	if !ok {
		h.retryBudget.Refund(tok)
		return false
	}
	ok, probe := a.p.health.Admit(now, st.plan.model)
	if !ok {
		key.release(now)
		h.retryBudget.Refund(tok)
		return false
	}
	a.probe = probe
	key.attach(a)
	st.launch(h, r, a)
	return true
}

// prepare creates an attempt without starting it.
func (st *requestState) prepare(p *provider, model, reason string, probe bool) *attempt {
	return &attempt{p: p, model: model, reason: reason, probe: probe}
}

// launch starts a prepared attempt in its own goroutine (the first one of
// a race that nothing can join, on the request's: see inlineFirst).
func (st *requestState) launch(h *Engine, r *http.Request, a *attempt) {
	a.n = len(st.attempts) + 1
	a.start = time.Now()
	a.offset = a.start.Sub(st.start)
	a.ctx, a.cancel = attemptContext(st.ctx)
	a.lease = st.lease
	st.attempts = append(st.attempts, a)
	st.plan.tries[a.p]++
	st.live++
	a.begin()
	traceAttempt(st, a)
	req := st.requestFor(a.p)
	a.xlReq = st.translated(a.p, a.model, req)
	a.launchHeader(r, req)
	if h.Stream.Resume > 0 && st.req.Stream && st.resuming == "" && a.p.translation(st.dialect) == nil {
		// The resumer a commit would set up, told the events as the gate
		// reads them (a continuation never crosses formats: none for a
		// translated attempt).
		a.track, a.tracked = wire.NewResumer(st.dialect, st.req), true
	}
	if st.inlineFirst && len(st.attempts) == 1 && (!st.hedging || !hedgeRoom(st)) {
		// The first attempt with nothing that could start beside it (no
		// hedge for this request, or no candidate or room for one): no
		// timer of the race can fire before it reports, so it runs here,
		// without a goroutine and its hand-off, and reports on st.done as
		// any attempt does (room for every attempt: never blocks). Its
		// context still ends with the request's.
		h.run(a, req, r, st.done)
		return
	}
	go h.run(a, req, r, st.done)
}

// armTimer starts *t for d, making it the first time, and returns its
// channel.
func armTimer(t **time.Timer, d time.Duration) <-chan time.Time {
	if *t == nil {
		*t = time.NewTimer(d)
	} else {
		(*t).Reset(d)
	}
	return (*t).C
}

func stopTimer(t *time.Timer) {
	if t != nil {
		t.Stop()
	}
}

func stoppedTimer() *time.Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}

// attemptContext derives an attempt's context from the request's: the
// attempt ends with the request (client gone, total timeout) or alone
// (lost the race, first-byte timeout), never with the module.
func attemptContext(parent context.Context) (context.Context, context.CancelCauseFunc) {
	return context.WithCancelCause(parent)
}
