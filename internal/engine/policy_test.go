package engine

import (
	"context"
	"testing"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/limit"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// policyFixture is a request in the middle of its race, built by hand: no
// goroutine runs, the decisions only read it.
type policyFixture struct {
	h     *Engine
	st    *requestState
	p1    *provider
	p2    *provider
	spent bool // both budgets spent
}

func newPolicyFixture(t *testing.T, spent bool) *policyFixture {
	t.Helper()
	h := &Engine{Config: testConfig()}
	h.rand = func() float64 { return 0 }
	percent, floor := 20.0, 3.0
	if spent {
		percent, floor = 0, 0
	}
	h.retryBudget = limit.NewBudget(percent, floor, budgetWindow)
	h.hedgeBudget = limit.NewBudget(percent, floor, budgetWindow)
	p1 := &provider{name: "p1", vendor: "a", cfg: &ProviderConfig{}, health: newTestHealth("p1")}
	p2 := &provider{name: "p2", vendor: "b", cfg: &ProviderConfig{}, health: newTestHealth("p2")}
	st := &requestState{h: h, ctx: context.Background(), req: &wire.Request{Model: "m", Stream: true},
		plan: newPlan([]*provider{p1, p2}, "m"), fellBack: map[string]bool{}}
	return &policyFixture{h: h, st: st, p1: p1, p2: p2, spent: spent}
}

// ran records an attempt on p that already ran; class none means it is
// still running.
func (f *policyFixture) ran(p *provider, class wire.FailClass) *attempt {
	a := &attempt{p: p, model: "m", class: class}
	for i, c := range f.st.plan.cands {
		if c == p {
			f.st.plan.used[i] = true
		}
	}
	f.st.plan.tries[p]++
	f.st.attempts = append(f.st.attempts, a)
	if class == wire.ClassNone {
		f.st.live++
	} else {
		a.outcome = "provider_error"
	}
	return a
}

func TestPolicyAfterFailure(t *testing.T) {
	tests := []struct {
		name    string
		hedging bool
		spent   bool
		setup   func(f *policyFixture) *attempt // returns the attempt that just failed
		pending bool
		want    step
		// then is the retry decision a racing request falls back to when
		// its failover starts nothing.
		thenRetry *step
	}{
		{name: "a 400 ends the race", hedging: true,
			setup: func(f *policyFixture) *attempt { f.ran(f.p2, wire.ClassNone); return f.ran(f.p1, wire.ClassRequest) },
			want:  step{kind: stepEnd, reason: endFatal}},
		{name: "a refused client key ends the race", hedging: false,
			setup: func(f *policyFixture) *attempt { return f.ran(f.p1, wire.ClassClientKey) },
			want:  step{kind: stepEnd, reason: endFatal}},
		{name: "client abort abandons", hedging: true,
			setup: func(f *policyFixture) *attempt {
				f.ran(f.p2, wire.ClassNone)
				return f.ran(f.p1, wire.ClassClientAbort)
			},
			want: step{kind: stepEnd, reason: endAbandon}},
		{name: "total timeout abandons", hedging: false,
			setup: func(f *policyFixture) *attempt { return f.ran(f.p1, wire.ClassTotalTimeout) },
			want:  step{kind: stepEnd, reason: endAbandon}},
		{name: "a racer's 529 fails over at once, the retry only if nothing starts", hedging: true,
			setup: func(f *policyFixture) *attempt { return f.ran(f.p1, wire.ClassOverloaded) },
			want: step{kind: stepLaunch, reason: launchFailoverReason, ifNone: launchRetryReason,
				within: tierBound{max: 0, set: true}}},
		{name: "a racer with a retry pending does not plan a second", hedging: true, pending: true,
			setup: func(f *policyFixture) *attempt { return f.ran(f.p1, wire.ClassOverloaded) },
			want:  step{kind: stepLaunch, reason: launchFailoverReason, within: tierBound{max: 0, set: true}}},
		{name: "sequential 529 retries the same provider after the backoff", hedging: false,
			setup: func(f *policyFixture) *attempt { return f.ran(f.p1, wire.ClassOverloaded) },
			want:  step{kind: stepRetryLater, wait: 500 * time.Millisecond}},
		{name: "sequential refused connection fails over", hedging: false,
			setup: func(f *policyFixture) *attempt { return f.ran(f.p1, wire.ClassConnect) },
			want:  step{kind: stepLaunch, reason: launchFailoverReason}},
		{name: "sequential with a retry pending starts nothing", hedging: false, pending: true,
			setup: func(f *policyFixture) *attempt { return f.ran(f.p1, wire.ClassOverloaded) },
			want:  step{kind: stepNone}},
		{name: "retry budget spent: a 529 fails over and the refusal is counted", hedging: false, spent: true,
			setup: func(f *policyFixture) *attempt { return f.ran(f.p1, wire.ClassOverloaded) },
			want:  step{kind: stepLaunch, reason: launchFailoverReason, retryBudgetRefused: 1}},
		{name: "a 529, then a refused connection, still gets the 529's same-provider retry", hedging: true,
			setup: func(f *policyFixture) *attempt {
				f.ran(f.p1, wire.ClassOverloaded)
				return f.ran(f.p2, wire.ClassConnect)
			},
			// No candidate is left in the tier: the retry is the next attempt.
			want: step{kind: stepRetryLater, wait: 500 * time.Millisecond}},
		{name: "a silent route is not retried, nor anything else", hedging: true,
			setup: func(f *policyFixture) *attempt {
				a := f.ran(f.p1, wire.ClassReset)
				a.noRetry = true
				return a
			},
			want:      step{kind: stepLaunch, reason: launchFailoverReason, ifNone: launchRetryReason},
			thenRetry: &step{kind: stepNone}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newPolicyFixture(t, tt.spent)
			a := tt.setup(f)
			var pending *attempt
			if tt.pending {
				pending = f.st.prepare(f.p1, "m", launchRetryReason, false)
			}
			got := afterFailure(f.st, a, tt.hedging, pending)
			checkStep(t, "afterFailure", got, tt.want)
			if tt.thenRetry != nil {
				checkStep(t, "retryStep", retryStep(f.st, got.attempt, true), *tt.thenRetry)
			}
		})
	}
}

// TestPolicyRetriesTheEarlierRacer pins which attempt the retry goes to:
// the 529's provider, not the one that refused the connection.
func TestPolicyRetriesTheEarlierRacer(t *testing.T) {
	f := newPolicyFixture(t, false)
	overloaded := f.ran(f.p1, wire.ClassOverloaded)
	refused := f.ran(f.p2, wire.ClassConnect)
	s := retryStep(f.st, refused, true)
	if s.kind != stepRetryLater || s.attempt != overloaded {
		t.Fatalf("retryStep = %+v, want a retry of p1's 529", s)
	}
	// A provider whose attempt is still running speaks for itself: no retry.
	f = newPolicyFixture(t, false)
	f.ran(f.p1, wire.ClassOverloaded)
	f.ran(f.p1, wire.ClassNone) // p1 runs again
	refused = f.ran(f.p2, wire.ClassConnect)
	if s := retryStep(f.st, refused, true); s.kind != stepNone {
		t.Fatalf("retryStep = %+v, want none while p1 runs", s)
	}
}

func TestPolicyHedgeTimer(t *testing.T) {
	tests := []struct {
		name  string
		spent bool
		setup func(f *policyFixture)
		want  step
	}{
		{name: "room and budget: hedge",
			setup: func(f *policyFixture) { f.ran(f.p1, wire.ClassNone) },
			want:  step{kind: stepLaunch, reason: launchHedgeReason}},
		{name: "hedge timer with budget spent records hedge_budget_exhausted and launches nothing", spent: true,
			setup: func(f *policyFixture) { f.ran(f.p1, wire.ClassNone) },
			want:  step{kind: stepRecord, reason: "hedge_budget_exhausted"}},
		{name: "max_attempts racing: nothing",
			setup: func(f *policyFixture) { f.ran(f.p1, wire.ClassNone); f.ran(f.p2, wire.ClassNone) },
			want:  step{kind: stepNone}},
		{name: "no candidate left: nothing",
			setup: func(f *policyFixture) { f.ran(f.p2, wire.ClassConnect); f.ran(f.p1, wire.ClassNone) },
			want:  step{kind: stepNone}},
		{name: "nothing running to race: nothing",
			setup: func(f *policyFixture) {},
			want:  step{kind: stepNone}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newPolicyFixture(t, tt.spent)
			tt.setup(f)
			checkStep(t, "onHedgeTimer", onHedgeTimer(f.st, clock()), tt.want)
		})
	}
}

func TestPolicyRetryTimer(t *testing.T) {
	tests := []struct {
		name    string
		spent   bool
		hedging bool
		setup   func(f *policyFixture)
		want    step
	}{
		{name: "wait over: the retry, failing over if it cannot start",
			want: step{kind: stepLaunch, reason: launchRetryReason, ifNone: launchFailoverReason}},
		{name: "retry timer: breaker refuses → failover",
			setup: func(f *policyFixture) { f.p1.health.OpenAtLeast(clock(), clock().Add(time.Minute)) },
			want:  step{kind: stepLaunch, reason: launchFailoverReason}},
		{name: "retry budget spent meanwhile → failover", spent: true,
			want: step{kind: stepLaunch, reason: launchFailoverReason}},
		{name: "busy provider → failover",
			setup: func(f *policyFixture) {
				f.p1.cfg.MaxInFlight = 1
				f.p1.health.BeginAttempt()
			},
			want: step{kind: stepLaunch, reason: launchFailoverReason}},
		{name: "refused while a sequential attempt runs: nothing",
			setup: func(f *policyFixture) {
				f.p1.health.OpenAtLeast(clock(), clock().Add(time.Minute))
				f.ran(f.p2, wire.ClassNone)
			},
			want: step{kind: stepNone}},
		{name: "refused while racing: failover", hedging: true,
			setup: func(f *policyFixture) {
				f.p1.health.OpenAtLeast(clock(), clock().Add(time.Minute))
				f.ran(f.p2, wire.ClassNone)
			},
			want: step{kind: stepLaunch, reason: launchFailoverReason}},
		{name: "client gone meanwhile: abandon",
			setup: func(f *policyFixture) {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				f.st.ctx = ctx
			},
			want: step{kind: stepEnd, reason: endAbandon}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newPolicyFixture(t, tt.spent)
			f.ran(f.p1, wire.ClassOverloaded)
			if tt.setup != nil {
				tt.setup(f)
			}
			pending := f.st.prepare(f.p1, "m", launchRetryReason, false)
			checkStep(t, "onRetryTimer", onRetryTimer(f.st, pending, tt.hedging, clock()), tt.want)
		})
	}
}

// TestPolicyFailoverPastBudget pins the budget rule: with the retry budget
// spent, one failover still goes (to a healthy provider), then none.
func TestPolicyFailoverPastBudget(t *testing.T) {
	f := newPolicyFixture(t, true)
	f.ran(f.p1, wire.ClassOverloaded)
	if got := failoverRouteAt(f.st, clock()); got != failoverPastBudget {
		t.Fatalf("budget spent: route %d, want the one failover past the budget", got)
	}
	f.st.budgetFailoverUsed = true
	if got := failoverRouteAt(f.st, clock()); got != failoverSpent {
		t.Fatalf("budget and past-budget failover spent: route %d, want spent", got)
	}
	f = newPolicyFixture(t, false)
	f.ran(f.p1, wire.ClassOverloaded)
	if got := failoverRouteAt(f.st, clock()); got != failoverBudgeted {
		t.Fatalf("budget room: route %d, want budgeted", got)
	}
	for range f.h.Retry.Attempts - 1 {
		f.ran(f.p2, wire.ClassConnect)
	}
	if got := failoverRouteAt(f.st, clock()); got != failoverNone {
		t.Fatalf("no attempts left: route %d, want none", got)
	}
	if _, extras := f.h.retryBudget.Snapshot(clock()); extras != 0 {
		t.Fatalf("a decision took %d extras from the budget", extras)
	}
}

func checkStep(t *testing.T, what string, got, want step) {
	t.Helper()
	if got.kind != want.kind || got.reason != want.reason || got.ifNone != want.ifNone ||
		got.wait != want.wait || got.retryBudgetRefused != want.retryBudgetRefused || got.within != want.within {
		t.Fatalf("%s = {kind %d reason %q ifNone %q wait %v refused %d within %+v}, want {kind %d reason %q ifNone %q wait %v refused %d within %+v}",
			what, got.kind, got.reason, got.ifNone, got.wait, got.retryBudgetRefused, got.within,
			want.kind, want.reason, want.ifNone, want.wait, want.retryBudgetRefused, want.within)
	}
}

// TestPolicyHedgeKeepsTierOnTransientError pins issue 21 item 11 in the
// decisions: in a race, a failure keeps the next attempt within the best
// priority tier that still has a candidate or an allowed same-provider
// retry. p1 is the primary (priority 0), p2 a fallback (priority 1).
func TestPolicyHedgeKeepsTierOnTransientError(t *testing.T) {
	ra := func(a *attempt, d time.Duration) *attempt { a.retryAfter, a.hasRA = d, true; return a }
	tests := []struct {
		name  string
		spent bool
		setup func(f *policyFixture) (failed, pending *attempt)
		want  step
	}{
		{name: "a 500 waits for the primary's retry, not the lower tier",
			setup: func(f *policyFixture) (*attempt, *attempt) { return f.ran(f.p1, wire.ClassStatus5xx), nil },
			want:  step{kind: stepRetryLater, wait: 500 * time.Millisecond}},
		{name: "a 429 with Retry-After 2s waits 2s for the primary",
			setup: func(f *policyFixture) (*attempt, *attempt) {
				return ra(f.ran(f.p1, wire.ClassRateLimited), 2*time.Second), nil
			},
			want: step{kind: stepRetryLater, wait: 2 * time.Second}},
		{name: "a 429 with a Retry-After past retry_after_max reaches the lower tier at once",
			setup: func(f *policyFixture) (*attempt, *attempt) {
				return ra(f.ran(f.p1, wire.ClassRateLimited), time.Minute), nil
			},
			want: step{kind: stepLaunch, reason: launchFailoverReason, ifNone: launchRetryReason}},
		{name: "a 429 without Retry-After reaches the lower tier at once",
			setup: func(f *policyFixture) (*attempt, *attempt) { return f.ran(f.p1, wire.ClassRateLimited), nil },
			want:  step{kind: stepLaunch, reason: launchFailoverReason, ifNone: launchRetryReason}},
		{name: "same_provider used up: the lower tier at once",
			setup: func(f *policyFixture) (*attempt, *attempt) {
				f.ran(f.p1, wire.ClassStatus5xx)
				return f.ran(f.p1, wire.ClassStatus5xx), nil
			},
			want: step{kind: stepLaunch, reason: launchFailoverReason, ifNone: launchRetryReason}},
		{name: "retry budget spent: the lower tier at once", spent: true,
			setup: func(f *policyFixture) (*attempt, *attempt) { return f.ran(f.p1, wire.ClassStatus5xx), nil },
			want:  step{kind: stepLaunch, reason: launchFailoverReason, ifNone: launchRetryReason}},
		{name: "the breaker would refuse the retry: the lower tier at once",
			setup: func(f *policyFixture) (*attempt, *attempt) {
				f.p1.health.OpenAtLeast(clock(), clock().Add(time.Minute))
				return f.ran(f.p1, wire.ClassStatus5xx), nil
			},
			want: step{kind: stepLaunch, reason: launchFailoverReason, ifNone: launchRetryReason}},
		{name: "a candidate of the same tier starts at once, bounded to the tier",
			setup: func(f *policyFixture) (*attempt, *attempt) {
				f.addProvider("p3", 0)
				return f.ran(f.p1, wire.ClassStatus5xx), nil
			},
			want: step{kind: stepLaunch, reason: launchFailoverReason, ifNone: launchRetryReason,
				within: tierBound{max: 0, set: true}}},
		{name: "the hedge on the lower tier fails while the primary's retry waits: nothing starts",
			setup: func(f *policyFixture) (*attempt, *attempt) {
				f.ran(f.p1, wire.ClassStatus5xx)
				pending := f.st.prepare(f.p1, "m", launchRetryReason, false)
				f.addProvider("p3", 2)
				return f.ran(f.p2, wire.ClassStatus5xx), pending
			},
			want: step{kind: stepNone}},
		{name: "the primary fails while its hedge on the lower tier runs: the primary's retry",
			setup: func(f *policyFixture) (*attempt, *attempt) {
				a := f.ran(f.p1, wire.ClassStatus5xx)
				f.ran(f.p2, wire.ClassNone)
				return a, nil
			},
			want: step{kind: stepRetryLater, wait: 500 * time.Millisecond}},
		{name: "the lower tier's racer fails: the primary's allowed retry beats its own",
			setup: func(f *policyFixture) (*attempt, *attempt) {
				ra(f.ran(f.p1, wire.ClassRateLimited), 2*time.Second)
				return f.ran(f.p2, wire.ClassStatus5xx), nil
			},
			want: step{kind: stepRetryLater, wait: 2 * time.Second}},
		{name: "only provider of the model, fallback_model configured: the retry first",
			setup: func(f *policyFixture) (*attempt, *attempt) {
				f.h.Retry.FallbackModels = []ModelRule{{From: "m", To: "other"}}
				f.st.plan = newPlan([]*provider{f.p1}, "m")
				return f.ran(f.p1, wire.ClassOverloaded), nil
			},
			want: step{kind: stepRetryLater, wait: 500 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newPolicyFixture(t, tt.spent)
			f.p2.cfg.Priority = 1
			failed, pending := tt.setup(f)
			got := afterFailure(f.st, failed, true, pending)
			checkStep(t, "afterFailure", got, tt.want)
			if got.kind == stepRetryLater && got.attempt.p != f.p1 {
				t.Fatalf("retry goes to %s, want the primary p1", got.attempt.p.name)
			}
			// Hedging off takes the same retry, or fails over.
			// (A race starts a same-tier candidate at once instead.)
			if pending == nil && f.st.live == 0 && failed.p == f.p1 && !got.within.set {
				seq := afterFailure(f.st, failed, false, nil)
				if (seq.kind == stepRetryLater) != (got.kind == stepRetryLater) || seq.wait != got.wait {
					t.Fatalf("hedge off decides %+v, hedging %+v", seq, got)
				}
			}
		})
	}
	// The hedge timer still reaches the lower tier: slowness is not a failure.
	f := newPolicyFixture(t, false)
	f.p2.cfg.Priority = 1
	f.ran(f.p1, wire.ClassNone)
	checkStep(t, "onHedgeTimer", onHedgeTimer(f.st, clock()), step{kind: stepLaunch, reason: launchHedgeReason})
}

// addProvider adds a candidate of the given priority to the plan, in
// priority order.
func (f *policyFixture) addProvider(name string, priority int) *provider {
	p := &provider{name: name, vendor: name, cfg: &ProviderConfig{Priority: priority}, health: newTestHealth(name)}
	cands := append([]*provider{}, f.st.plan.cands...)
	used := append([]bool{}, f.st.plan.used...)
	i := len(cands)
	for i > 0 && cands[i-1].cfg.Priority > priority {
		i--
	}
	cands = append(cands[:i], append([]*provider{p}, cands[i:]...)...)
	used = append(used[:i], append([]bool{false}, used[i:]...)...)
	f.st.plan.cands, f.st.plan.used = cands, used
	return p
}
