package engine

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/llmhedge/caddy-llm-hedge/internal/health"
)

// healthT0 is the start of every scripted timeline; steps give offsets from it.
var healthT0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func newTestHealth(name string) *health.Provider {
	return &health.Provider{Name: name, BaseURL: "https://" + name + ".test/v1"}
}

// breakerStep is one event on a provider's timeline and what must hold after it.
type breakerStep struct {
	at   time.Duration // since healthT0
	do   string        // admit, force, fail, succeed, commit, release
	note string

	// fail
	class      string
	status     int
	retryAfter time.Duration
	// admit and fail
	model string
	// fail, succeed, commit, release: report as the probe
	probe bool

	// admit and force
	wantOK, wantProbe bool

	wantState health.State
	// wantUntil is openUntil as an offset from healthT0; zero means closed.
	wantUntil time.Duration
}

func fail5xx(at time.Duration) breakerStep {
	return breakerStep{at: at, do: "fail", class: "status_5xx", status: 500}
}

func TestBreakerTransitions(t *testing.T) {
	defaults := health.Cooldown{Failures: 3, Duration: 30 * time.Second, Max: 30 * time.Second}
	growing := health.Cooldown{Failures: 1, Duration: 10 * time.Second, Max: 35 * time.Second}
	sec := time.Second

	// with sets the expectations of a step built by fail5xx.
	with := func(s breakerStep, state health.State, until time.Duration) breakerStep {
		s.wantState, s.wantUntil = state, until
		return s
	}

	tests := []struct {
		name  string
		cfg   health.Cooldown
		steps []breakerStep
	}{
		{
			name: "three consecutive failures open it for duration",
			cfg:  defaults,
			steps: []breakerStep{
				with(fail5xx(0), health.StateClosed, 0),
				with(fail5xx(1*sec), health.StateClosed, 0),
				with(fail5xx(2*sec), health.StateOpen, 32*sec),
				{at: 10 * sec, do: "admit", wantOK: false, wantState: health.StateOpen, wantUntil: 32 * sec},
				{at: 31 * sec, do: "admit", wantOK: false, wantState: health.StateOpen, wantUntil: 32 * sec},
			},
		},
		{
			name: "a success resets the consecutive count",
			cfg:  defaults,
			steps: []breakerStep{
				with(fail5xx(0), health.StateClosed, 0),
				with(fail5xx(1*sec), health.StateClosed, 0),
				{at: 2 * sec, do: "succeed", wantState: health.StateClosed},
				with(fail5xx(3*sec), health.StateClosed, 0),
				with(fail5xx(4*sec), health.StateClosed, 0),
				{at: 5 * sec, do: "admit", wantOK: true, wantState: health.StateClosed},
			},
		},
		{
			name: "after duration exactly one probe goes, and its success closes",
			cfg:  defaults,
			steps: []breakerStep{
				with(fail5xx(0), health.StateClosed, 0), with(fail5xx(0), health.StateClosed, 0),
				with(fail5xx(0), health.StateOpen, 30*sec),
				{at: 30 * sec, do: "admit", wantOK: true, wantProbe: true, wantState: health.StateHalfOpen, wantUntil: 30 * sec},
				{at: 31 * sec, do: "admit", note: "others still skip it", wantOK: false, wantState: health.StateHalfOpen, wantUntil: 30 * sec},
				{at: 32 * sec, do: "succeed", probe: true, wantState: health.StateClosed},
				{at: 33 * sec, do: "admit", wantOK: true, wantState: health.StateClosed},
			},
		},
		{
			name: "failed probes re-open it, doubling up to max",
			cfg:  growing,
			steps: []breakerStep{
				with(fail5xx(0), health.StateOpen, 10*sec),
				{at: 10 * sec, do: "admit", wantOK: true, wantProbe: true, wantState: health.StateHalfOpen, wantUntil: 10 * sec},
				{at: 11 * sec, do: "fail", class: "connect", probe: true, wantState: health.StateOpen, wantUntil: 31 * sec},
				{at: 31 * sec, do: "admit", wantOK: true, wantProbe: true, wantState: health.StateHalfOpen, wantUntil: 31 * sec},
				{at: 31 * sec, do: "fail", class: "first_byte_timeout", probe: true, note: "40s capped at 35s", wantState: health.StateOpen, wantUntil: 66 * sec},
				{at: 66 * sec, do: "admit", wantOK: true, wantProbe: true, wantState: health.StateHalfOpen, wantUntil: 66 * sec},
				{at: 66 * sec, do: "fail", class: "fake200", probe: true, wantState: health.StateOpen, wantUntil: 101 * sec},
				{at: 101 * sec, do: "admit", wantOK: true, wantProbe: true, wantState: health.StateHalfOpen, wantUntil: 101 * sec},
				{at: 102 * sec, do: "succeed", probe: true, wantState: health.StateClosed},
				{at: 103 * sec, do: "fail", class: "connect", note: "growth starts over", wantState: health.StateOpen, wantUntil: 113 * sec},
			},
		},
		{
			name: "without max above duration a failed probe re-opens for duration",
			cfg:  health.Cooldown{Failures: 1, Duration: 10 * time.Second},
			steps: []breakerStep{
				with(fail5xx(0), health.StateOpen, 10*sec),
				{at: 10 * sec, do: "admit", wantOK: true, wantProbe: true, wantState: health.StateHalfOpen, wantUntil: 10 * sec},
				{at: 10 * sec, do: "fail", class: "status_5xx", status: 502, probe: true, wantState: health.StateOpen, wantUntil: 20 * sec},
			},
		},
		{
			name: "429 with Retry-After opens it at once for that long",
			cfg:  defaults,
			steps: []breakerStep{
				{at: 0, do: "fail", class: "rate_limited", status: 429, retryAfter: 30 * sec, wantState: health.StateOpen, wantUntil: 30 * sec},
				{at: 29 * sec, do: "admit", wantOK: false, wantState: health.StateOpen, wantUntil: 30 * sec},
				{at: 30 * sec, do: "admit", wantOK: true, wantProbe: true, wantState: health.StateHalfOpen, wantUntil: 30 * sec},
			},
		},
		{
			name: "503 and 529 with Retry-After open it too",
			cfg:  defaults,
			steps: []breakerStep{
				{at: 0, do: "fail", class: "overloaded", status: 503, retryAfter: 20 * sec, wantState: health.StateOpen, wantUntil: 20 * sec},
				{at: 5 * sec, do: "fail", class: "overloaded", status: 529, retryAfter: 40 * sec, note: "a longer one extends", wantState: health.StateOpen, wantUntil: 45 * sec},
			},
		},
		{
			name: "a shorter Retry-After never shortens the open period",
			cfg:  defaults,
			steps: []breakerStep{
				{at: 0, do: "fail", class: "rate_limited", status: 429, retryAfter: 60 * sec, wantState: health.StateOpen, wantUntil: 60 * sec},
				{at: 5 * sec, do: "fail", class: "rate_limited", status: 429, retryAfter: 10 * sec, wantState: health.StateOpen, wantUntil: 60 * sec},
			},
		},
		{
			name: "Retry-After is bounded by 5 minutes by default",
			cfg:  defaults,
			steps: []breakerStep{
				{at: 0, do: "fail", class: "rate_limited", status: 429, retryAfter: time.Hour, wantState: health.StateOpen, wantUntil: 5 * time.Minute},
			},
		},
		{
			name: "Retry-After is bounded by max when max grows past duration",
			cfg:  health.Cooldown{Failures: 3, Duration: 30 * time.Second, Max: 2 * time.Minute},
			steps: []breakerStep{
				{at: 0, do: "fail", class: "rate_limited", status: 429, retryAfter: time.Hour, wantState: health.StateOpen, wantUntil: 2 * time.Minute},
			},
		},
		{
			name: "429 without Retry-After is an ordinary failure",
			cfg:  defaults,
			steps: []breakerStep{
				{at: 0, do: "fail", class: "rate_limited", status: 429, wantState: health.StateClosed},
				{at: 0, do: "fail", class: "rate_limited", status: 429, wantState: health.StateClosed},
				{at: 0, do: "fail", class: "rate_limited", status: 429, wantState: health.StateOpen, wantUntil: 30 * sec},
			},
		},
		{
			name: "Retry-After on a 500 is an ordinary failure",
			cfg:  defaults,
			steps: []breakerStep{
				{at: 0, do: "fail", class: "status_5xx", status: 500, retryAfter: time.Minute, wantState: health.StateClosed},
			},
		},
		{
			name: "attempts that end without a verdict never open it",
			cfg:  defaults,
			steps: []breakerStep{
				{at: 0, do: "admit", wantOK: true, wantState: health.StateClosed},
				{at: 0, do: "release", wantState: health.StateClosed},
				{at: 0, do: "release", wantState: health.StateClosed},
				{at: 0, do: "release", wantState: health.StateClosed},
				{at: 0, do: "release", wantState: health.StateClosed},
				{at: 1 * sec, do: "admit", wantOK: true, wantState: health.StateClosed},
			},
		},
		{
			name: "a released probe frees the slot for the next request",
			cfg:  defaults,
			steps: []breakerStep{
				with(fail5xx(0), health.StateClosed, 0), with(fail5xx(0), health.StateClosed, 0), with(fail5xx(0), health.StateOpen, 30*sec),
				{at: 30 * sec, do: "admit", wantOK: true, wantProbe: true, wantState: health.StateHalfOpen, wantUntil: 30 * sec},
				{at: 31 * sec, do: "release", probe: true, note: "client aborted the probe", wantState: health.StateHalfOpen, wantUntil: 30 * sec},
				{at: 32 * sec, do: "admit", wantOK: true, wantProbe: true, wantState: health.StateHalfOpen, wantUntil: 30 * sec},
			},
		},
		{
			name: "model_not_found cools only that model on that provider",
			cfg:  defaults,
			steps: []breakerStep{
				{at: 0, do: "fail", class: "model_not_found", status: 404, model: "m-gone", wantState: health.StateClosed},
				{at: 0, do: "fail", class: "model_not_found", status: 404, model: "m-gone", wantState: health.StateClosed},
				{at: 0, do: "fail", class: "model_not_found", status: 404, model: "m-gone", wantState: health.StateClosed},
				{at: 0, do: "fail", class: "model_not_found", status: 404, model: "m-gone", wantState: health.StateClosed},
				{at: 1 * sec, do: "admit", model: "m-gone", wantOK: false, wantState: health.StateClosed},
				{at: 1 * sec, do: "admit", model: "m-here", wantOK: true, wantState: health.StateClosed},
				{at: 29 * sec, do: "admit", model: "m-gone", wantOK: false, wantState: health.StateClosed},
				{at: 30 * sec, do: "admit", model: "m-gone", wantOK: true, wantState: health.StateClosed},
			},
		},
		{
			name: "model_not_found on the probe frees the slot without a verdict",
			cfg:  defaults,
			steps: []breakerStep{
				with(fail5xx(0), health.StateClosed, 0), with(fail5xx(0), health.StateClosed, 0), with(fail5xx(0), health.StateOpen, 30*sec),
				{at: 30 * sec, do: "admit", model: "m-gone", wantOK: true, wantProbe: true, wantState: health.StateHalfOpen, wantUntil: 30 * sec},
				{at: 31 * sec, do: "fail", class: "model_not_found", status: 404, model: "m-gone", probe: true, wantState: health.StateHalfOpen, wantUntil: 30 * sec},
				{at: 31 * sec, do: "admit", model: "m-gone", wantOK: false, wantState: health.StateHalfOpen, wantUntil: 30 * sec},
				{at: 31 * sec, do: "admit", model: "m-here", wantOK: true, wantProbe: true, wantState: health.StateHalfOpen, wantUntil: 30 * sec},
			},
		},
		{
			name: "forceProbe takes the slot while open, only once",
			cfg:  defaults,
			steps: []breakerStep{
				with(fail5xx(0), health.StateClosed, 0), with(fail5xx(0), health.StateClosed, 0), with(fail5xx(0), health.StateOpen, 30*sec),
				{at: 5 * sec, do: "force", wantOK: true, wantState: health.StateOpen, wantUntil: 30 * sec},
				{at: 6 * sec, do: "force", wantOK: false, wantState: health.StateOpen, wantUntil: 30 * sec},
				{at: 30 * sec, do: "admit", note: "the forced probe holds the slot", wantOK: false, wantState: health.StateHalfOpen, wantUntil: 30 * sec},
				{at: 31 * sec, do: "succeed", probe: true, wantState: health.StateClosed},
			},
		},
		{
			name: "a probe slot held past the open period is taken over",
			cfg:  defaults,
			steps: []breakerStep{
				with(fail5xx(0), health.StateClosed, 0), with(fail5xx(0), health.StateClosed, 0), with(fail5xx(0), health.StateOpen, 30*sec),
				{at: 30 * sec, do: "admit", wantOK: true, wantProbe: true, wantState: health.StateHalfOpen, wantUntil: 30 * sec},
				{at: 59 * sec, do: "admit", wantOK: false, wantState: health.StateHalfOpen, wantUntil: 30 * sec},
				{at: 60 * sec, do: "admit", wantOK: true, wantProbe: true, wantState: health.StateHalfOpen, wantUntil: 30 * sec},
			},
		},
		{
			name: "late verdicts of attempts started before the open neither extend nor close it",
			cfg:  defaults,
			steps: []breakerStep{
				with(fail5xx(0), health.StateClosed, 0), with(fail5xx(0), health.StateClosed, 0), with(fail5xx(0), health.StateOpen, 30*sec),
				with(fail5xx(10*sec), health.StateOpen, 30*sec),
				{at: 11 * sec, do: "succeed", wantState: health.StateOpen, wantUntil: 30 * sec},
			},
		},
		{
			name: "streams that commit then break keep counting toward the open",
			cfg:  defaults,
			steps: []breakerStep{
				{at: 0, do: "commit", wantState: health.StateClosed},
				with(fail5xx(1*sec), health.StateClosed, 0),
				{at: 2 * sec, do: "commit", wantState: health.StateClosed},
				with(fail5xx(3*sec), health.StateClosed, 0),
				{at: 4 * sec, do: "commit", wantState: health.StateClosed},
				with(fail5xx(5*sec), health.StateOpen, 35*sec),
			},
		},
		{
			name: "a probe's stream closes it at commit; a break after that re-opens it",
			cfg:  defaults,
			steps: []breakerStep{
				with(fail5xx(0), health.StateClosed, 0), with(fail5xx(0), health.StateClosed, 0), with(fail5xx(0), health.StateOpen, 30*sec),
				{at: 30 * sec, do: "admit", wantOK: true, wantProbe: true, wantState: health.StateHalfOpen, wantUntil: 30 * sec},
				{at: 31 * sec, do: "commit", probe: true, wantState: health.StateClosed},
				{at: 32 * sec, do: "admit", note: "traffic returns while the probe streams", wantOK: true, wantState: health.StateClosed},
				with(fail5xx(40*sec), health.StateOpen, 70*sec),
			},
		},
		{
			name: "a probe's stream that ends well starts the count over",
			cfg:  defaults,
			steps: []breakerStep{
				with(fail5xx(0), health.StateClosed, 0), with(fail5xx(0), health.StateClosed, 0), with(fail5xx(0), health.StateOpen, 30*sec),
				{at: 30 * sec, do: "admit", wantOK: true, wantProbe: true, wantState: health.StateHalfOpen, wantUntil: 30 * sec},
				{at: 31 * sec, do: "commit", probe: true, wantState: health.StateClosed},
				{at: 40 * sec, do: "succeed", wantState: health.StateClosed},
				with(fail5xx(41*sec), health.StateClosed, 0),
				with(fail5xx(42*sec), health.StateClosed, 0),
			},
		},
		{
			name: "zero config falls back to 3 failures and 30s",
			cfg:  health.Cooldown{},
			steps: []breakerStep{
				with(fail5xx(0), health.StateClosed, 0), with(fail5xx(0), health.StateClosed, 0),
				with(fail5xx(0), health.StateOpen, 30*sec),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ph := newTestHealth("breaker")
			for i, s := range tt.steps {
				now := healthT0.Add(s.at)
				where := fmt.Sprintf("step %d (%s at %s%s)", i, s.do, s.at, noteSuffix(s.note))
				switch s.do {
				case "admit":
					ok, probe := ph.Admit(now, s.model)
					if ok != s.wantOK || probe != s.wantProbe {
						t.Fatalf("%s: admit = (%v, %v), want (%v, %v)", where, ok, probe, s.wantOK, s.wantProbe)
					}
				case "force":
					if got := ph.ForceProbe(now); got != s.wantOK {
						t.Fatalf("%s: forceProbe = %v, want %v", where, got, s.wantOK)
					}
				case "fail":
					ph.OnFailure(now, tt.cfg, s.class, "", s.status, s.retryAfter, s.model, s.probe)
				case "succeed":
					ph.OnSuccess(now, s.probe)
				case "commit":
					ph.OnCommit(now, s.probe)
				case "release":
					ph.Release(s.probe)
				default:
					t.Fatalf("%s: unknown step", where)
				}
				if got := ph.State(now); got != s.wantState {
					t.Fatalf("%s: state = %s, want %s", where, got, s.wantState)
				}
				var wantUntil time.Time
				if s.wantUntil != 0 {
					wantUntil = healthT0.Add(s.wantUntil)
				}
				if got := ph.OpenUntil(); !got.Equal(wantUntil) {
					t.Fatalf("%s: openUntil = %s, want %s", where, got, wantUntil)
				}
			}
		})
	}
}

func noteSuffix(note string) string {
	if note == "" {
		return ""
	}
	return ": " + note
}

func TestHalfOpenAdmitsExactlyOneProbe(t *testing.T) {
	// Only this test's goroutines: e2e tests in the same binary leave Caddy's own.
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	cfg := health.Cooldown{Failures: 1, Duration: 30 * time.Second}
	const callers = 50
	// Many rounds, because one round rarely interleaves the callers closely.
	for round := range 100 {
		ph := newTestHealth("race")
		ph.OnFailure(healthT0, cfg, "connect", "", 0, 0, "", false)
		now := healthT0.Add(cfg.Duration)

		var (
			start       = make(chan struct{})
			wg          sync.WaitGroup
			oks, probes atomic.Int64
		)
		for range callers {
			wg.Go(func() {
				<-start
				ok, probe := ph.Admit(now, "m")
				if ok {
					oks.Add(1)
				}
				if probe {
					probes.Add(1)
				}
			})
		}
		close(start)
		wg.Wait()
		if oks.Load() != 1 || probes.Load() != 1 {
			t.Fatalf("round %d: %d concurrent admits in half_open: %d admitted, %d probes; want exactly 1 and 1",
				round, callers, oks.Load(), probes.Load())
		}
	}
}

func TestForceProbeIsExclusiveUnderConcurrency(t *testing.T) {
	// Only this test's goroutines: e2e tests in the same binary leave Caddy's own.
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	cfg := health.Cooldown{Failures: 1, Duration: 30 * time.Second}
	ph := newTestHealth("race-force")
	ph.OnFailure(healthT0, cfg, "connect", "", 0, 0, "", false)

	var (
		start = make(chan struct{})
		wg    sync.WaitGroup
		mu    sync.Mutex
		won   int
	)
	for range 50 {
		wg.Go(func() {
			<-start
			if ph.ForceProbe(healthT0.Add(time.Second)) {
				mu.Lock()
				won++
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	if won != 1 {
		t.Fatalf("forceProbe succeeded %d times, want 1", won)
	}
}

func TestEarliestRecovery(t *testing.T) {
	cfg := health.Cooldown{Failures: 1, Duration: 30 * time.Second}
	openAt := func(name string, retryAfter time.Duration) *health.Provider {
		ph := newTestHealth(name)
		ph.OnFailure(healthT0, cfg, "rate_limited", "", 429, retryAfter, "", false)
		return ph
	}
	a := openAt("a", 90*time.Second)
	b := openAt("b", 40*time.Second)
	c := openAt("c", 60*time.Second)
	b2 := openAt("b2", 40*time.Second)
	closed := newTestHealth("closed")

	tests := []struct {
		name      string
		hs        []*health.Provider
		want      *health.Provider
		wantUntil time.Time
	}{
		{"none", nil, nil, time.Time{}},
		{"one", []*health.Provider{a}, a, healthT0.Add(90 * time.Second)},
		{"the one ending first", []*health.Provider{a, b, c}, b, healthT0.Add(40 * time.Second)},
		{"ties go to the earlier candidate", []*health.Provider{a, b2, b}, b2, healthT0.Add(40 * time.Second)},
		{"nil entries are skipped", []*health.Provider{nil, c, nil}, c, healthT0.Add(60 * time.Second)},
		{"a closed provider recovers now", []*health.Provider{a, closed}, closed, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, until := earliestRecovery(tt.hs)
			if got != tt.want || !until.Equal(tt.wantUntil) {
				t.Fatalf("earliestRecovery = (%v, %s), want (%v, %s)", nameOf(got), until, nameOf(tt.want), tt.wantUntil)
			}
		})
	}
}

func nameOf(ph *health.Provider) string {
	if ph == nil {
		return "<nil>"
	}
	return ph.Name
}

func TestRecoverySeconds(t *testing.T) {
	cfg := health.Cooldown{Failures: 1, Duration: 30 * time.Second}
	openFor := func(name string, retryAfter time.Duration) *provider {
		ph := newTestHealth(name)
		ph.OnFailure(healthT0, cfg, "rate_limited", "", 429, retryAfter, "", false)
		return &provider{name: name, health: ph}
	}
	closed := &provider{name: "closed", health: newTestHealth("closed")}
	a, b := openFor("a", 90*time.Second), openFor("b", 40*time.Second)

	tests := []struct {
		name  string
		now   time.Duration
		cands []*provider
		want  int
	}{
		{"none open", 0, []*provider{closed}, 0},
		{"the first to recover", 0, []*provider{a, closed, b}, 40},
		{"rounded up", 500 * time.Millisecond, []*provider{a, b}, 40},
		{"an ended open period: its probe decides soon", 41 * time.Second, []*provider{a, b}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := recoverySeconds(healthT0.Add(tt.now), tt.cands); got != tt.want {
				t.Fatalf("recoverySeconds = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestResetClosesAndForgets(t *testing.T) {
	cfg := health.Cooldown{Failures: 3, Duration: 30 * time.Second, Max: 5 * time.Minute}
	ph := newTestHealth("reset")
	ph.BeginAttempt()
	ph.OnFailure(healthT0, cfg, "model_not_found", "", 404, 0, "m-gone", false)
	for range 3 {
		ph.OnFailure(healthT0, cfg, "status_5xx", "", 500, 0, "", false)
	}
	if !ph.ForceProbe(healthT0) {
		t.Fatal("forceProbe refused on a fresh open breaker")
	}

	ph.Reset(clock())

	now := healthT0.Add(time.Second)
	if got := ph.State(now); got != health.StateClosed {
		t.Errorf("state after reset = %s, want closed", got)
	}
	if got := ph.Consecutive.Load(); got != 0 {
		t.Errorf("consecutive failures after reset = %d, want 0", got)
	}
	if ok, probe := ph.Admit(now, "m-gone"); !ok || probe {
		t.Errorf("admit of the cooled model after reset = (%v, %v), want (true, false)", ok, probe)
	}
	if got := ph.Failures.Load(); got != 4 {
		t.Errorf("lifetime failures after reset = %d, want 4 (reset keeps counters)", got)
	}
	// Closing after reset must start from duration again, not the grown period.
	for range 3 {
		ph.OnFailure(now, cfg, "status_5xx", "", 500, 0, "", false)
	}
	if got, want := ph.OpenUntil(), now.Add(30*time.Second); !got.Equal(want) {
		t.Errorf("re-opened until %s, want %s", got, want)
	}
}

func TestModelCooldownsAreBounded(t *testing.T) {
	d := 30 * time.Second
	ph := newTestHealth("models")
	ph.CoolModel(healthT0, "expires-soon", time.Second)
	later := healthT0.Add(2 * time.Second)
	for i := range health.ModelCooldownLimit {
		ph.CoolModel(later.Add(time.Duration(i)*time.Millisecond), fmt.Sprintf("m%03d", i), d)
	}
	m := *ph.Models.Load()
	if len(m) != health.ModelCooldownLimit {
		t.Fatalf("%d cooled models, want %d", len(m), health.ModelCooldownLimit)
	}
	if _, ok := m["expires-soon"]; ok {
		t.Fatal("an expired cooldown survived while the map was full")
	}

	// Full of live entries: the one ending first makes room.
	ph.CoolModel(later.Add(time.Second), "newcomer", d)
	m = *ph.Models.Load()
	if len(m) != health.ModelCooldownLimit {
		t.Fatalf("%d cooled models after overflow, want %d", len(m), health.ModelCooldownLimit)
	}
	if _, ok := m["m000"]; ok {
		t.Error("the cooldown ending first was not evicted")
	}
	if ok, _ := ph.Admit(later.Add(time.Second), "newcomer"); ok {
		t.Error("the newest cooled model was admitted")
	}
}

func TestRedactedBaseURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://api.anthropic.com", "https://api.anthropic.com"},
		{"http://127.0.0.1:9001/v1", "http://127.0.0.1:9001/v1"},
		{"https://user:sk-secret@gw.test/v1", "https://gw.test/v1"},
		{"https://gw.test/v1?key=sk-secret#frag", "https://gw.test/v1"},
		{"https://gw.test/v1?", "https://gw.test/v1"},
		{"://bad", "(unparsable)"},
	}
	for _, tt := range tests {
		if got := RedactedBaseURL(tt.in); got != tt.want {
			t.Errorf("RedactedBaseURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestBreakerStateString(t *testing.T) {
	for s, want := range map[health.State]string{health.StateClosed: "closed", health.StateHalfOpen: "half_open", health.StateOpen: "open", 9: "breakerState(9)"} {
		if got := s.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", s, got, want)
		}
	}
}
