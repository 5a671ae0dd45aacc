package dashboard

import (
	"math"
	"sort"
	"sync"
	"time"
)

const (
	// Step is the resolution of the time series.
	Step = 5 * time.Second
	// Buckets is the number of steps kept: 15 minutes.
	Buckets = 180
	// latencyBins is the number of first-event latency bins per bucket:
	// bin i holds latencies below binUpper(i) (powers of 2^0.5 from 1 ms,
	// the last bin unbounded), so a quantile is exact within ~41%.
	latencyBins = 40
)

// Attempt outcomes as the series count them.
const (
	OutcomeOK    = iota // request_success, hedge_winner
	OutcomeLost         // hedge_loser_cancelled
	OutcomeError        // provider_error, stream_error
	OutcomeOther        // request_error, client_abort, anything else
	outcomes
)

// OutcomeNames name the counts of a Point, in order.
var OutcomeNames = [outcomes]string{"ok", "lost", "error", "other"}

// ClassifyOutcome maps an attempt's outcome to one of the series' counts.
func ClassifyOutcome(outcome string) int {
	switch outcome {
	case "request_success", "hedge_winner":
		return OutcomeOK
	case "hedge_loser_cancelled":
		return OutcomeLost
	case "provider_error", "stream_error":
		return OutcomeError
	}
	return OutcomeOther
}

type bucket struct {
	mu      sync.Mutex
	step    int64 // the step number (unix time / Step) the counts are for
	counts  [outcomes]uint32
	latency [latencyBins]uint32
}

// series is one provider's last Buckets steps.
type series struct {
	buckets [Buckets]bucket
}

// Series keeps a provider's attempts per step. Memory: Buckets × (4 + 40)
// counters of 4 bytes plus a mutex and a step number: ~33 KB per provider.
type Series struct {
	mu        sync.RWMutex // guards the map only: taken for a lookup, or to add a provider
	providers map[string]*series
}

// RecordAttempt counts one ended attempt of provider at t; firstEvent > 0
// adds it to the step's latency distribution.
func (s *Series) RecordAttempt(provider string, t time.Time, outcome int, firstEvent time.Duration) {
	ps := s.provider(provider)
	step := t.UnixNano() / int64(Step)
	b := &ps.buckets[step%Buckets]
	b.mu.Lock()
	if b.step != step {
		if step < b.step { // a record from a lap ago
			b.mu.Unlock()
			return
		}
		b.step, b.counts, b.latency = step, [outcomes]uint32{}, [latencyBins]uint32{}
	}
	b.counts[outcome]++
	if firstEvent > 0 {
		b.latency[latencyBin(firstEvent)]++
	}
	b.mu.Unlock()
}

func (s *Series) provider(name string) *series {
	s.mu.RLock()
	ps := s.providers[name]
	s.mu.RUnlock()
	if ps != nil {
		return ps
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.providers == nil {
		s.providers = make(map[string]*series)
	}
	if ps = s.providers[name]; ps == nil {
		ps = new(series)
		s.providers[name] = ps
	}
	return ps
}

// latencyBin is the bin of d: the first i with d < binUpper(i).
func latencyBin(d time.Duration) int {
	ms := float64(d) / float64(time.Millisecond)
	if ms < 1 {
		return 0
	}
	i := int(math.Floor(2*math.Log2(ms))) + 1
	return min(i, latencyBins-1)
}

// binUpper is the upper bound of bin i in milliseconds.
func binUpper(i int) float64 {
	return math.Pow(2, float64(i)/2)
}

// Point is one step of a provider's series.
type Point struct {
	Time   int64            `json:"t"` // unix seconds of the step's start
	Counts [outcomes]uint32 `json:"counts"`
	P50Ms  *float64         `json:"p50_ms"` // nil: no first event in the step
	P95Ms  *float64         `json:"p95_ms"`
}

// ProviderSeries is a provider's points, oldest first, one per step up to
// the step of now (steps with nothing recorded have zero counts).
type ProviderSeries struct {
	Provider string  `json:"provider"`
	Points   []Point `json:"points"`
}

// Snapshot returns every provider's last Buckets steps up to now, sorted
// by provider name.
func (s *Series) Snapshot(now time.Time) []ProviderSeries {
	s.mu.RLock()
	names := make([]string, 0, len(s.providers))
	all := make(map[string]*series, len(s.providers))
	for n, ps := range s.providers {
		names = append(names, n)
		all[n] = ps
	}
	s.mu.RUnlock()
	sort.Strings(names)
	last := now.UnixNano() / int64(Step)
	out := make([]ProviderSeries, 0, len(names))
	for _, n := range names {
		ps := all[n]
		pts := make([]Point, Buckets)
		for i := range pts {
			step := last - Buckets + 1 + int64(i)
			pts[i].Time = step * int64(Step) / int64(time.Second)
			b := &ps.buckets[((step%Buckets)+Buckets)%Buckets]
			b.mu.Lock()
			ok := b.step == step
			counts, lat := b.counts, b.latency
			b.mu.Unlock()
			if ok {
				pts[i].Counts = counts
				pts[i].P50Ms, pts[i].P95Ms = quantile(&lat, 0.5), quantile(&lat, 0.95)
			}
		}
		out = append(out, ProviderSeries{Provider: n, Points: pts})
	}
	return out
}

// quantile is the upper bound of the bin that holds the q-quantile.
func quantile(lat *[latencyBins]uint32, q float64) *float64 {
	var total uint64
	for _, c := range lat {
		total += uint64(c)
	}
	if total == 0 {
		return nil
	}
	rank := uint64(math.Ceil(q * float64(total)))
	var seen uint64
	for i, c := range lat {
		seen += uint64(c)
		if seen >= rank {
			v := math.Round(binUpper(i)*10) / 10
			return &v
		}
	}
	return nil
}
