package health

import (
	"math/rand/v2"
	"testing"
	"time"
)

var latencyEpoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestSizeClass(t *testing.T) {
	tests := []struct {
		bytes int
		want  int
	}{
		{-5, 0}, {0, 0}, {1023, 0}, {1024, 1}, {2047, 1}, {2048, 2},
		{100 << 10, 7}, {1 << 20, 11}, {32<<20 - 1, 15}, {32 << 20, 16}, {1 << 40, 16},
	}
	for _, tt := range tests {
		if got := SizeClass(tt.bytes); got != tt.want {
			t.Errorf("sizeClass(%d) = %d, want %d", tt.bytes, got, tt.want)
		}
	}
}

// latencyFeed observes the given durations in a seeded random order, all at now.
func latencyFeed(tr *LatencyTracker, class int, ds []time.Duration, now time.Time, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed))
	rng.Shuffle(len(ds), func(i, j int) { ds[i], ds[j] = ds[j], ds[i] })
	for _, d := range ds {
		tr.Observe(class, d, now)
	}
}

func latencyRepeat(d time.Duration, n int) []time.Duration {
	ds := make([]time.Duration, n)
	for i := range ds {
		ds[i] = d
	}
	return ds
}

func TestLatencyQuantileConverges(t *testing.T) {
	uniform := make([]time.Duration, 1000)
	for i := range uniform {
		uniform[i] = time.Duration(i) * time.Millisecond
	}
	tests := []struct {
		name      string
		samples   []time.Duration
		q         float64
		want, tol time.Duration
	}{
		{"uniform p90", uniform, 0.9, 900 * time.Millisecond, 30 * time.Millisecond},
		{"uniform p50", uniform, 0.5, 500 * time.Millisecond, 50 * time.Millisecond},
		{"uniform p99", uniform, 0.99, 990 * time.Millisecond, 10 * time.Millisecond},
		{"uniform p75, not a default target", uniform, 0.75, 750 * time.Millisecond, 40 * time.Millisecond},
		{"95% fast: p90 is the fast mode", append(latencyRepeat(100*time.Millisecond, 950), latencyRepeat(5*time.Second, 50)...), 0.9, 100 * time.Millisecond, 0},
		{"80% fast: p90 is the stall", append(latencyRepeat(100*time.Millisecond, 800), latencyRepeat(5*time.Second, 200)...), 0.9, 5 * time.Second, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewLatencyTracker()
			latencyFeed(tr, 3, append([]time.Duration(nil), tt.samples...), latencyEpoch, 42)
			got, n := tr.Quantile(3, tt.q, latencyEpoch)
			if n != len(tt.samples) {
				t.Errorf("sample count %d, want %d", n, len(tt.samples))
			}
			if diff := (got - tt.want).Abs(); diff > tt.tol {
				t.Errorf("q%.2f = %v, want %v ± %v", tt.q, got, tt.want, tt.tol)
			}
		})
	}
}

func TestLatencyLongStreamFollowsRecentTraffic(t *testing.T) {
	// 5000 samples at one instant: count rotations keep 1000–2000 of them,
	// and the estimate stays accurate across perks' buffer flushes.
	tr := NewLatencyTracker()
	rng := rand.New(rand.NewPCG(1, 1))
	for range 5000 {
		tr.Observe(0, time.Duration(rng.IntN(1000))*time.Millisecond, latencyEpoch)
	}
	got, n := tr.Quantile(0, 0.9, latencyEpoch)
	if n < 1000 || n > 2000 {
		t.Errorf("window holds %d samples, want 1000–2000", n)
	}
	if (got - 900*time.Millisecond).Abs() > 30*time.Millisecond {
		t.Errorf("p90 = %v, want 900ms ± 30ms", got)
	}
	// A provider that slows down is followed within two rotations.
	for range 2000 {
		tr.Observe(0, 3*time.Second+time.Duration(rng.IntN(1000))*time.Millisecond, latencyEpoch)
	}
	if got, _ := tr.Quantile(0, 0.5, latencyEpoch); got < 3*time.Second {
		t.Errorf("after the slowdown p50 = %v, want >= 3s", got)
	}
}

func TestLatencyWindowForgetsOldSamples(t *testing.T) {
	tr := NewLatencyTracker()
	t0 := latencyEpoch
	latencyFeed(tr, 0, latencyRepeat(5*time.Second, 100), t0, 1)
	t1 := t0.Add(latencyRotateEvery + time.Second)
	latencyFeed(tr, 0, latencyRepeat(100*time.Millisecond, 100), t1, 2)
	if _, n := tr.Quantile(0, 0.9, t1); n != 200 {
		t.Errorf("one rotation later the window holds %d samples, want both periods' 200", n)
	}
	t2 := t1.Add(latencyRotateEvery + time.Second)
	got, n := tr.Quantile(0, 0.9, t2)
	if n != 100 || got != 100*time.Millisecond {
		t.Errorf("two rotations later: p90 = %v over %d samples, want 100ms over the recent 100", got, n)
	}
	if got, n := tr.Quantile(0, 0.9, t2.Add(2*latencyRotateEvery)); n != 0 || got != 0 {
		t.Errorf("after two idle periods: p90 = %v over %d samples, want nothing", got, n)
	}
}

func TestLatencySeparatesSizeClasses(t *testing.T) {
	tr := NewLatencyTracker()
	small, large := SizeClass(2<<10), SizeClass(300<<10)
	latencyFeed(tr, small, latencyRepeat(200*time.Millisecond, 50), latencyEpoch, 1)
	latencyFeed(tr, large, latencyRepeat(4*time.Second, 50), latencyEpoch, 2)
	if got, _ := tr.Quantile(small, 0.9, latencyEpoch); got != 200*time.Millisecond {
		t.Errorf("small prompts p90 = %v, want 200ms", got)
	}
	if got, _ := tr.Quantile(large, 0.9, latencyEpoch); got != 4*time.Second {
		t.Errorf("large prompts p90 = %v, want 4s", got)
	}
	if _, n := tr.Quantile(small+1, 0.9, latencyEpoch); n != 0 {
		t.Errorf("an unused class has %d samples", n)
	}
	p50, ok := tr.Overall(0.5, latencyEpoch)
	p95, _ := tr.Overall(0.95, latencyEpoch)
	if !ok || p50 != 200*time.Millisecond || p95 != 4*time.Second {
		t.Errorf("overall p50 = %v, p95 = %v (ok %v), want 200ms and 4s", p50, p95, ok)
	}
	if _, ok := NewLatencyTracker().Overall(0.5, latencyEpoch); ok {
		t.Error("overall of an empty tracker reports ok")
	}
	// Out-of-range classes are clamped, not a panic.
	tr.Observe(-1, time.Second, latencyEpoch)
	tr.Observe(99, time.Second, latencyEpoch)
	if _, n := tr.Quantile(99, 0.9, latencyEpoch); n != 1 {
		t.Errorf("class 99 went to class %d with %d samples", maxSizeClass, n)
	}
}

func TestLatencyLearnsNewTargets(t *testing.T) {
	tr := NewLatencyTracker()
	tr.Observe(0, time.Second, latencyEpoch)
	tr.Quantile(0, 0.8, latencyEpoch)
	if !tr.targets.Load().has(0.8) {
		t.Fatal("p80 was not added to the targets")
	}
	// After two rotations the queried stream is built for it.
	for i := 1; i <= 2; i++ {
		tr.Observe(0, time.Second, latencyEpoch.Add(time.Duration(i)*(latencyRotateEvery+time.Second)))
	}
	w := tr.windows[0].Load()
	if !w.builtWith[w.older].has(0.8) {
		t.Error("the queried stream still lacks the p80 target")
	}
	for _, q := range []float64{0, 1, -3, 7} {
		tr.Quantile(0, q, latencyEpoch)
	}
	if n := len(tr.targets.Load().qs); n != 5 {
		t.Errorf("%d targets after out-of-range queries, want 5", n)
	}
}

func BenchmarkLatencyObserve(b *testing.B) {
	tr := NewLatencyTracker()
	rng := rand.New(rand.NewPCG(1, 1))
	now := latencyEpoch
	b.ReportAllocs()
	for b.Loop() {
		tr.Observe(4, time.Duration(rng.IntN(1000))*time.Millisecond, now)
	}
}

// BenchmarkHedgeDelayWithTraffic is the request path: one observation and
// one hedge delay per request, so the cached quantile keeps being refreshed.
