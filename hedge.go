package llmhedge

import (
	"context"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// Recent first-event latencies per provider outlive config reloads, like
// the breaker state, so a reload does not reset the adaptive hedge delay.
var latencyPool = caddy.NewUsagePool()

func loadLatency(name, baseURL string) *latencyTracker {
	v, _, _ := latencyPool.LoadOrNew(healthKey(name, baseURL), func() (caddy.Destructor, error) {
		return latencyEntry{newLatencyTracker()}, nil
	})
	return v.(latencyEntry).t
}

func releaseLatency(name, baseURL string) { _, _ = latencyPool.Delete(healthKey(name, baseURL)) }

type latencyEntry struct{ t *latencyTracker }

func (latencyEntry) Destruct() error { return nil }

// race runs the attempts of one request until one is ready to commit and
// returns it, or returns nil when none can be (the state says why). Without
// hedging it is plain sequential failover; with hedging a slow streaming
// attempt is raced by an alternative after the hedge delay. Every attempt
// reports once on st.done, so nothing blocks and nothing leaks.
func (h *Handler) race(st *requestState, r *http.Request) *attempt {
	req := st.req
	repl, _ := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if repl == nil {
		repl = caddy.NewReplacer()
	}
	st.repl = repl
	st.plan = newPlan(h.candidates(req.dialect, req.model, req.sessionKey), req.model)
	st.done = make(chan *attempt, h.Retry.Attempts+1)

	hedging := req.stream && h.Hedge.enabled()
	var hedgeC, retryC <-chan time.Time
	var hedgeDelayFor time.Duration
	hedgeTimer := stoppedTimer()
	retryTimer := stoppedTimer()
	defer hedgeTimer.Stop()
	defer retryTimer.Stop()
	var pending *attempt // a same-provider retry waiting for its backoff

	first := h.launchNext(st, r, "initial", false)
	if first == nil {
		first = h.launchProbe(st, r)
	}
	if first == nil {
		return nil
	}
	if hedging && st.plan.remaining() > 0 {
		hedgeDelayFor = h.hedgeDelay(first.p, req.sizeClass)
		hedgeTimer.Reset(hedgeDelayFor)
		hedgeC = hedgeTimer.C
	}

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
			case classRequest, classClientAbort, classTotalTimeout:
				st.cancelLive(nil)
				return nil
			}
			if st.ctx.Err() != nil {
				continue
			}
			if wait, ok := h.retryWait(st, a); ok && pending == nil {
				pending = st.prepare(a.p, a.model, "retry", false)
				retryTimer.Reset(wait)
				retryC = retryTimer.C
				continue
			}
			if st.live == 0 || hedging {
				h.failover(st, r)
			}
		case <-hedgeC:
			hedgeC = nil
			if st.live == 0 || st.live >= h.Hedge.MaxAttempts || st.attemptsLeft() == 0 || st.plan.remaining() == 0 {
				continue
			}
			if !h.hedgeBudget.tryAcquire(clock()) {
				st.hedgeDenied = true
				h.metrics.budgetExhausted("hedge")
				continue
			}
			if a := h.launchNext(st, r, "hedge_triggered", true); a != nil {
				st.hedged = true
				h.metrics.hedgeLaunched(a.p.name)
				if st.live < h.Hedge.MaxAttempts && st.plan.remaining() > 0 {
					hedgeTimer.Reset(hedgeDelayFor)
					hedgeC = hedgeTimer.C
				}
			}
		case <-retryC:
			retryC = nil
			a := pending
			pending = nil
			if ok, probe := a.p.health.admit(clock(), st.plan.model); ok && st.attemptsLeft() > 0 {
				a.probe = probe
				st.launch(h, r, a)
			} else if st.live == 0 || hedging {
				h.failover(st, r)
			}
		case <-st.ctx.Done():
			st.cancelLive(nil)
			return nil
		}
	}
	return nil
}

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
func (h *Handler) launchProbe(st *requestState, r *http.Request) *attempt {
	if len(st.plan.cands) == 0 || st.attemptsLeft() == 0 {
		return nil
	}
	healths := make([]*providerHealth, len(st.plan.cands))
	for i, p := range st.plan.cands {
		healths[i] = p.health
	}
	ph, until := earliestRecovery(healths)
	if ph == nil {
		return nil
	}
	st.recoverAt = until
	for _, p := range st.plan.cands {
		if p.health == ph && ph.forceProbe(clock()) {
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
