package llmhedge

import (
	"fmt"
	"maps"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/beorn7/perks/quantile"
)

const (
	// maxSizeClass is the class of bodies of 32 MiB and more (the default
	// max_body); class c holds bodies of [2^(c-1), 2^c) KiB, class 0 < 1 KiB.
	maxSizeClass = 16
	// overallClass is the extra window that sees every class, for the admin view.
	overallClass = maxSizeClass + 1

	// A window is two streams; the younger is restarted as the older is
	// dropped every latencyRotateEvery or latencyRotateSamples samples,
	// whichever comes first. Quantiles come from the older one, so they cover
	// the last 1000–2000 samples on a busy provider (recent enough to follow
	// it when it slows down) and the last 5–10 minutes on a quiet one (long
	// enough to collect the 20 samples a percentile needs).
	latencyRotateEvery   = 5 * time.Minute
	latencyRotateSamples = 1000

	// hedgeMinSamples is how many samples a class needs before its percentile
	// is trusted; below it the hedge delay is the bootstrap max/4.
	hedgeMinSamples = 20

	maxLatencyTargets = 8
)

// sizeClass buckets a request body by log2 of its size in KiB: time to first
// token grows with the prompt, so a 200 KiB prompt must not be hedged on the
// delay learnt from 1 KiB ones.
func sizeClass(bodyBytes int) int {
	if bodyBytes <= 0 {
		return 0
	}
	return min(bits.Len(uint(bodyBytes)>>10), maxSizeClass)
}

// latencyTracker estimates recent quantiles of one provider's time to first
// valid event, per size class. It holds only mutexes and counters (no
// goroutine, no timer), so it can live in shared state across config reloads.
// Safe for concurrent use.
type latencyTracker struct {
	targets atomic.Pointer[latencyTargets]
	windows [overallClass + 1]atomic.Pointer[latencyWindow]
	// lastHedgeDelay is the hedge delay last armed after a first attempt
	// on this provider, in nanoseconds (0: none yet), for the dashboard.
	lastHedgeDelay atomic.Int64
}

// latencyTargets is an immutable set of quantiles the streams are built to
// answer precisely; perks' targeted streams give unspecified results for
// other quantiles, so a newly asked one is added and used from the next
// rotation on.
type latencyTargets struct {
	qs  []float64
	eps map[float64]float64
}

func (ts *latencyTargets) has(q float64) bool {
	for _, t := range ts.qs {
		if math.Abs(t-q) < 1e-9 {
			return true
		}
	}
	return false
}

func newLatencyTracker() *latencyTracker {
	t := &latencyTracker{}
	// The usual hedge percentiles and the admin view's p50/p95, with
	// Prometheus' summary errors.
	t.targets.Store(&latencyTargets{
		qs:  []float64{0.5, 0.9, 0.95, 0.99},
		eps: map[float64]float64{0.5: 0.05, 0.9: 0.01, 0.95: 0.005, 0.99: 0.001},
	})
	return t
}

// observe records the time to first valid event of an attempt. Cancelled
// losers are recorded too, with their elapsed time, or the slow tail that
// hedging cut short would vanish from the estimate.
func (t *latencyTracker) observe(sizeClass int, d time.Duration, now time.Time) {
	if d < 0 {
		d = 0
	}
	targets := t.targets.Load()
	t.window(clampClass(sizeClass)).insert(float64(d), now, targets)
	t.window(overallClass).insert(float64(d), now, targets)
}

// quantile returns the q-quantile (0 < q < 1) of the class's recent window
// and the number of samples in it; (0, 0) when there are none.
func (t *latencyTracker) quantile(sizeClass int, q float64, now time.Time) (time.Duration, int) {
	return t.query(clampClass(sizeClass), q, now)
}

// overall returns the q-quantile over all size classes; false when empty.
func (t *latencyTracker) overall(q float64, now time.Time) (time.Duration, bool) {
	d, n := t.query(overallClass, q, now)
	return d, n > 0
}

func (t *latencyTracker) query(class int, q float64, now time.Time) (time.Duration, int) {
	q = min(max(q, 0), 1)
	targets := t.want(q)
	w := t.windows[class].Load()
	if w == nil {
		return 0, 0
	}
	v, n := w.query(q, now, targets)
	return time.Duration(v), n
}

// want makes sure q is among the targets and returns the current set.
func (t *latencyTracker) want(q float64) *latencyTargets {
	for {
		cur := t.targets.Load()
		if q <= 0 || q >= 1 || cur.has(q) || len(cur.qs) >= maxLatencyTargets {
			return cur
		}
		next := &latencyTargets{qs: append(cur.qs[:len(cur.qs):len(cur.qs)], q), eps: maps.Clone(cur.eps)}
		// Tighter error for the tail: p99 gets 0.001 like Prometheus'.
		next.eps[q] = min(max((1-q)/10, 0.0005), 0.01)
		if t.targets.CompareAndSwap(cur, next) {
			return next
		}
	}
}

func (t *latencyTracker) window(class int) *latencyWindow {
	if w := t.windows[class].Load(); w != nil {
		return w
	}
	w := newLatencyWindow(t.targets.Load())
	if t.windows[class].CompareAndSwap(nil, w) {
		return w
	}
	return t.windows[class].Load()
}

func clampClass(c int) int {
	return min(max(c, 0), maxSizeClass)
}

// latencyWindow is a recent-window quantile estimator made of two streams,
// rotated like the age buckets of a Prometheus summary. Queries are cached
// and recomputed only after the window changed by more than 1/64 of its
// samples, so the hot path neither sorts nor allocates per request.
type latencyWindow struct {
	mu         sync.Mutex
	streams    [2]*quantile.Stream
	builtWith  [2]*latencyTargets
	older      int // index of the older stream, the one queried
	youngStart time.Time
	started    bool
	gen        uint64 // bumped on every rotation, invalidates the cache
	cache      [4]latencyCached
	nextCache  int
}

type latencyCached struct {
	q     float64
	value float64
	count int
	gen   uint64
	valid bool
}

func newLatencyWindow(targets *latencyTargets) *latencyWindow {
	w := &latencyWindow{}
	for i := range w.streams {
		w.streams[i] = quantile.NewTargeted(targets.eps)
		w.builtWith[i] = targets
	}
	return w
}

func (w *latencyWindow) insert(v float64, now time.Time, targets *latencyTargets) {
	w.mu.Lock()
	w.rotate(now, targets)
	w.streams[0].Insert(v)
	w.streams[1].Insert(v)
	w.mu.Unlock()
}

func (w *latencyWindow) query(q float64, now time.Time, targets *latencyTargets) (float64, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.rotate(now, targets)
	s := w.streams[w.older]
	n := s.Count()
	if n == 0 {
		return 0, 0
	}
	for i := range w.cache {
		c := &w.cache[i]
		if c.valid && c.q == q && c.gen == w.gen && n-c.count <= c.count>>6 {
			return c.value, n
		}
	}
	v := s.Query(q)
	w.cache[w.nextCache] = latencyCached{q: q, value: v, count: n, gen: w.gen, valid: true}
	w.nextCache = (w.nextCache + 1) % len(w.cache)
	return v, n
}

// rotate drops the older stream when the younger one has seen enough time or
// samples; after two idle periods both are dropped, so the window never holds
// samples older than 2 × latencyRotateEvery.
func (w *latencyWindow) rotate(now time.Time, targets *latencyTargets) {
	if !w.started {
		w.started, w.youngStart = true, now
		return
	}
	young := 1 - w.older
	age := now.Sub(w.youngStart)
	switch {
	case age >= 2*latencyRotateEvery:
		w.restart(0, targets)
		w.restart(1, targets)
	case age >= latencyRotateEvery || w.streams[young].Count() >= latencyRotateSamples:
		w.restart(w.older, targets)
		w.older = young
	default:
		return
	}
	w.youngStart = now
	w.gen++
}

func (w *latencyWindow) restart(i int, targets *latencyTargets) {
	if w.builtWith[i] != targets {
		w.streams[i] = quantile.NewTargeted(targets.eps)
		w.builtWith[i] = targets
		return
	}
	w.streams[i].Reset()
}

// hedgeDelay is how long the first attempt runs alone before a hedge is
// launched: fixed when set, otherwise the pct-th percentile (pct like 90) of
// the provider's recent first-event times for this size class, clamped to
// [min, max]. A class with fewer than 20 recent samples uses max/4, so a cold
// start hedges neither instantly nor never. A max <= 0 leaves the delay
// unclamped from above.
func hedgeDelay(t *latencyTracker, sizeClass int, fixed time.Duration, pct float64, min, max time.Duration, now time.Time) time.Duration {
	if fixed > 0 {
		return fixed
	}
	d := max / 4
	if t != nil {
		if v, n := t.quantile(sizeClass, pct/100, now); n >= hedgeMinSamples {
			d = v
		}
	}
	if max > 0 && d > max {
		d = max
	}
	if d < min {
		d = min
	}
	return d
}

// budgetMismatch returns a warning when the hedge percentile and the hedge
// budget disagree by more than 2×, or "" when they fit. Hedging at pN fires
// for about (100-N)% of requests, so p90 pairs with a 10% budget: a much
// smaller budget silently disables most hedges, a much larger one is never
// reached and protects nothing.
func budgetMismatch(pct float64, budgetPercent float64) string {
	if budgetPercent <= 0 || pct <= 0 || pct > 100 {
		return ""
	}
	expected := 100 - pct
	switch {
	case budgetPercent > 2*expected:
		return fmt.Sprintf("hedge after p%g launches about %g%% extra requests but the budget allows %g%%: the budget will not bound hedging at that percentile; pair p%g with a budget near %g%%",
			pct, expected, budgetPercent, pct, expected)
	case 2*budgetPercent < expected:
		return fmt.Sprintf("hedge after p%g wants about %g%% extra requests but the budget allows only %g%%: most hedges will be refused; use a budget near %g%% or a higher percentile (p%g)",
			pct, expected, budgetPercent, expected, 100-budgetPercent)
	}
	return ""
}
