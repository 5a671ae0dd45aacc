package llmhedge

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/dashboard"
	"github.com/llmhedge/caddy-llm-hedge/internal/engine"
	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// What the dashboard costs the request path: finish() of a two-attempt
// request alone ("idle") and while a reader polls /recent and /series
// every 10 ms ("polling", 200 times the page's rate; a reader spinning
// flat out would only measure the CPU it takes from a 2-core machine).
// Compare side by side:
//
//	go test -run '^$' -bench BenchmarkDashboardFinish -benchmem -count 6 .
func BenchmarkDashboardFinish(b *testing.B) {
	for _, polling := range []bool{false, true} {
		name := "idle"
		if polling {
			name = "polling"
		}
		b.Run(name, func(b *testing.B) {
			h := observeBenchHandler(b, sim.Config{}, true)
			r := observeBenchRequest(nil)
			var stop atomic.Bool
			var wg sync.WaitGroup
			if polling {
				tick := time.NewTicker(10 * time.Millisecond)
				defer tick.Stop()
				wg.Go(func() {
					for range tick.C {
						if stop.Load() {
							return
						}
						for _, path := range []string{"/llm_hedge/recent", "/llm_hedge/series"} {
							rec := httptest.NewRecorder()
							_, _ = serveDashboard(rec, httptest.NewRequest(http.MethodGet, path, nil), nil, nil)
						}
					}
				})
			}
			for b.Loop() {
				engine.FinishTwoAttempts(h.engine, r, true)
			}
			stop.Store(true)
			wg.Wait()
		})
	}
}

// The dashboard's admin answers with 100 providers, a full ring and full
// series (the bound is 5 ms each; a benchmark, not a test, since
// tests assert no timings):
//
//	go test -run '^$' -bench BenchmarkDashboardAdmin100 -benchmem .
func BenchmarkDashboardAdmin100(b *testing.B) {
	now := time.Now()
	for i := range 100 {
		name, url := fmt.Sprintf("benchdash-%03d", i), fmt.Sprintf("https://p%03d.bench.test", i)
		if _, err := loadHealth(name, url, "sim"); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { releaseHealth(name, url) })
		for s := range dashboard.Buckets {
			board.Series.RecordAttempt(name, now.Add(-time.Duration(s)*dashboard.Step), dashboard.OutcomeOK, 120*time.Millisecond)
		}
	}
	for range dashboard.RecentSize {
		board.Recent.Record(dashboard.Request{Time: now, Site: "bench", Model: "claude-bench", Provider: "benchdash-000",
			Attempts: 2, Chain: []dashboard.Attempt{{Provider: "benchdash-000"}, {Provider: "benchdash-001"}}})
	}
	for _, path := range []string{"/llm_hedge/providers", "/llm_hedge/recent", "/llm_hedge/series"} {
		b.Run(path[len("/llm_hedge/"):], func(b *testing.B) {
			for b.Loop() {
				rec := httptest.NewRecorder()
				if err := (adminProviders{}).serveAdmin(rec, httptest.NewRequest(http.MethodGet, path, nil)); err != nil || rec.Code != http.StatusOK {
					b.Fatalf("%s: %d %v", path, rec.Code, err)
				}
			}
		})
	}
}
