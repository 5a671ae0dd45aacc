package engine

import (
	"net/http"
	"testing"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/affinity"
	"github.com/llmhedge/caddy-llm-hedge/internal/health"
)

// Case 14 on an injected timeline: a probe (and an ordinary attempt) begun
// before an admin reset fails after it; the breaker stays closed, the
// lifetime count still sees the failure, and the new epoch's probe slot is
// left alone.
func TestResetEpochIgnoresOldFailures(t *testing.T) {
	cfg := health.Cooldown{Failures: 1, Duration: 30 * time.Second}
	for _, probe := range []bool{true, false} {
		ph := newTestHealth("epoch")
		ph.OnFailure(healthT0, cfg, "status_5xx", "", 500, 0, "m", false)
		at := healthT0.Add(31 * time.Second)
		if ok, isProbe := ph.Admit(at, "m"); ok != true || isProbe != true {
			t.Fatalf("half-open admit: %v %v, want the probe", ok, isProbe)
		}
		if !probe {
			ph.Release(true)
		}
		old := ph.Epoch.Load()
		ph.Reset(clock())
		// A probe slot taken in the new epoch survives the old report.
		if !ph.ForceProbe(at) {
			t.Fatal("reset left the probe slot taken")
		}
		ph.OnFailureIn(old, at.Add(time.Second), cfg, "status_5xx", "", 500, 0, "m", probe)
		if ph.ProbeSince.Load() == 0 {
			t.Fatalf("probe=%v: the old epoch's report freed the new epoch's probe slot", probe)
		}
		ph.Release(true)
		if s := ph.State(at.Add(time.Second)); s != health.StateClosed || ph.Consecutive.Load() != 0 {
			t.Fatalf("probe=%v: state %v, consecutive %d after an old-epoch failure; want closed, 0", probe, s, ph.Consecutive.Load())
		}
		if ph.Failures.Load() != 2 {
			t.Fatalf("probe=%v: lifetime failures %d, want 2", probe, ph.Failures.Load())
		}
		// A failure of the current epoch still counts.
		ph.OnFailureIn(ph.Epoch.Load(), at.Add(2*time.Second), cfg, "status_5xx", "", 500, 0, "m", false)
		if s := ph.State(at.Add(2 * time.Second)); s != health.StateOpen {
			t.Fatalf("probe=%v: state %v after a current failure, want open", probe, s)
		}
	}
}

// Case 17: admission is decided for the moment the retry would start.
func TestAdmitsAt(t *testing.T) {
	cfg := health.Cooldown{Failures: 1, Duration: 30 * time.Second}
	ph := newTestHealth("admits")
	if !ph.AdmitsAt(healthT0, "m") {
		t.Fatal("closed breaker refuses")
	}
	ph.OnFailure(healthT0, cfg, "overloaded", "", 503, 0, "m", false)
	if ph.AdmitsAt(healthT0.Add(500*time.Millisecond), "m") {
		t.Fatal("a retry 0.5s into a 30s open period would be admitted")
	}
	if !ph.AdmitsAt(healthT0.Add(30*time.Second), "m") {
		t.Fatal("a retry at the end of the open period (Retry-After waited out) would be refused")
	}
	ph.Reset(clock())
	ph.CoolModel(healthT0, "m", time.Minute)
	if ph.AdmitsAt(healthT0.Add(time.Second), "m") || !ph.AdmitsAt(healthT0.Add(time.Second), "other") {
		t.Fatal("model cooldown not honoured per model")
	}
}

// Case 13 with an injected clock: once the primary's open period is over
// (half-open, ready for its probe) the remembered fallback-tier winner no
// longer holds the session; while it is open the winner does.
func TestAffinityPickPrefersRecoveredTier(t *testing.T) {
	saved := clock
	t.Cleanup(func() { clock = saved })
	now := healthT0
	clock = func() time.Time { return now }

	mk := func(name string, prio int) *provider {
		return &provider{cfg: &ProviderConfig{Name: name, Priority: prio}, name: name, weight: 1, health: newTestHealth(name)}
	}
	primary, secondary := mk("primary", 0), mk("secondary", 1)
	h := &Engine{providers: []*provider{primary, secondary}, affinity: affinity.NewTable(0, 0), rand: func() float64 { return 0.5 }}
	primary.health.OnFailure(now, health.Cooldown{Failures: 1, Duration: 30 * time.Second}, "", "status_5xx", 500, 0, "m", false)
	h.affinity.Put("s", "secondary", now)

	for _, tc := range []struct {
		at   time.Duration
		want string
	}{
		{at: 10 * time.Second, want: "secondary"}, // primary open: stay on the winner
		{at: 31 * time.Second, want: "primary"},   // primary half-open: back to the best tier
	} {
		now = healthT0.Add(tc.at)
		if got, _ := h.candidates(dialectAnthropic, "m", "s", 0); got[0].name != tc.want {
			t.Fatalf("at +%v: first candidate %s, want %s", tc.at, got[0].name, tc.want)
		}
	}
	primary.health.Reset(clock())
	if got, _ := h.candidates(dialectAnthropic, "m", "s", 0); got[0].name != "primary" {
		t.Fatalf("primary closed: first candidate %s, want primary", got[0].name)
	}
}

// Case 15: which X-Stainless-Timeout values count.
func TestClientDeadlineHeader(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want time.Duration
		ok   bool
	}{
		{v: "600", want: 600 * time.Second, ok: true},
		{v: " 1.5 ", want: 1500 * time.Millisecond, ok: true},
		{v: ""}, {v: "0"}, {v: "-1"}, {v: "abc"}, {v: "NaN"}, {v: "Inf"}, {v: "-Inf"}, {v: "1e400"}, {v: "1e12"},
	} {
		h := http.Header{}
		if tc.v != "" {
			h.Set("X-Stainless-Timeout", tc.v)
		}
		got, ok := clientDeadline(h)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%q: %v %v, want %v %v", tc.v, got, ok, tc.want, tc.ok)
		}
	}
}
