package llmhedge

import (
	"fmt"
	"testing"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/health"
)

func TestLoadHealthIsSharedAndSurvivesReload(t *testing.T) {
	const name, url = "healthtest-shared", "https://shared.test/v1"
	old, err := loadHealth(name, url, "anthropic")
	if err != nil {
		t.Fatal(err)
	}
	cfg := health.Cooldown{Failures: 1, Duration: 30 * time.Second}
	old.OnFailure(healthT0, cfg, "connect", "", 0, 0, "", false)

	// A reload provisions the new handler before the old one is cleaned up.
	fresh, err := loadHealth(name, url, "openai")
	if err != nil {
		t.Fatal(err)
	}
	releaseHealth(name, url)
	if fresh != old {
		t.Fatal("a second handler naming the same provider got a different health entry")
	}
	if got := fresh.State(healthT0.Add(time.Second)); got != health.StateOpen {
		t.Errorf("state after reload = %s, want open", got)
	}
	if got := *fresh.Vendor.Load(); got != "openai" {
		t.Errorf("vendor = %q, want the latest provision's %q", got, "openai")
	}

	other, err := loadHealth(name, "https://other.test/v1", "openai")
	if err != nil {
		t.Fatal(err)
	}
	if other == fresh {
		t.Error("the same name with another base URL shares health")
	}
	releaseHealth(name, "https://other.test/v1")

	releaseHealth(name, url)
	if _, ok := providerPool.References(healthKey(name, url)); ok {
		t.Fatal("entry still pooled after its last handler was cleaned up")
	}
	again, err := loadHealth(name, url, "anthropic")
	if err != nil {
		t.Fatal(err)
	}
	defer releaseHealth(name, url)
	if got := again.State(healthT0.Add(time.Second)); got != health.StateClosed {
		t.Errorf("state of a provider no config named any more = %s, want a fresh closed breaker", got)
	}
}

func TestAttemptCounters(t *testing.T) {
	ph := newTestHealth("counters")
	ph.BeginAttempt()
	ph.BeginAttempt()
	ph.EndAttempt()
	ph.NoteHedge(true)
	ph.NoteHedge(false)
	ph.NoteHedge(false)
	ph.AddTokens(10, 20, 30, 40)
	ph.AddTokens(1, 2, 3, 4)

	if got := ph.InFlightNow(); got != 1 {
		t.Errorf("inFlightNow = %d, want 1", got)
	}
	v := snapshot(ph, healthT0)
	want := providerView{
		Name: "counters", URL: "https://counters.test/v1", State: "closed",
		InFlight: 1, Requests: 2, HedgesWon: 1, HedgesLost: 2,
		Tokens: tokensView{Input: 11, Output: 22, CacheRead: 33, CacheWrite: 44},
	}
	if v.InFlight != want.InFlight || v.Requests != want.Requests || v.HedgesWon != want.HedgesWon ||
		v.HedgesLost != want.HedgesLost || v.Tokens != want.Tokens || v.State != want.State ||
		v.Name != want.Name || v.URL != want.URL {
		t.Fatalf("snapshot = %+v, want %+v", v, want)
	}
}

func TestSnapshot(t *testing.T) {
	saved := firstEventQuantiles
	t.Cleanup(func() { firstEventQuantiles = saved })

	cfg := health.Cooldown{Failures: 1, Duration: 30 * time.Second}
	ph := newTestHealth("snap")
	vendor := "anthropic"
	ph.Vendor.Store(&vendor)
	ph.OnFailure(healthT0, cfg, "model_not_found", "", 404, 0, "m-b", false)
	ph.OnFailure(healthT0, cfg, "model_not_found", "", 404, 0, "m-a", false)
	ph.OnFailure(healthT0.Add(time.Second), cfg, "overloaded", "", 529, 0, "", false)

	firstEventQuantiles = nil
	v := snapshot(ph, healthT0.Add(5*time.Second))
	if v.FirstEventP50Ms != nil || v.FirstEventP95Ms != nil {
		t.Error("first-event quantiles shown without a source")
	}
	if v.State != "open" || v.OpenUntil != "2025-03-01T12:00:31Z" || v.ConsecutiveFailures != 1 || v.Failures != 3 {
		t.Errorf("breaker view = state %s, open_until %s, consecutive %d, failures %d", v.State, v.OpenUntil, v.ConsecutiveFailures, v.Failures)
	}
	if v.LastError == nil || *v.LastError != (lastErrorView{Class: "overloaded", At: "2025-03-01T12:00:01Z"}) {
		t.Errorf("last error = %+v", v.LastError)
	}
	wantModels := []modelCooldownView{{"m-a", "2025-03-01T12:00:30Z"}, {"m-b", "2025-03-01T12:00:30Z"}}
	if fmt.Sprint(v.ModelCooldowns) != fmt.Sprint(wantModels) {
		t.Errorf("model cooldowns = %v, want %v", v.ModelCooldowns, wantModels)
	}
	if v.Vendor != "anthropic" {
		t.Errorf("vendor = %q", v.Vendor)
	}

	firstEventQuantiles = func(*health.Provider) (time.Duration, time.Duration, bool) {
		return 412345 * time.Microsecond, 1500 * time.Millisecond, true
	}
	v = snapshot(ph, healthT0.Add(40*time.Second))
	if v.FirstEventP50Ms == nil || *v.FirstEventP50Ms != 412.3 || v.FirstEventP95Ms == nil || *v.FirstEventP95Ms != 1500 {
		t.Errorf("first-event quantiles = %v, %v; want 412.3, 1500", v.FirstEventP50Ms, v.FirstEventP95Ms)
	}
	if len(v.ModelCooldowns) != 0 {
		t.Errorf("expired model cooldowns shown: %v", v.ModelCooldowns)
	}
	if v.State != "half_open" {
		t.Errorf("state = %s, want half_open", v.State)
	}

	firstEventQuantiles = func(*health.Provider) (time.Duration, time.Duration, bool) { return 0, 0, false }
	if v := snapshot(ph, healthT0); v.FirstEventP50Ms != nil {
		t.Error("first-event quantiles shown when the source has no samples")
	}
}

func newTestHealth(name string) *health.Provider {
	return &health.Provider{Name: name, BaseURL: "https://" + name + ".test/v1"}
}

// The table of response owners is one per process, shared by a reload's
// new handlers, and kept while any holds it.
func TestResponseOwnersSharedAcrossReload(t *testing.T) {
	a, err := loadResponseOwners()
	if err != nil {
		t.Fatal(err)
	}
	b, err := loadResponseOwners() // a reload: the second handler shares the table
	if err != nil {
		t.Fatal(err)
	}
	defer releaseResponseOwners()
	if a != b {
		t.Fatal("a reload's handler got another table")
	}
	releaseResponseOwners()
	c, err := loadResponseOwners()
	if err != nil {
		t.Fatal(err)
	}
	defer releaseResponseOwners()
	if c != a {
		t.Fatal("the table was dropped while a handler held it")
	}
}
