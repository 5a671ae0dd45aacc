package e2e

import (
	"net/http"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// routingTier starts three simulated providers of one tier, each its own
// vendor, whose first tokens take about base, 3x base and 9x base (20%
// jitter), behind a proxy with the given extra options.
func routingTier(t testing.TB, base time.Duration, extra string) (*proxy, [3]*upstream) {
	var ups [3]*upstream
	block := ""
	for i, name := range []string{"fast", "mid", "slow"} {
		d := base * time.Duration([]int{1, 3, 9}[i])
		ups[i] = newUpstream(t, sim.Config{FirstToken: caddyDur(d), FirstTokenJitter: 20})
		block += provider(name, ups[i], "vendor "+name)
	}
	return startProxy(t, block+extra), ups
}

// attemptShares runs n streaming requests, c at a time, and returns each
// upstream's share of the attempts they made (hedges included) and the
// hedges' share of the attempts.
func attemptShares(t testing.TB, p *proxy, ups [3]*upstream, n, c int) ([3]float64, float64) {
	t.Helper()
	var before [3]int
	for i, u := range ups {
		before[i] = completions(u)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: c}}
	defer client.CloseIdleConnections()
	if _, err := hedgeTailRun(p, client, n, c); err != nil {
		t.Fatal(err)
	}
	var shares [3]float64
	total := 0
	for i, u := range ups {
		if err := u.WaitIdle(ctxTimeout(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
		before[i] = completions(u) - before[i]
		total += before[i]
	}
	for i := range shares {
		shares[i] = float64(before[i]) / float64(total)
	}
	return shares, float64(total-n) / float64(total)
}

// TestRoutingAdaptiveFindsTheFastest: with three providers of one tier at
// 50, 150 and 450 ms to their first token, adaptive routing sends most
// attempts to the fastest, where weighted random spreads them evenly.
// Shares of traffic, not milliseconds: a loaded machine moves every
// provider's time alike.
func TestRoutingAdaptiveFindsTheFastest(t *testing.T) {
	const n, c = 150, 8
	p, ups := routingTier(t, 50*time.Millisecond, "")
	adaptive, _ := attemptShares(t, p, ups, n, c)
	// The choice is visible: the admin view's share and a route entry in
	// the chain naming the policy.
	if v := hedgeProviderView(t, p, ups[0]); v["routing"].(map[string]any)["share"].(float64) < 0.5 {
		t.Errorf("admin view of the fastest: %v, want most of the tier's share", v["routing"])
	}
	found := false
	for _, e := range routeEntries(t, p, n) {
		found = found || e["policy"] == "adaptive" && e["reason"] == "least_cost" && e["pick"] == "fast" && e["cost_ms"].(float64) > 0
	}
	if !found {
		t.Errorf("no route entry naming the fastest, the policy, its reason and cost in the request log")
	}
	// The proxy of a test is the process's one Caddy: the weighted run
	// comes last.
	pw, upsw := routingTier(t, 50*time.Millisecond, "lb_policy weighted_random\n")
	weighted, _ := attemptShares(t, pw, upsw, n, c)
	t.Logf("shares fast/mid/slow: adaptive %.2f/%.2f/%.2f, weighted %.2f/%.2f/%.2f",
		adaptive[0], adaptive[1], adaptive[2], weighted[0], weighted[1], weighted[2])
	if adaptive[0] < 0.7 {
		t.Errorf("adaptive sent %.0f%% of the attempts to the fastest provider, want at least 70%%", 100*adaptive[0])
	}
	if adaptive[2] > 0.12 {
		t.Errorf("adaptive sent %.0f%% of the attempts to the slowest provider, want its exploration share only", 100*adaptive[2])
	}
	if weighted[0] > 0.55 || adaptive[0] < weighted[0]+0.3 {
		t.Errorf("weighted random sent %.0f%% to the fastest of three equal-weight providers, adaptive %.0f%%", 100*weighted[0], 100*adaptive[0])
	}
}

// TestRoutingFollowsASlowdown: the fastest provider turns 5x slower (now
// slower than the second), traffic moves to the second; it recovers, and
// traffic comes back, noticed through the exploration share alone.
func TestRoutingFollowsASlowdown(t *testing.T) {
	const base = 50 * time.Millisecond
	p, ups := routingTier(t, base, "")
	if s, _ := attemptShares(t, p, ups, 100, 8); s[0] < 0.6 {
		t.Fatalf("before the slowdown the fastest got %.2f of the attempts", s[0])
	}
	setFirstToken := func(u *upstream, d time.Duration) {
		cfg := u.Config()
		cfg.FirstToken = caddyDur(d)
		if err := u.SetConfig(cfg); err != nil {
			t.Fatal(err)
		}
	}
	// waitMajority sends batches until one upstream takes most of a
	// batch's attempts, and fails after a minute of batches.
	waitMajority := func(want int, what string) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for batches := 1; ; batches++ {
			s, _ := attemptShares(t, p, ups, 32, 8)
			if s[want] > 0.5 {
				t.Logf("%s after %d batches: shares %.2f/%.2f/%.2f", what, batches, s[0], s[1], s[2])
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: shares still %.2f/%.2f/%.2f after a minute", what, s[0], s[1], s[2])
			}
		}
	}
	setFirstToken(ups[0], 5*base) // 250 ms: now slower than mid's 150
	waitMajority(1, "moved to mid")
	setFirstToken(ups[0], base)
	waitMajority(0, "back to fast")
}

// TestRoutingAffinityBound: a Claude Code session (the official SDK, its
// X-Claude-Code-Session-Id header) stays on its affinity pick while the
// pick is within 3x of the tier's fastest, and moves, for good, when it is
// not.
func TestRoutingAffinityBound(t *testing.T) {
	const base = 100 * time.Millisecond
	a, b := newUpstream(t, sim.Config{FirstToken: caddyDur(base)}), newUpstream(t, sim.Config{FirstToken: caddyDur(base)})
	ups := []*upstream{a, b}
	p := startProxy(t, provider("a", a, "vendor a")+provider("b", b, "vendor b")+"hedge off\n")
	session := anthropicClient(p, "k")
	keyless := anthropicClient(p, "k")
	turn := func(c *anthropic.Client, opts ...aoption.RequestOption) int {
		t.Helper()
		before := []int{completions(a), completions(b)}
		stream := c.Messages.NewStreaming(ctxTimeout(t, 30*time.Second), anthropicParams("claude-test"), opts...)
		for stream.Next() {
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		stream.Close()
		for i, u := range ups {
			if completions(u) > before[i] {
				return i
			}
		}
		t.Fatal("no provider served the turn")
		return -1
	}
	header := aoption.WithHeader("X-Claude-Code-Session-Id", "3f1c0a4e-routing-session")
	pick := turn(session, header)
	other := 1 - pick
	slow := func(d time.Duration) {
		cfg := ups[pick].Config()
		cfg.FirstToken = caddyDur(d)
		if err := ups[pick].SetConfig(cfg); err != nil {
			t.Fatal(err)
		}
	}
	// Within the bound: 2x slower than the other, measured by keyless
	// traffic (which adaptive routing sends to the faster other).
	slow(2 * base)
	for i := range 8 {
		if got := turn(session, header); got != pick {
			t.Fatalf("turn %d at 2x the fastest went to %d, want the affinity pick %d", i, got, pick)
		}
		turn(keyless)
	}
	// Beyond it: 10x. The session's own turns raise the pick's estimate
	// until it is over 3x, then it moves and stays.
	slow(10 * base)
	moved := -1
	for i := range 10 {
		turn(keyless)
		if turn(session, header) == other {
			moved = i
			break
		}
	}
	if moved < 0 {
		t.Fatal("the session never left a pick 10x slower than the tier's fastest")
	}
	slow(base) // the old pick recovers: the session stays where its cache is now
	for i := range 5 {
		if got := turn(session, header); got != other {
			t.Fatalf("turn %d after the move went to %d, want the remembered %d", i, got, other)
		}
	}
	found := false
	for _, e := range routeEntries(t, p, 1) {
		if e["reason"] == "affinity_moved" {
			found = true
			if e["moved_from"] != []string{"a", "b"}[pick] || e["pick"] != []string{"a", "b"}[other] {
				t.Errorf("the move's route entry %v does not name the pick it left and the one it took", e)
			}
		}
	}
	if !found {
		t.Errorf("no affinity_moved route entry in the log")
	}
}

// routeEntries returns the route objects of the decision chains of the
// request log lines (on each first attempt), once there are at least n
// lines.
func routeEntries(t *testing.T, p *proxy, n int) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range logLines(t, p, "llm request", n) {
		chain, _ := l["chain"].([]any)
		for _, e := range chain {
			if m, ok := e.(map[string]any); ok {
				if r, ok := m["route"].(map[string]any); ok {
					out = append(out, r)
				}
			}
		}
	}
	return out
}
