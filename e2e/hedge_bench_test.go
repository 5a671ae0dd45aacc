package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// hedgeTailRequests and hedgeTailConcurrency size the tail benchmark: 300
// streams, 30 at a time, keep one configuration under ~10 s unhedged.
const (
	hedgeTailRequests    = 300
	hedgeTailConcurrency = 30
)

// BenchmarkHedgeTail measures what hedging does to the tail: two providers
// of different vendors whose first token comes after 100 ms for 90% of
// requests and 5 s for the other 10%, 300 streaming requests, with and
// without hedging. It reports the client's time to its first content event
// (p50/p95/p99, nearest rank) and upstream attempts per request. It is a
// measurement, not a pass/fail test: run it with
//
//	go test -run '^$' -bench BenchmarkHedgeTail -benchtime 1x .
func BenchmarkHedgeTail(b *testing.B) {
	for _, tc := range []struct {
		name, block string
		providers   int
	}{
		{"off", "hedge off\n", 2},
		{"after=300ms", "hedge {\n after 300ms\n }\n", 2},
		// The default adaptive delay: bootstrap max/4 = 2 s until a
		// provider has 20 samples, then p90 clamped to [500ms, 8s].
		{"after=p90", "hedge {\n after p90\n }\n", 2},
		// A tighter clamp: bootstrap 250ms, floor 150ms.
		{"after=p90,min=150ms,max=1s", "hedge {\n after p90\n min 150ms\n max 1s\n }\n", 2},
		// Not the acceptance setup: with two providers 1% of requests find
		// both slow, which is exactly the p99 mass; a third provider (and
		// max_attempts 3) shows the tail that is left is that 1%.
		{"after=300ms,3providers,max_attempts=3", "hedge {\n after 300ms\n max_attempts 3\n }\n", 3},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cfg := sim.Config{FirstToken: caddyDur(100 * time.Millisecond), SlowPercent: 10, SlowFirstToken: caddyDur(5 * time.Second)}
			var ups []*upstream
			block := ""
			for i := range tc.providers {
				ups = append(ups, newUpstream(b, cfg))
				block += provider(fmt.Sprintf("p%d", i), ups[i], fmt.Sprintf("vendor v%d", i))
			}
			p := startProxy(b, block+tc.block)
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: hedgeTailConcurrency}}
			defer client.CloseIdleConnections()

			var ttfe []time.Duration
			requests := 0
			for b.Loop() {
				d, err := hedgeTailRun(p, client, hedgeTailRequests, hedgeTailConcurrency)
				if err != nil {
					b.Fatal(err)
				}
				ttfe = append(ttfe, d...)
				requests += hedgeTailRequests
			}
			attempts := 0
			for _, u := range ups {
				if err := u.WaitIdle(ctxTimeout(b, 10*time.Second)); err != nil {
					b.Fatal(err)
				}
				attempts += completions(u)
			}
			slices.Sort(ttfe)
			p50, p95, p99 := hedgeRank(ttfe, 0.50), hedgeRank(ttfe, 0.95), hedgeRank(ttfe, 0.99)
			slow := len(ttfe) - hedgeCountBelow(ttfe, time.Second)
			b.ReportMetric(hedgeMs(p50), "p50_ms")
			b.ReportMetric(hedgeMs(p95), "p95_ms")
			b.ReportMetric(hedgeMs(p99), "p99_ms")
			b.ReportMetric(float64(attempts)/float64(requests), "attempts/req")
			b.ReportMetric(float64(slow), "over1s_reqs")
			b.Logf("%s: %d requests: p50 %v p95 %v p99 %v max %v; %d upstream attempts (%.1f%% extra); %d requests over 1s",
				tc.name, requests, p50.Round(time.Millisecond), p95.Round(time.Millisecond), p99.Round(time.Millisecond),
				ttfe[len(ttfe)-1].Round(time.Millisecond), attempts, 100*float64(attempts-requests)/float64(requests), slow)
		})
	}
}

func hedgeMs(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// hedgeRank is the nearest-rank q-quantile of sorted durations.
func hedgeRank(sorted []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// hedgeCountBelow counts the durations below d in sorted.
func hedgeCountBelow(sorted []time.Duration, d time.Duration) int {
	i, _ := slices.BinarySearch(sorted, d)
	return i
}

// hedgeTailRun sends n streaming requests, c at a time, and returns each
// one's time from sending to its first content event.
func hedgeTailRun(p *proxy, client *http.Client, n, c int) ([]time.Duration, error) {
	jobs := make(chan struct{}, n)
	for range n {
		jobs <- struct{}{}
	}
	close(jobs)
	var mu sync.Mutex
	var out []time.Duration
	var firstErr error
	var wg sync.WaitGroup
	for range c {
		wg.Go(func() {
			for range jobs {
				d, err := hedgeFirstEvent(p, client)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				out = append(out, d)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return out, firstErr
}

// hedgeFirstEvent streams one Anthropic message and returns the time to its
// first content_block_delta; it reads the stream to its end.
func hedgeFirstEvent(p *proxy, client *http.Client) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.URL+"/v1/messages", strings.NewReader(hedgeAnthropicBody))
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return 0, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	var first time.Duration
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if first == 0 && sc.Text() == "event: content_block_delta" {
			first = time.Since(start)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if first == 0 {
		return 0, fmt.Errorf("stream without content")
	}
	return first, nil
}

// BenchmarkHedgeNoFire compares the request path with hedging on but never
// firing (the delay is a minute; the spare provider must see nothing) to
// `hedge off`: both run the same race loop, the hedged one only arms and
// stops a timer. Run with -benchmem; compare ns/op and allocs/op.
func BenchmarkHedgeNoFire(b *testing.B) {
	for _, tc := range []struct{ name, block string }{
		{"hedge=on", "hedge {\n after 1m\n }\n"},
		{"hedge=off", "hedge off\n"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			primary, spare := newUpstream(b, sim.Config{}), newUpstream(b, sim.Config{})
			p := startProxy(b, provider("primary", primary, "priority 0")+provider("spare", spare, "priority 1")+tc.block)
			client := &http.Client{Transport: &http.Transport{}}
			defer client.CloseIdleConnections()
			b.ReportAllocs()
			for b.Loop() {
				req, _ := http.NewRequest(http.MethodPost, p.URL+"/v1/messages", strings.NewReader(hedgeAnthropicBody))
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d, %v", resp.StatusCode, err)
				}
			}
			b.StopTimer()
			if n := completions(spare); n != 0 {
				b.Fatalf("the hedge fired %d times; this benchmark is of the path that never hedges", n)
			}
		})
	}
}
