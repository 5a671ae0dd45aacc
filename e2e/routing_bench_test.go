package e2e

import (
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/engine"
	"github.com/llmhedge/caddy-llm-hedge/internal/routing"
)

// routeBenchRequests and routeBenchConcurrency size the routing cells:
// 1,000 streams, 16 at a time.
const (
	routeBenchRequests    = 1000
	routeBenchConcurrency = 16
)

// BenchmarkRoutingTier measures routing within one tier of three providers
// whose first tokens take about 100, 300 and 900 ms (20% jitter), with the
// default hedging: an oracle that always tries the fastest first
// (lb_policy first, the fastest written first), adaptive (the default) and
// weighted_random. It reports the client's time to its first content
// event (p50/p99, nearest rank), the hedges' share of upstream attempts
// and the fastest provider's share. A measurement, not a pass/fail test:
//
//	go test -run '^$' -bench BenchmarkRoutingTier -benchtime 1x .
func BenchmarkRoutingTier(b *testing.B) {
	for _, tc := range []struct {
		name, block string
		pick        func(costs, weights []float64, measured bool, u, v, x float64) (int, string)
	}{
		{"oracle", "lb_policy first\n", nil},
		{"adaptive", "", nil},
		{"p2c", "", pickTwo}, // adaptive's cost, power of two choices instead of the full scan
		{"weighted_random", "lb_policy weighted_random\n", nil},
	} {
		b.Run(tc.name, func(b *testing.B) {
			if tc.pick != nil {
				defer engine.SetRoutePick(tc.pick)()
			}
			p, ups := routingTier(b, 100*time.Millisecond, tc.block)
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: routeBenchConcurrency}}
			defer client.CloseIdleConnections()
			var ttfe []time.Duration
			requests := 0
			for b.Loop() {
				d, err := hedgeTailRun(p, client, routeBenchRequests, routeBenchConcurrency)
				if err != nil {
					b.Fatal(err)
				}
				ttfe = append(ttfe, d...)
				requests += routeBenchRequests
			}
			var per [3]int
			attempts := 0
			for i, u := range ups {
				if err := u.WaitIdle(ctxTimeout(b, 10*time.Second)); err != nil {
					b.Fatal(err)
				}
				per[i] = completions(u)
				attempts += per[i]
			}
			slices.Sort(ttfe)
			p50, p99 := hedgeRank(ttfe, 0.50), hedgeRank(ttfe, 0.99)
			hedgeShare := float64(attempts-requests) / float64(attempts)
			b.ReportMetric(hedgeMs(p50), "p50_ms")
			b.ReportMetric(hedgeMs(p99), "p99_ms")
			b.ReportMetric(100*hedgeShare, "hedge_%")
			b.ReportMetric(100*float64(per[0])/float64(attempts), "fast_%")
			b.Logf("%s: %d requests: p50 %v p99 %v max %v; %d attempts (fast/mid/slow %d/%d/%d), hedges %.1f%% of attempts",
				tc.name, requests, p50.Round(time.Millisecond), p99.Round(time.Millisecond), ttfe[len(ttfe)-1].Round(time.Millisecond),
				attempts, per[0], per[1], per[2], 100*hedgeShare)
		})
	}
}

// pickTwo is power of two choices over the adaptive cost (Finagle's and
// Linkerd's balancer): two distinct providers drawn at random, the lower
// cost first; no exploration share (the draw explores). Before anything
// is measured it picks by weight, as routing.Pick does.
func pickTwo(costs, weights []float64, measured bool, u, v, x float64) (int, string) {
	n := len(costs)
	if n < 2 || !measured {
		return routing.Pick(costs, weights, measured, u, v, x)
	}
	i := min(int(u*float64(n)), n-1)
	j := min(int(v*float64(n-1)), n-2)
	if j >= i {
		j++
	}
	if costs[j] < costs[i] {
		i = j
	}
	return i, "p2c"
}

// BenchmarkRoutingShift runs the adaptive tier of BenchmarkRoutingTier
// under a steady load of 16 streams at a time: after 10 s the fastest
// provider turns 5x slower (500 ms, now slower than the 300 ms one), 20 s
// later it recovers. It reports how long after each change the majority of
// the attempts started within a second went to the provider that was then
// fastest (the simulators' own records of when each attempt arrived):
//
//	go test -run '^$' -bench BenchmarkRoutingShift -benchtime 1x .
func BenchmarkRoutingShift(b *testing.B) {
	const base = 100 * time.Millisecond
	const warm, slow, recovered = 10 * time.Second, 20 * time.Second, 40 * time.Second
	for b.Loop() {
		p, ups := routingTier(b, base, "")
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: routeBenchConcurrency}}
		var stop atomic.Bool
		var wg sync.WaitGroup
		var mu sync.Mutex
		var errs []error
		type sample struct {
			at time.Time
			d  time.Duration
		}
		var samples []sample
		for range routeBenchConcurrency {
			wg.Go(func() {
				for !stop.Load() {
					at := time.Now()
					d, err := hedgeFirstEvent(p, client)
					mu.Lock()
					if err != nil {
						errs = append(errs, err)
					}
					samples = append(samples, sample{at, d})
					mu.Unlock()
				}
			})
		}
		setFirstToken := func(d time.Duration) time.Time {
			cfg := ups[0].Config()
			cfg.FirstToken = caddyDur(d)
			if err := ups[0].SetConfig(cfg); err != nil {
				b.Fatal(err)
			}
			return time.Now()
		}
		time.Sleep(warm)
		slowAt := setFirstToken(5 * base)
		time.Sleep(slow)
		backAt := setFirstToken(base)
		time.Sleep(recovered)
		stop.Store(true)
		wg.Wait()
		client.CloseIdleConnections()
		if len(errs) > 0 {
			b.Fatalf("%d requests failed, the first: %v", len(errs), errs[0])
		}
		moved := routeMoveTime(ups, slowAt, backAt, 1)
		back := routeMoveTime(ups, backAt, time.Now(), 0)
		b.ReportMetric(moved.Seconds(), "move_s")
		b.ReportMetric(back.Seconds(), "move_back_s")
		b.Logf("slowed: traffic moved to mid in %v; recovered: back to fast in %v", moved.Round(100*time.Millisecond), back.Round(100*time.Millisecond))
		for _, w := range []struct {
			name     string
			from, to time.Time
		}{{"before", slowAt.Add(-5 * time.Second), slowAt}, {"slowed", slowAt.Add(10 * time.Second), backAt},
			{"recovered", backAt.Add(30 * time.Second), backAt.Add(recovered)}} {
			s := routeSharesBetween(ups, w.from, w.to)
			var ds []time.Duration
			for _, x := range samples {
				if !x.at.Before(w.from) && x.at.Before(w.to) {
					ds = append(ds, x.d)
				}
			}
			slices.Sort(ds)
			b.Logf("%s (last %v of the phase): fast/mid/slow %.0f%%/%.0f%%/%.0f%% of attempts; %d requests, first content p50 %v p99 %v",
				w.name, w.to.Sub(w.from).Round(time.Second), 100*s[0], 100*s[1], 100*s[2],
				len(ds), hedgeRank(ds, 0.5).Round(time.Millisecond), hedgeRank(ds, 0.99).Round(time.Millisecond))
		}
	}
}

// routeSharesBetween is each upstream's share of the attempts it started
// within [from, to).
func routeSharesBetween(ups [3]*upstream, from, to time.Time) [3]float64 {
	var n [3]float64
	total := 0.0
	for i, u := range ups {
		for _, r := range u.Requests() {
			if r.Path == "/v1/messages" && !r.Start.Before(from) && r.Start.Before(to) {
				n[i]++
				total++
			}
		}
	}
	for i := range n {
		if total > 0 {
			n[i] /= total
		}
	}
	return n
}

// routeMoveTime is how long after from the attempts started within a
// second first went mostly (over half) to upstream want; until-from when
// they never did.
func routeMoveTime(ups [3]*upstream, from, until time.Time, want int) time.Duration {
	for at := from.Add(time.Second); at.Before(until); at = at.Add(100 * time.Millisecond) {
		if s := routeSharesBetween(ups, at.Add(-time.Second), at); s[want] > 0.5 {
			return at.Sub(from)
		}
	}
	return until.Sub(from)
}
