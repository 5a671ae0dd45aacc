package llmhedge

import (
	"context"
	"testing"
	"time"
)

// policyFixture is a request in the middle of its race, built by hand: no
// goroutine runs, the decisions only read it.
type policyFixture struct {
	h     *Handler
	st    *requestState
	p1    *provider
	p2    *provider
	spent bool // both budgets spent
}

func newPolicyFixture(t *testing.T, spent bool) *policyFixture {
	t.Helper()
	h := &Handler{}
	h.setDefaults()
	h.rand = func() float64 { return 0 }
	percent, floor := 20.0, 3.0
	if spent {
		percent, floor = 0, 0
	}
	h.retryBudget = newBudget(percent, floor, budgetWindow)
	h.hedgeBudget = newBudget(percent, floor, budgetWindow)
	p1 := &provider{name: "p1", vendor: "a", cfg: &Provider{}, health: newTestHealth("p1")}
	p2 := &provider{name: "p2", vendor: "b", cfg: &Provider{}, health: newTestHealth("p2")}
	st := &requestState{h: h, ctx: context.Background(), req: &llmRequest{model: "m", stream: true},
		plan: newPlan([]*provider{p1, p2}, "m"), fellBack: map[string]bool{}}
	return &policyFixture{h: h, st: st, p1: p1, p2: p2, spent: spent}
}

// ran records an attempt on p that already ran; class none means it is
// still running.
func (f *policyFixture) ran(p *provider, class failClass) *attempt {
	a := &attempt{p: p, model: "m", class: class}
	for i, c := range f.st.plan.cands {
		if c == p {
			f.st.plan.used[i] = true
		}
	}
	f.st.plan.tries[p]++
	f.st.attempts = append(f.st.attempts, a)
	if class == classNone {
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
			setup: func(f *policyFixture) *attempt { f.ran(f.p2, classNone); return f.ran(f.p1, classRequest) },
			want:  step{kind: stepEnd, reason: endFatal}},
		{name: "a refused client key ends the race", hedging: false,
			setup: func(f *policyFixture) *attempt { return f.ran(f.p1, classClientKey) },
			want:  step{kind: stepEnd, reason: endFatal}},
		{name: "client abort abandons", hedging: true,
			setup: func(f *policyFixture) *attempt { f.ran(f.p2, classNone); return f.ran(f.p1, classClientAbort) },
			want:  step{kind: stepEnd, reason: endAbandon}},
		{name: "total timeout abandons", hedging: false,
			setup: func(f *policyFixture) *attempt { return f.ran(f.p1, classTotalTimeout) },
			want:  step{kind: stepEnd, reason: endAbandon}},
		{name: "a racer's 529 fails over at once, the retry only if nothing starts", hedging: true,
			setup: func(f *policyFixture) *attempt { return f.ran(f.p1, classOverloaded) },
			want:  step{kind: stepLaunch, reason: launchFailoverReason, ifNone: launchRetryReason}},
		{name: "a racer with a retry pending does not plan a second", hedging: true, pending: true,
			setup: func(f *policyFixture) *attempt { return f.ran(f.p1, classOverloaded) },
			want:  step{kind: stepLaunch, reason: launchFailoverReason}},
		{name: "sequential 529 retries the same provider after the backoff", hedging: false,
			setup: func(f *policyFixture) *attempt { return f.ran(f.p1, classOverloaded) },
			want:  step{kind: stepRetryLater, wait: 500 * time.Millisecond}},
		{name: "sequential refused connection fails over", hedging: false,
			setup: func(f *policyFixture) *attempt { return f.ran(f.p1, classConnect) },
			want:  step{kind: stepLaunch, reason: launchFailoverReason}},
		{name: "sequential with a retry pending starts nothing", hedging: false, pending: true,
			setup: func(f *policyFixture) *attempt { return f.ran(f.p1, classOverloaded) },
			want:  step{kind: stepNone}},
		{name: "retry budget spent: a 529 fails over and the refusal is counted", hedging: false, spent: true,
			setup: func(f *policyFixture) *attempt { return f.ran(f.p1, classOverloaded) },
			want:  step{kind: stepLaunch, reason: launchFailoverReason, retryBudgetRefused: 1}},
		{name: "a 529, then a refused connection, still gets the 529's same-provider retry", hedging: true,
			setup: func(f *policyFixture) *attempt {
				f.ran(f.p1, classOverloaded)
				return f.ran(f.p2, classConnect)
			},
			want:      step{kind: stepLaunch, reason: launchFailoverReason, ifNone: launchRetryReason},
			thenRetry: &step{kind: stepRetryLater, wait: 500 * time.Millisecond}},
		{name: "a silent route is not retried, nor anything else", hedging: true,
			setup: func(f *policyFixture) *attempt {
				a := f.ran(f.p1, classReset)
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
			got := f.h.afterFailure(f.st, a, tt.hedging, tt.pending)
			checkStep(t, "afterFailure", got, tt.want)
			if tt.thenRetry != nil {
				checkStep(t, "retryStep", f.h.retryStep(f.st, got.attempt, true), *tt.thenRetry)
			}
		})
	}
}

// TestPolicyRetriesTheEarlierRacer pins which attempt the retry goes to:
// the 529's provider, not the one that refused the connection.
func TestPolicyRetriesTheEarlierRacer(t *testing.T) {
	f := newPolicyFixture(t, false)
	overloaded := f.ran(f.p1, classOverloaded)
	refused := f.ran(f.p2, classConnect)
	s := f.h.retryStep(f.st, refused, true)
	if s.kind != stepRetryLater || s.attempt != overloaded {
		t.Fatalf("retryStep = %+v, want a retry of p1's 529", s)
	}
	// A provider whose attempt is still running speaks for itself: no retry.
	f = newPolicyFixture(t, false)
	f.ran(f.p1, classOverloaded)
	f.ran(f.p1, classNone) // p1 runs again
	refused = f.ran(f.p2, classConnect)
	if s := f.h.retryStep(f.st, refused, true); s.kind != stepNone {
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
			setup: func(f *policyFixture) { f.ran(f.p1, classNone) },
			want:  step{kind: stepLaunch, reason: launchHedgeReason}},
		{name: "hedge timer with budget spent records hedge_budget_exhausted and launches nothing", spent: true,
			setup: func(f *policyFixture) { f.ran(f.p1, classNone) },
			want:  step{kind: stepRecord, reason: "hedge_budget_exhausted"}},
		{name: "max_attempts racing: nothing",
			setup: func(f *policyFixture) { f.ran(f.p1, classNone); f.ran(f.p2, classNone) },
			want:  step{kind: stepNone}},
		{name: "no candidate left: nothing",
			setup: func(f *policyFixture) { f.ran(f.p2, classConnect); f.ran(f.p1, classNone) },
			want:  step{kind: stepNone}},
		{name: "nothing running to race: nothing",
			setup: func(f *policyFixture) {},
			want:  step{kind: stepNone}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newPolicyFixture(t, tt.spent)
			tt.setup(f)
			checkStep(t, "onHedgeTimer", f.h.onHedgeTimer(f.st, clock()), tt.want)
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
			setup: func(f *policyFixture) { f.p1.health.openAtLeast(clock(), clock().Add(time.Minute)) },
			want:  step{kind: stepLaunch, reason: launchFailoverReason}},
		{name: "retry budget spent meanwhile → failover", spent: true,
			want: step{kind: stepLaunch, reason: launchFailoverReason}},
		{name: "busy provider → failover",
			setup: func(f *policyFixture) {
				f.p1.cfg.MaxInFlight = 1
				f.p1.health.beginAttempt()
			},
			want: step{kind: stepLaunch, reason: launchFailoverReason}},
		{name: "refused while a sequential attempt runs: nothing",
			setup: func(f *policyFixture) {
				f.p1.health.openAtLeast(clock(), clock().Add(time.Minute))
				f.ran(f.p2, classNone)
			},
			want: step{kind: stepNone}},
		{name: "refused while racing: failover", hedging: true,
			setup: func(f *policyFixture) {
				f.p1.health.openAtLeast(clock(), clock().Add(time.Minute))
				f.ran(f.p2, classNone)
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
			f.ran(f.p1, classOverloaded)
			if tt.setup != nil {
				tt.setup(f)
			}
			pending := f.st.prepare(f.p1, "m", launchRetryReason, false)
			checkStep(t, "onRetryTimer", f.h.onRetryTimer(f.st, pending, tt.hedging, clock()), tt.want)
		})
	}
}

// TestPolicyFailoverPastBudget pins the budget rule: with the retry budget
// spent, one failover still goes (to a healthy provider), then none.
func TestPolicyFailoverPastBudget(t *testing.T) {
	f := newPolicyFixture(t, true)
	f.ran(f.p1, classOverloaded)
	if got := f.h.failoverRouteAt(f.st, clock()); got != failoverPastBudget {
		t.Fatalf("budget spent: route %d, want the one failover past the budget", got)
	}
	f.st.budgetFailoverUsed = true
	if got := f.h.failoverRouteAt(f.st, clock()); got != failoverSpent {
		t.Fatalf("budget and past-budget failover spent: route %d, want spent", got)
	}
	f = newPolicyFixture(t, false)
	f.ran(f.p1, classOverloaded)
	if got := f.h.failoverRouteAt(f.st, clock()); got != failoverBudgeted {
		t.Fatalf("budget room: route %d, want budgeted", got)
	}
	for range f.h.Retry.Attempts - 1 {
		f.ran(f.p2, classConnect)
	}
	if got := f.h.failoverRouteAt(f.st, clock()); got != failoverNone {
		t.Fatalf("no attempts left: route %d, want none", got)
	}
	if _, extras := f.h.retryBudget.snapshot(clock()); extras != 0 {
		t.Fatalf("a decision took %d extras from the budget", extras)
	}
}

func checkStep(t *testing.T, what string, got, want step) {
	t.Helper()
	if got.kind != want.kind || got.reason != want.reason || got.ifNone != want.ifNone ||
		got.wait != want.wait || got.retryBudgetRefused != want.retryBudgetRefused {
		t.Fatalf("%s = {kind %d reason %q ifNone %q wait %v refused %d}, want {kind %d reason %q ifNone %q wait %v refused %d}",
			what, got.kind, got.reason, got.ifNone, got.wait, got.retryBudgetRefused,
			want.kind, want.reason, want.ifNone, want.wait, want.retryBudgetRefused)
	}
}
