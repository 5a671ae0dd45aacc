package engine

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/health"
)

var hedgeEpoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestHedgeDelay(t *testing.T) {
	const (
		lo = 500 * time.Millisecond
		hi = 8 * time.Second
	)
	withSamples := func(d time.Duration, n int) *health.LatencyTracker {
		tr := health.NewLatencyTracker()
		for range n {
			tr.Observe(0, d, hedgeEpoch)
		}
		return tr
	}
	tests := []struct {
		name     string
		tr       *health.LatencyTracker
		fixed    time.Duration
		pct      float64
		min, max time.Duration
		want     time.Duration
	}{
		{"fixed wins", withSamples(3*time.Second, 100), 1500 * time.Millisecond, 90, lo, hi, 1500 * time.Millisecond},
		{"percentile", withSamples(3*time.Second, 100), 0, 90, lo, hi, 3 * time.Second},
		{"19 samples: bootstrap max/4", withSamples(3*time.Second, 19), 0, 90, lo, hi, 2 * time.Second},
		{"20 samples: learnt", withSamples(3*time.Second, 20), 0, 90, lo, hi, 3 * time.Second},
		{"no tracker: bootstrap", nil, 0, 90, lo, hi, 2 * time.Second},
		{"clamped to min", withSamples(50*time.Millisecond, 100), 0, 90, lo, hi, lo},
		{"clamped to max", withSamples(20*time.Second, 100), 0, 90, lo, hi, hi},
		{"bootstrap clamped to min", nil, 0, 90, lo, time.Second, lo},
		{"no max: unclamped above", withSamples(20*time.Second, 100), 0, 90, lo, 0, 20 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := hedgeDelay(tt.tr, 0, tt.fixed, tt.pct, tt.min, tt.max, hedgeEpoch)
			if got != tt.want {
				t.Errorf("hedgeDelay = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestLatencyConcurrent(t *testing.T) {
	tr := health.NewLatencyTracker()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 0))
			for i := range 3000 {
				now := hedgeEpoch.Add(time.Duration(i) * 200 * time.Millisecond)
				tr.Observe(g%3, time.Duration(rng.IntN(1000))*time.Millisecond, now)
				hedgeDelay(tr, g%3, 0, 90, 0, 8*time.Second, now)
				tr.Overall(0.5, now)
			}
		})
	}
	wg.Wait()
	if d, ok := tr.Overall(0.9, hedgeEpoch.Add(600*time.Second)); !ok || (d-900*time.Millisecond).Abs() > 50*time.Millisecond {
		t.Errorf("overall p90 = %v (ok %v), want about 900ms", d, ok)
	}
}

func BenchmarkHedgeDelay(b *testing.B) {
	tr := health.NewLatencyTracker()
	rng := rand.New(rand.NewPCG(1, 1))
	for range 1500 {
		tr.Observe(4, time.Duration(rng.IntN(1000))*time.Millisecond, hedgeEpoch)
	}
	b.ReportAllocs()
	for b.Loop() {
		hedgeDelay(tr, 4, 0, 90, 500*time.Millisecond, 8*time.Second, hedgeEpoch)
	}
}

func BenchmarkHedgeDelayWithTraffic(b *testing.B) {
	tr := health.NewLatencyTracker()
	rng := rand.New(rand.NewPCG(1, 1))
	b.ReportAllocs()
	for b.Loop() {
		tr.Observe(4, time.Duration(rng.IntN(1000))*time.Millisecond, hedgeEpoch)
		hedgeDelay(tr, 4, 0, 90, 500*time.Millisecond, 8*time.Second, hedgeEpoch)
	}
}
