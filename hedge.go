package llmhedge

import (
	"context"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
)

func init() {
	// The admin view shows each provider's recent first-event p50/p95
	// from the same estimator that drives the hedge delay.
	firstEventQuantiles = func(ph *providerHealth) (p50, p95 time.Duration, ok bool) {
		if ph.latency == nil {
			return 0, 0, false
		}
		now := clock()
		p50, ok50 := ph.latency.overall(0.5, now)
		p95, ok95 := ph.latency.overall(0.95, now)
		return p50, p95, ok50 && ok95
	}
}

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
func (h *Handler) race(st *requestState, r *http.Request) *attempt {
	if a := h.runRace(st, r); a != nil {
		return a
	}
	st.drain()
	return nil
}

func (h *Handler) runRace(st *requestState, r *http.Request) *attempt {
	req := st.req
	repl, _ := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if repl == nil {
		repl = caddy.NewReplacer()
	}
	st.repl = repl
	st.plan = newPlan(st.pinPlan(h.candidates(req.dialect, req.model, req.sessionKey)), req.model)
	// Every launch path checks attemptsLeft, the forced probe included, so
	// at most Retry.Attempts attempts ever report: none blocks on its
	// report, even after race returned (drain reaps them).
	st.done = make(chan *attempt, h.Retry.Attempts)

	hedging := req.stream && h.Hedge.enabled() && st.pinned == nil
	var hedgeC, retryC <-chan time.Time
	hedgeTimer := stoppedTimer()
	retryTimer := stoppedTimer()
	defer hedgeTimer.Stop()
	defer retryTimer.Stop()
	var pending *attempt // a same-provider retry waiting for its backoff

	// rearm restarts the hedge delay for the attempt just launched when it
	// runs alone (the delay measures how long the current attempt takes,
	// not the one that failed before it), and arms it when it is idle and
	// another racer would fit.
	rearm := func(launched bool) {
		if !hedging || !h.hedgeRoom(st) || (hedgeC != nil && !(launched && st.live == 1)) {
			return
		}
		newest := st.attempts[len(st.attempts)-1]
		hedgeTimer.Reset(h.hedgeDelay(newest.p, req.sizeClass))
		hedgeC = hedgeTimer.C
	}

	first := h.launchNext(st, r, "initial", false)
	if first == nil && len(st.plan.cands) > 0 && st.plan.remaining() == 0 && h.fallback(st) {
		// Every candidate of the model is cooling down: its fallback model
		// comes before a last-resort probe of a provider known to fail.
		first = h.launchNext(st, r, "fallback", false)
	}
	if first == nil {
		first = h.launchProbe(st, r)
	}
	if first == nil {
		return nil
	}
	rearm(true)

	for st.live > 0 || pending != nil {
		select {
		case a := <-st.done:
			st.live--
			if a.ok() {
				st.win(a)
				return a
			}
			h.settle(st, a)
			switch a.class {
			case classRequest, classClientKey:
				// The request itself is wrong (every other racer would say
				// so too), or the client's own key was refused (its answer:
				// a failover would carry that key to another host). The
				// others lose the race, they did not fail.
				st.fatal = a
				st.cancelLive(errHedgeLost)
				return nil
			case classClientAbort, classTotalTimeout:
				abandon(st, r)
				return nil
			}
			if st.ctx.Err() != nil {
				abandon(st, r)
				return nil
			}
			n := len(st.attempts)
			if hedging {
				// A racer failed: the next candidate starts at once, without
				// waiting for a backoff or the hedge delay.
				h.failover(st, r)
			}
			if len(st.attempts) == n && pending == nil {
				if b, wait, ok := h.retryCandidate(st, a, hedging); ok {
					pending = st.prepare(b.p, b.model, "retry", false)
					retryTimer.Reset(wait)
					retryC = retryTimer.C
				} else if !hedging {
					h.failover(st, r)
				}
			}
			rearm(len(st.attempts) > n)
		case <-hedgeC:
			hedgeC = nil
			if !h.hedgeRoom(st) {
				continue
			}
			tok, ok := h.hedgeBudget.take(clock())
			if !ok {
				// The request waits on what is running (up to first_byte).
				st.skips = append(st.skips, chainEntry{OffsetMs: msSince(st.start), Event: "hedge_budget_exhausted"})
				h.metrics.budgetExhausted("hedge")
				continue
			}
			a := h.launchNext(st, r, "hedge_triggered", true)
			if a == nil {
				// Every candidate left is cooling down or busy: no hedge
				// started, so none is charged.
				h.hedgeBudget.refund(tok)
				continue
			}
			st.hedged = true
			h.metrics.hedgeLaunched(a.p.name)
			rearm(false)
		case <-retryC:
			retryC = nil
			a := pending
			pending = nil
			if st.ctx.Err() != nil {
				abandon(st, r)
				return nil
			}
			n := len(st.attempts)
			h.launchRetry(st, r, a) // charges the retry budget as it starts
			if len(st.attempts) == n && (st.live == 0 || hedging) {
				h.failover(st, r)
			}
			rearm(len(st.attempts) > n)
		case <-st.ctx.Done():
			abandon(st, r)
			return nil
		}
	}
	return nil
}

// hedgeRoom reports whether one more racer may start now: something is
// running to race against, fewer than max_attempts race, the request has
// attempts left and a candidate is unused.
func (h *Handler) hedgeRoom(st *requestState) bool {
	return st.live > 0 && st.live < h.Hedge.MaxAttempts && st.attemptsLeft() > 0 && st.plan.remaining() > 0
}

// abandon ends a race whose request is over (client gone, total timeout):
// every attempt is cancelled, and a client that left is marked so, so no
// error response is written to a closed connection.
func abandon(st *requestState, r *http.Request) {
	st.cancelLive(nil)
	if r.Context().Err() != nil {
		st.outcome = outcomeClientAbort
	}
}

// hedgeDelay is how long the first attempt on p may take to its first
// valid event before an alternative is launched.
func (h *Handler) hedgeDelay(p *provider, class int) time.Duration {
	return hedgeDelay(p.latency, class, time.Duration(h.Hedge.Delay), h.Hedge.Percentile,
		time.Duration(h.Hedge.Min), time.Duration(h.Hedge.Max), clock())
}

// launchNext starts an attempt on the next admissible candidate; a hedge
// prefers a vendor that no live attempt uses. Cooling-down candidates are
// skipped and recorded.
func (h *Handler) launchNext(st *requestState, r *http.Request, reason string, otherVendor bool) *attempt {
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
			if max := p.cfg.MaxInFlight; max > 0 && p.health.inFlightNow() >= int64(max) {
				st.skip(p, "busy_skip")
				continue
			}
			ok, probe := p.health.admit(now, st.plan.model)
			if !ok {
				st.plan.used[i] = true
				st.skip(p, "cooldown_skip")
				if until := p.health.openUntil(); !until.IsZero() && (st.recoverAt.IsZero() || until.Before(st.recoverAt)) {
					st.recoverAt = until
				}
				continue
			}
			st.plan.used[i] = true
			if probe {
				reason = "probe"
			}
			a := st.prepare(p, p.upstreamModel(st.plan.model), reason, probe)
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
// outright, one probe goes to the provider whose open period ends first.
// Only a provider skipped for its breaker is probed: one that is busy or
// lacks the model has a closed breaker, and forcing it would break its
// max_in_flight and let a single failure open it.
func (h *Handler) launchProbe(st *requestState, r *http.Request) *attempt {
	if len(st.plan.cands) == 0 || st.attemptsLeft() == 0 {
		return nil
	}
	now := clock()
	var open []*provider
	var healths []*providerHealth
	for _, p := range st.plan.cands {
		if p.health.state(now) == stateClosed || p.health.modelCooling(now, st.plan.model) || p.busy() || st.plan.tries[p] > 0 {
			continue // only providers skipped for their breaker, not yet tried by this request
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
		if p.health == ph && ph.forceProbe(now) {
			a := st.prepare(p, p.upstreamModel(st.plan.model), "probe", true)
			st.launch(h, r, a)
			return a
		}
	}
	return nil
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
