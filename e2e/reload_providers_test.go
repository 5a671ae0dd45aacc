package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// A pool key disabled by a 401 is re-enabled by a reload (SPEC 14): the
// log says so, with reason reload, the admin view shows it ok again and
// routing uses it.
func TestReloadReenablesDisabledKey(t *testing.T) {
	up, block, p := proxyWithDisabledKey(t)
	if got := reloadKeyState(t, p, "sk-bad"); got != "disabled" {
		t.Fatalf("sk-bad is %q before the reload, want disabled", got)
	}

	p.reload(t, block+"timeouts {\n idle 91s\n }\n")
	back := logLines(t, p, "provider key re-enabled", 1)
	if len(back) != 1 || back[0]["key"] != fingerprint("sk-bad") || back[0]["reason"] != "reload" {
		t.Fatalf("re-enabled lines: %v; want one for sk-bad, reason reload", back)
	}
	if got := reloadKeyState(t, p, "sk-bad"); got != "ok" {
		t.Fatalf("sk-bad is %q after the reload, want ok", got)
	}
	n := len(up.Requests())
	if _, err := anthropicClient(p, "k").Messages.New(ctxTimeout(t, 10*time.Second), anthropicParams("claude-keys")); err != nil {
		t.Fatal(err)
	}
	if rs := up.Requests()[n:]; len(rs) != 2 || rs[0].APIKey != "sk-bad" {
		t.Fatalf("after the reload the request did not try sk-bad first: %d attempts", len(rs))
	}
}

// reloadKeyState is the admin view's state of one key of provider pool.
func reloadKeyState(t *testing.T, p *proxy, key string) string {
	t.Helper()
	_, _, body := healthAdmin(t, p, http.MethodGet, "/llm_hedge/providers")
	var views []struct {
		Name string `json:"name"`
		Keys []struct {
			Fingerprint string `json:"fingerprint"`
			State       string `json:"state"`
		} `json:"keys"`
	}
	if err := json.Unmarshal([]byte(body), &views); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	for _, v := range views {
		for _, k := range v.Keys {
			if v.Name == "pool" && k.Fingerprint == fingerprint(key) {
				return k.State
			}
		}
	}
	return ""
}

// A provider whose base URL a reload changes starts with a fresh breaker
// (health is keyed by name + base URL): the open breaker of the old URL
// does not keep traffic from the new one, and the old entry leaves the
// admin list.
func TestReloadNewBaseURLStartsFreshBreaker(t *testing.T) {
	down := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 503}}})
	fresh := newUpstream(t, sim.Config{})
	opts := "hedge off\nretry {\n attempts 1\n }\ncooldown {\n failures 1\n duration 5m\n }\n"
	p := startProxy(t, provider("a", down)+opts)
	if _, err := anthropicClient(p, "k").Messages.New(ctxTimeout(t, 10*time.Second), anthropicParams("claude-test")); err == nil {
		t.Fatal("the down provider answered")
	}
	if v := healthMustProvider(t, p, "a", down); v.State != "open" {
		t.Fatalf("before the reload: %+v, want open", *v)
	}

	p.reload(t, provider("a", fresh)+opts)
	if _, err := anthropicClient(p, "k").Messages.New(ctxTimeout(t, 10*time.Second), anthropicParams("claude-test")); err != nil {
		t.Fatalf("after moving a to a new URL: %v", err)
	}
	if v := healthMustProvider(t, p, "a", fresh); v.State != "closed" || v.Failures != 0 {
		t.Fatalf("the new URL inherited the old breaker: %+v", *v)
	}
	if v := healthProvider(t, p, "a", down); v != nil {
		t.Fatalf("the old URL is still listed: %+v", *v)
	}
}

// A reload that fails leaves the running config as it was: a key it
// refused stays disabled, and no log line says it was re-enabled.
func TestFailedReloadKeepsKeyDisabled(t *testing.T) {
	up, block, p := proxyWithDisabledKey(t)

	// The second provider's key expands to nothing: Provision refuses it.
	bad := block + provider("broken", up, "key {env.LLM_HEDGE_TEST_UNSET_KEY}")
	if status := reloadStatus(t, p, bad); status == http.StatusOK {
		t.Fatal("the broken config loaded")
	}
	if got := reloadKeyState(t, p, "sk-bad"); got != "disabled" {
		t.Fatalf("sk-bad is %q after a failed reload, want still disabled", got)
	}
	if strings.Contains(p.logs(t), "provider key re-enabled") {
		t.Fatal("a failed reload logged a key re-enabled")
	}
}

// reloadStatus posts a config as p.reload does and returns the status,
// for a config that may be refused.
func reloadStatus(t *testing.T, p *proxy, block string) int {
	t.Helper()
	return p.postLoad(t, block)
}

// The winner a failover remembered for a session outlives a reload, as
// the health does: the next turn still goes where its prompt cache is,
// not back to the hashed provider.
func TestReloadKeepsAffinityWinner(t *testing.T) {
	ups := []*upstream{newUpstream(t, sim.Config{}), newUpstream(t, sim.Config{}), newUpstream(t, sim.Config{})}
	block := "hedge off\n cooldown {\n failures 100\n }\n"
	for i, u := range ups {
		block += provider(fmt.Sprintf("p%d", i), u)
	}
	p := startProxy(t, block)
	ask := func() int {
		before := affinityCounts(ups)
		retryAsk(t, p, affinityParams("user-reload"))
		return affinityServed(t, ups, before)
	}
	winner, before, after := failOverOnce(t, p, ups, ask(), "user-reload")
	if winner < 0 {
		t.Fatalf("no failover: %v -> %v", before, after)
	}

	p.reload(t, block+" timeouts {\n idle 91s\n }\n")
	if got := ask(); got != winner {
		t.Fatalf("after the reload the session went to p%d, want the failover winner p%d", got, winner)
	}
}

// A reload that removes a provider lets its stream in flight finish on
// the old config, logged once with that provider; the provider leaves the
// admin list, and new requests go to the providers the new config names.
func TestReloadRemovingProviderFinishesItsStream(t *testing.T) {
	a := newUpstream(t, sim.Config{TokenDelay: caddyDur(150 * time.Millisecond)})
	b := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("a", a, "priority 0")+provider("b", b, "priority 1")+"hedge off\n")
	wait := streamInBackground(t, p)
	healthWaitRecords(t, a, "a streaming", func(rs []sim.RequestRecord) bool { return len(rs) == 1 && !rs[0].FirstDelta.IsZero() })
	p.reload(t, provider("b", b)+"hedge off\n")
	if v := healthProvider(t, p, "a", a); v != nil {
		t.Fatalf("a is still listed after the reload removed it: %+v", *v)
	}
	if _, err := anthropicClient(p, "k").Messages.New(ctxTimeout(t, 10*time.Second), anthropicParams("claude-test")); err != nil || completions(a) != 1 {
		t.Fatalf("a request after the reload: %v; a got %d requests", err, completions(a))
	}
	if text, err := wait(); err != nil || text != wantText {
		t.Fatalf("the removed provider's stream: %v %q", err, text)
	}
	lines := logLines(t, p, "llm request", 2)
	if len(lines) != 2 || lines[1]["provider"] != "a" || lines[1]["outcome"] != "success" {
		t.Fatalf("log lines: %v", lines)
	}
}

// A refused reload does not change what the admin view says of the
// running config: max_in_flight stays the running provider's.
func TestFailedReloadKeepsAdminView(t *testing.T) {
	up := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("a", up, "max_in_flight 5"))
	bad := provider("a", up, "max_in_flight 9") + provider("broken", up, "key {env.LLM_HEDGE_TEST_UNSET_KEY}")
	if status := reloadStatus(t, p, bad); status == http.StatusOK {
		t.Fatal("the broken config loaded")
	}
	_, _, body := healthAdmin(t, p, http.MethodGet, "/llm_hedge/providers")
	if !strings.Contains(body, `"max_in_flight":5`) {
		t.Fatalf("after a refused reload the admin view is %s, want max_in_flight 5", body)
	}
}

// proxyWithDisabledKey starts a proxy whose provider has a pool of two
// keys, the first of which the upstream refuses, and sends until the
// proxy has disabled it.
func proxyWithDisabledKey(t *testing.T) (*upstream, string, *proxy) {
	t.Helper()
	up := newUpstream(t, sim.Config{Key: "sk-good"})
	block := provider("pool", up, "key sk-bad sk-good") + "hedge off\ncooldown {\n failures 100\n }\n"
	p := startProxy(t, block)
	for range 2 {
		if _, err := anthropicClient(p, "k").Messages.New(ctxTimeout(t, 10*time.Second), anthropicParams("claude-keys")); err != nil {
			t.Fatal(err)
		}
	}
	logLines(t, p, "provider key disabled", 1)
	return up, block, p
}
