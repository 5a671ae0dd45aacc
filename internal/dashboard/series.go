package dashboard

import (
	"encoding/json"
	"math"
	"sort"
	"strconv"
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

// ClassifyOutcome maps an attempt's outcome to one of the series' counts.
// A continuation that completed the stream is ok, one that broke an error.
func ClassifyOutcome(outcome string) int {
	switch outcome {
	case "request_success", "hedge_winner", "resume_prefill", "resume_replay", "resume_finish":
		return OutcomeOK
	case "hedge_loser_cancelled":
		return OutcomeLost
	case "provider_error", "stream_error", "resume_broken":
		return OutcomeError
	}
	return OutcomeOther
}

// Events an attempt may count besides its outcome, as a bit set.
const (
	EventHedge          = 1 << iota // started as a hedge
	EventHedgeWon                   // a hedge that won its race
	EventContinuation               // a mid-stream continuation
	EventContinuationOK             // a continuation that completed the stream
	events              = iota
)

// ClassifyEvents maps an attempt's start reason and outcome to its events.
func ClassifyEvents(reason, outcome string) uint8 {
	var ev uint8
	switch {
	case reason == "hedge_triggered":
		ev = EventHedge
		if outcome == "hedge_winner" {
			ev |= EventHedgeWon
		}
	case len(reason) > 7 && reason[:7] == "resume_":
		ev = EventContinuation
		if ClassifyOutcome(outcome) == OutcomeOK {
			ev |= EventContinuationOK
		}
	}
	return ev
}

type bucket struct {
	mu      sync.Mutex
	step    int64 // the step number (unix time / Step) the counts are for
	counts  [outcomes]uint32
	events  [events]uint32
	latency [latencyBins]uint32
}

// series is one provider's last Buckets steps.
type series struct {
	buckets [Buckets]bucket
}

// Series keeps a provider's attempts per step. Memory: Buckets × (4 + 4 + 40)
// counters of 4 bytes plus a mutex and a step number: ~37 KB per provider.
type Series struct {
	mu        sync.RWMutex // guards the map only: taken for a lookup, or to add a provider
	providers map[string]*series
}

// RecordAttempt counts one ended attempt of provider at t; firstEvent > 0
// adds it to the step's latency distribution.
func (s *Series) RecordAttempt(provider string, t time.Time, outcome int, firstEvent time.Duration) {
	s.RecordAttemptEvents(provider, t, outcome, firstEvent, 0)
}

// RecordAttemptEvents is RecordAttempt that also counts the attempt's
// events (ClassifyEvents).
func (s *Series) RecordAttemptEvents(provider string, t time.Time, outcome int, firstEvent time.Duration, ev uint8) {
	ps := s.provider(provider)
	step := t.UnixNano() / int64(Step)
	b := &ps.buckets[step%Buckets]
	b.mu.Lock()
	if b.step != step {
		if step < b.step { // a record from a lap ago
			b.mu.Unlock()
			return
		}
		b.step, b.counts, b.events, b.latency = step, [outcomes]uint32{}, [events]uint32{}, [latencyBins]uint32{}
	}
	b.counts[outcome]++
	for i := range events {
		if ev&(1<<i) != 0 {
			b.events[i]++
		}
	}
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

// ProviderSeries is a provider's last Buckets steps, oldest first, as
// columns (what a chart library takes): Start is the unix second of the
// first step, each column has one value per step, and a step with nothing
// recorded has zero counts and no quantile. The event counts are totals
// over the steps.
type ProviderSeries struct {
	Provider string   `json:"provider"`
	Start    int64    `json:"start"`
	StepSecs int64    `json:"step_s"`
	OK       []uint32 `json:"ok"`
	Lost     []uint32 `json:"lost"`
	Error    []uint32 `json:"error"`
	Other    []uint32 `json:"other"`
	P50Ms    MsColumn `json:"p50_ms"`
	P95Ms    MsColumn `json:"p95_ms"`

	Hedges          uint32 `json:"hedges"`           // attempts started as hedges
	HedgesWon       uint32 `json:"hedges_won"`       // of which won their race
	Continuations   uint32 `json:"continuations"`    // mid-stream continuation attempts
	ContinuationsOK uint32 `json:"continuations_ok"` // of which completed the stream
}

// MsColumn is a column of milliseconds in which 0 means none: it is
// written as JSON null, a gap in the chart.
type MsColumn []float64

// MarshalJSON writes the column with null for 0.
func (c MsColumn) MarshalJSON() ([]byte, error) {
	return c.appendJSON(make([]byte, 0, 8*len(c)+2)), nil
}

func (c MsColumn) appendJSON(b []byte) []byte {
	b = append(b, '[')
	for i, v := range c {
		if i > 0 {
			b = append(b, ',')
		}
		switch j := sort.SearchFloat64s(binUpperMs[:], v); {
		case v == 0:
			b = append(b, "null"...)
		case j < latencyBins && binUpperMs[j] == v: // a quantile: a bin's bound, written once
			b = append(b, binUpperText[j]...)
		default:
			b = strconv.AppendFloat(b, v, 'f', 1, 64)
		}
	}
	return append(b, ']')
}

// Retain forgets the providers keep rejects (removed from the config), so
// the series hold only configured providers and their memory stays bounded
// by the config, not by every name a reload ever had.
func (s *Series) Retain(keep func(provider string) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for n := range s.providers {
		if !keep(n) {
			delete(s.providers, n)
		}
	}
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
	first := last - Buckets + 1
	out := make([]ProviderSeries, 0, len(names))
	for _, n := range names {
		ps := all[n]
		counts := make([]uint32, outcomes*Buckets)
		ms := make([]float64, 2*Buckets)
		v := ProviderSeries{
			Provider: n, Start: first * int64(Step) / int64(time.Second), StepSecs: int64(Step / time.Second),
			OK: counts[:Buckets:Buckets], Lost: counts[Buckets : 2*Buckets : 2*Buckets],
			Error: counts[2*Buckets : 3*Buckets : 3*Buckets], Other: counts[3*Buckets:],
			P50Ms: ms[:Buckets:Buckets], P95Ms: ms[Buckets:],
		}
		for i := range Buckets {
			step := first + int64(i)
			b := &ps.buckets[((step%Buckets)+Buckets)%Buckets]
			b.mu.Lock()
			ok := b.step == step
			c, ev, lat := b.counts, b.events, b.latency
			b.mu.Unlock()
			if !ok {
				continue
			}
			v.Hedges += ev[0]
			v.HedgesWon += ev[1]
			v.Continuations += ev[2]
			v.ContinuationsOK += ev[3]
			v.OK[i], v.Lost[i], v.Error[i], v.Other[i] = c[OutcomeOK], c[OutcomeLost], c[OutcomeError], c[OutcomeOther]
			if lat != ([latencyBins]uint32{}) {
				v.P50Ms[i], v.P95Ms[i] = quantiles(&lat)
			}
		}
		out = append(out, v)
	}
	return out
}

// binUpperMs is binUpper(i) rounded to 0.1 ms, for the quantiles shown.
var binUpperMs = func() (t [latencyBins]float64) {
	for i := range t {
		t[i] = math.Round(binUpper(i)*10) / 10
	}
	return t
}()

// binUpperText is binUpperMs as JSON.
var binUpperText = func() (t [latencyBins][]byte) {
	for i, v := range binUpperMs {
		t[i] = strconv.AppendFloat(nil, v, 'f', 1, 64)
	}
	return t
}()

// quantiles are the upper bounds of the bins that hold the median and the
// 95th percentile, in milliseconds; 0 when the step has no first event.
func quantiles(lat *[latencyBins]uint32) (p50, p95 float64) {
	var total uint64
	for _, c := range lat {
		total += uint64(c)
	}
	if total == 0 {
		return 0, 0
	}
	r50, r95 := (total+1)/2, (95*total+99)/100 // ceil(q × total)
	var seen uint64
	for i, c := range lat {
		seen += uint64(c)
		if p50 == 0 && seen >= r50 {
			p50 = binUpperMs[i]
		}
		if seen >= r95 {
			return p50, binUpperMs[i]
		}
	}
	return p50, binUpperMs[latencyBins-1]
}

// AppendJSON appends all as the JSON array /llm_hedge/series answers,
// written directly: with 100 providers that is 108,000 numbers, which
// encoding/json's reflection would take several milliseconds over. The
// provider names are encoding/json's strings (Go's quoting is not JSON:
// \x01, \U000e0001), one small encoding per provider.
func AppendJSON(b []byte, all []ProviderSeries) []byte {
	b = append(b, '[')
	for i, s := range all {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"provider":`...)
		name, _ := json.Marshal(s.Provider) // a string always encodes
		b = append(b, name...)
		b = append(b, `,"start":`...)
		b = strconv.AppendInt(b, s.Start, 10)
		b = append(b, `,"step_s":`...)
		b = strconv.AppendInt(b, s.StepSecs, 10)
		for _, col := range []struct {
			name string
			v    []uint32
		}{{"ok", s.OK}, {"lost", s.Lost}, {"error", s.Error}, {"other", s.Other}} {
			b = append(b, `,"`...)
			b = append(b, col.name...)
			b = append(b, `":[`...)
			for j, n := range col.v {
				if j > 0 {
					b = append(b, ',')
				}
				b = strconv.AppendUint(b, uint64(n), 10)
			}
			b = append(b, ']')
		}
		b = append(b, `,"p50_ms":`...)
		b = s.P50Ms.appendJSON(b)
		b = append(b, `,"p95_ms":`...)
		b = s.P95Ms.appendJSON(b)
		for _, total := range []struct {
			name string
			n    uint32
		}{{"hedges", s.Hedges}, {"hedges_won", s.HedgesWon}, {"continuations", s.Continuations}, {"continuations_ok", s.ContinuationsOK}} {
			b = append(b, `,"`...)
			b = append(b, total.name...)
			b = append(b, `":`...)
			b = strconv.AppendUint(b, uint64(total.n), 10)
		}
		b = append(b, '}')
	}
	return append(b, ']', '\n')
}
