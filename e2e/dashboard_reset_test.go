package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// A site mount with `resets on` refuses a reset another web site's page
// sends (a form or a fetch, which the browser sends with the site's
// basic_auth or forward_auth credentials): the breaker stays open. The
// page's own Reset button (a same-origin fetch: Sec-Fetch-Site
// same-origin, its Origin), a page served over plain HTTP whose browser
// sends only Origin, and curl (neither header) reset it.
func TestDashboardResetRefusesCrossSite(t *testing.T) {
	flaky := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 503}}})
	spare := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("flaky", flaky, "priority 0")+provider("spare", spare, "priority 1")+healthCooldown(1, "60s"),
		"route /llm_hedge/* {\n llm_hedge_dashboard {\n resets on\n }\n }")

	state := func() string {
		t.Helper()
		resp, err := http.Get(p.AdminURL + "/llm_hedge/providers")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var views []struct{ Name, State string }
		if err := json.NewDecoder(resp.Body).Decode(&views); err != nil {
			t.Fatal(err)
		}
		for _, v := range views {
			if v.Name == "flaky" {
				return v.State
			}
		}
		t.Fatal("no provider flaky in /llm_hedge/providers")
		return ""
	}
	// open makes flaky's breaker open: one 503 does it (failures 1); the
	// request fails over to spare. The breaker opens before the failover
	// is sent, so it is open when the client has its answer.
	open := func() {
		t.Helper()
		if state() == "open" {
			return
		}
		if _, err := streamAnthropic(ctxTimeout(t, 10*time.Second), anthropicClient(p, "k"), anthropicParams("claude-test")); err != nil {
			t.Fatal(err)
		}
		if s := state(); s != "open" {
			t.Fatalf("flaky after a 503: %s, want open", s)
		}
	}

	for _, tc := range []struct {
		name    string
		headers map[string]string
		allowed bool
	}{
		{"another site's fetch or form", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Origin": "https://evil.example"}, false},
		{"a sibling subdomain", map[string]string{"Sec-Fetch-Site": "same-site", "Origin": "https://other.example"}, false},
		{"another site, a browser without Sec-Fetch-Site", map[string]string{"Origin": "https://evil.example"}, false},
		{"an opaque origin (sandboxed frame)", map[string]string{"Origin": "null"}, false},
		{"the page's own Reset button", map[string]string{"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "same-origin", "Origin": p.URL}, true},
		{"the page over plain HTTP (no Sec-Fetch-*)", map[string]string{"Origin": p.URL}, true},
		{"curl: no browser headers", nil, true},
	} {
		open()
		req, _ := http.NewRequest(http.MethodPost, p.URL+"/llm_hedge/providers/flaky/reset", nil)
		for k, v := range tc.headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want, wantState := http.StatusForbidden, "open"
		if tc.allowed {
			want, wantState = http.StatusOK, "closed"
		}
		if resp.StatusCode != want {
			t.Fatalf("%s: reset answered %d, want %d: %s", tc.name, resp.StatusCode, want, body)
		}
		if s := state(); s != wantState {
			t.Fatalf("%s: flaky is %s after the reset (%d), want %s", tc.name, s, resp.StatusCode, wantState)
		}
	}
}
