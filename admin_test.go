package llmhedge

import (
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmhedge/caddy-llm-hedge/internal/engine"
	"github.com/llmhedge/caddy-llm-hedge/internal/health"
)

// healthT0 is the start of the scripted timeline.
var healthT0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// adminTestPrefix marks the pool entries these tests create, since other
// tests of the package may hold entries of their own.
const adminTestPrefix = "admintest-"

// withAdminProviders pools three providers in known states and pins clock.
func withAdminProviders(t *testing.T) {
	t.Helper()
	t.Cleanup(engine.SetClock(func() time.Time { return healthT0.Add(5 * time.Second) }))

	cfg := health.Cooldown{Failures: 3, Duration: 30 * time.Second}
	entries := []struct{ name, url, vendor string }{
		{adminTestPrefix + "beta", "https://beta.test/v1", "openai"},
		{adminTestPrefix + "alpha", "https://b.alpha.test", "anthropic"},
		// A base URL carrying credentials must never come back out.
		{adminTestPrefix + "alpha", "https://user:sk-ant-SECRET@a.alpha.test/?key=sk-SECRET", "anthropic"},
	}
	for _, e := range entries {
		ph, err := loadHealth(e.name, e.url, e.vendor)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { releaseHealth(e.name, e.url) })
		if e.name == adminTestPrefix+"alpha" {
			for range 3 {
				ph.OnFailure(healthT0, cfg, "status_5xx", "", 502, 0, "", false)
			}
			ph.OnFailure(healthT0, cfg, "model_not_found", "", 404, 0, "claude-gone", false)
			for range 1234 {
				ph.BeginAttempt()
				ph.EndAttempt()
			}
			ph.AddTokens(2500000, 900, 0, 0)
		}
	}
}

func serveAdminTest(t *testing.T, method, target string) (*httptest.ResponseRecorder, error) {
	t.Helper()
	rec := httptest.NewRecorder()
	err := adminProviders{}.serveAdmin(rec, httptest.NewRequest(method, "http://localhost:2019"+target, nil))
	return rec, err
}

// ownViews decodes a JSON array of views and keeps this file's entries.
func ownViews(t *testing.T, body []byte) []map[string]any {
	t.Helper()
	var all []map[string]any
	if err := json.Unmarshal(body, &all); err != nil {
		t.Fatalf("decoding %s: %v", body, err)
	}
	var own []map[string]any
	for _, v := range all {
		if name, _ := v["name"].(string); strings.HasPrefix(name, adminTestPrefix) {
			own = append(own, v)
		}
	}
	return own
}

func TestAdminModuleRegistered(t *testing.T) {
	info, err := caddy.GetModule("admin.api.llm_hedge")
	if err != nil {
		t.Fatal(err)
	}
	router, ok := info.New().(caddy.AdminRouter)
	if !ok {
		t.Fatalf("%T is not a caddy.AdminRouter", info.New())
	}
	routes := router.Routes()
	if len(routes) != 1 || routes[0].Pattern != "/llm_hedge/" {
		t.Fatalf("routes = %+v, want the /llm_hedge/ subtree", routes)
	}
}

func TestAdminListJSON(t *testing.T) {
	withAdminProviders(t)

	rec, err := serveAdminTest(t, http.MethodGet, "/llm_hedge/providers")
	if err != nil {
		t.Fatal(err)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	body := rec.Body.String()
	if strings.Contains(body, "SECRET") {
		t.Fatalf("a credential from a base URL leaked into the view: %s", body)
	}
	views := ownViews(t, rec.Body.Bytes())
	var order []string
	for _, v := range views {
		order = append(order, v["name"].(string)+" "+v["url"].(string))
	}
	wantOrder := []string{
		adminTestPrefix + "alpha https://a.alpha.test/",
		adminTestPrefix + "alpha https://b.alpha.test",
		adminTestPrefix + "beta https://beta.test/v1",
	}
	if !slices.Equal(order, wantOrder) {
		t.Fatalf("providers listed as %q, want %q (by name, then URL)", order, wantOrder)
	}

	// The exact key set: nothing in a view could carry a key or a header.
	always := []string{"name", "url", "vendor", "state", "consecutive_failures", "in_flight", "max_in_flight",
		"requests", "failures", "hedges_won", "hedges_lost", "tokens", "routing"}
	whenFailing := append(slices.Clone(always), "open_until", "last_error", "model_cooldowns")
	for i, want := range [][]string{whenFailing, whenFailing, always} {
		if got := slices.Sorted(maps.Keys(views[i])); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
			t.Errorf("%s: keys %q, want %q", order[i], got, slices.Sorted(slices.Values(want)))
		}
	}
	alpha := views[1]
	if alpha["state"] != "open" || alpha["open_until"] != "2025-03-01T12:00:30Z" || alpha["consecutive_failures"] != 3.0 ||
		alpha["requests"] != 1234.0 || alpha["vendor"] != "anthropic" {
		t.Errorf("alpha view = %v", alpha)
	}
	tokens := alpha["tokens"].(map[string]any)
	if got := slices.Sorted(maps.Keys(tokens)); !slices.Equal(got, []string{"cache_read", "cache_write", "input", "output"}) {
		t.Errorf("token keys = %q", got)
	}
	lastErr := alpha["last_error"].(map[string]any)
	if got := slices.Sorted(maps.Keys(lastErr)); !slices.Equal(got, []string{"at", "class"}) || lastErr["class"] != "model_not_found" {
		t.Errorf("last_error = %v", lastErr)
	}
	cooldowns := alpha["model_cooldowns"].([]any)
	if len(cooldowns) != 1 || cooldowns[0].(map[string]any)["model"] != "claude-gone" {
		t.Errorf("model_cooldowns = %v", cooldowns)
	}
}

func TestAdminListShowsFirstEventQuantiles(t *testing.T) {
	withAdminProviders(t)
	saved := firstEventQuantiles
	t.Cleanup(func() { firstEventQuantiles = saved })
	firstEventQuantiles = func(*health.Provider) (time.Duration, time.Duration, bool) {
		return 350 * time.Millisecond, 2 * time.Second, true
	}

	rec, err := serveAdminTest(t, http.MethodGet, "/llm_hedge/providers")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range ownViews(t, rec.Body.Bytes()) {
		if v["first_event_p50_ms"] != 350.0 || v["first_event_p95_ms"] != 2000.0 {
			t.Errorf("%s: first_event p50/p95 = %v/%v, want 350/2000", v["name"], v["first_event_p50_ms"], v["first_event_p95_ms"])
		}
	}
}

func TestAdminListText(t *testing.T) {
	withAdminProviders(t)

	rec, err := serveAdminTest(t, http.MethodGet, "/llm_hedge/providers?format=text")
	if err != nil {
		t.Fatal(err)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type = %q", ct)
	}
	text := rec.Body.String()
	for _, want := range []string{
		"NAME", "STATE", "LAST ERROR",
		"open for 25s",           // opened at T0 for 30s, viewed at T0+5s
		"1.2k",                   // 1234 requests
		"2.5M/900",               // tokens in/out
		"model_not_found 5s ago", // last error
		"model claude-gone",      // the model cooldown line
		"cooling for 25s",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text view lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "SECRET") {
		t.Fatalf("a credential leaked into the text view:\n%s", text)
	}
}

func TestAdminReset(t *testing.T) {
	withAdminProviders(t)

	rec, err := serveAdminTest(t, http.MethodPost, "/llm_hedge/providers/"+adminTestPrefix+"alpha/reset")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusOK {
		t.Fatalf("status = %d", rec.Code)
	}
	views := ownViews(t, rec.Body.Bytes())
	if len(views) != 2 {
		t.Fatalf("reset returned %d views, want both alpha entries: %s", len(views), rec.Body)
	}
	for _, v := range views {
		if v["name"] != adminTestPrefix+"alpha" || v["state"] != "closed" || v["consecutive_failures"] != 0.0 || v["model_cooldowns"] != nil {
			t.Errorf("after reset: %v", v)
		}
	}

	ph, err := loadHealth(adminTestPrefix+"alpha", "https://b.alpha.test", "anthropic")
	if err != nil {
		t.Fatal(err)
	}
	defer releaseHealth(adminTestPrefix+"alpha", "https://b.alpha.test")
	if ok, probe := ph.Admit(engine.Now(), "claude-gone"); !ok || probe {
		t.Errorf("admit after reset = (%v, %v), want (true, false)", ok, probe)
	}
}

func TestAdminErrors(t *testing.T) {
	withAdminProviders(t)

	tests := []struct {
		name, method, target string
		wantStatus           int
		wantAllow            string
	}{
		{"list refuses POST", http.MethodPost, "/llm_hedge/providers", http.StatusMethodNotAllowed, "GET"},
		{"reset refuses GET", http.MethodGet, "/llm_hedge/providers/" + adminTestPrefix + "alpha/reset", http.StatusMethodNotAllowed, "POST"},
		{"reset of an unknown provider", http.MethodPost, "/llm_hedge/providers/nobody/reset", http.StatusNotFound, ""},
		{"reset without a name", http.MethodPost, "/llm_hedge/providers//reset", http.StatusNotFound, ""},
		{"unknown endpoint", http.MethodGet, "/llm_hedge/upstreams", http.StatusNotFound, ""},
		{"unknown provider action", http.MethodPost, "/llm_hedge/providers/" + adminTestPrefix + "alpha/open", http.StatusNotFound, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, err := serveAdminTest(t, tt.method, tt.target)
			var apiErr caddy.APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("error = %v, want a caddy.APIError", err)
			}
			if apiErr.HTTPStatus != tt.wantStatus {
				t.Errorf("status = %d, want %d (%v)", apiErr.HTTPStatus, tt.wantStatus, err)
			}
			if got := rec.Header().Get("Allow"); got != tt.wantAllow {
				t.Errorf("Allow = %q, want %q", got, tt.wantAllow)
			}
		})
	}

	// A refused reset must not have reset anything.
	rec, err := serveAdminTest(t, http.MethodGet, "/llm_hedge/providers")
	if err != nil {
		t.Fatal(err)
	}
	if v := ownViews(t, rec.Body.Bytes())[0]; v["state"] != "open" {
		t.Errorf("a refused reset changed state to %v", v["state"])
	}
}

func TestShortFormats(t *testing.T) {
	counts := map[int64]string{0: "0", 950: "950", 1234: "1.2k", 1000: "1k", 3_500_000: "3.5M"}
	for n, want := range counts {
		if got := shortCount(n); got != want {
			t.Errorf("shortCount(%d) = %q, want %q", n, got, want)
		}
	}
	spans := map[time.Duration]string{0: "0s", 25 * time.Second: "25s", 90 * time.Second: "1m", 3 * time.Hour: "3h", 50 * time.Hour: "2d"}
	for d, want := range spans {
		if got := shortSpan(healthT0, healthT0.Add(d)); got != want {
			t.Errorf("shortSpan(%s) = %q, want %q", d, got, want)
		}
	}
}
