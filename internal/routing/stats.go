// Package routing chooses the provider a request tries first within one
// priority tier: the cost of each provider from what the engine measured
// (first-event times per request-size class, attempts in flight, recent
// provider-level failures, the keys' quota left) and the pick over those
// costs, with a share of exploration. Its state is atomics held by a
// provider's shared health entry, fed at the moments the engine already
// reports (a first event, a failure, a cancelled loser); nothing here runs
// on its own.
package routing

import (
	"math"
	"sync/atomic"
	"time"
)

const (
	// Classes is the number of request-size classes a Stats keeps (the
	// health package's size classes 0-16) plus one that sees every class.
	Classes = 18
	overall = Classes - 1

	// firstEventDecay is the time constant of the first-event average: a
	// sample weighs 1-exp(-gap/decay), so a busy provider's estimate is the
	// last couple of seconds of samples and a quiet one's follows its
	// latest sample closely. A degradation shows within a second or two of
	// traffic.
	firstEventDecay = 2 * time.Second
	// failureDecay is the time constant of the failure rate.
	failureDecay = 10 * time.Second
	// pickDecay is the time constant of the pick rate (the share shown).
	pickDecay = 10 * time.Second
	// stale is how old a class's latest sample may be and still be used:
	// after it the class falls back to the overall average, and a provider
	// with nothing recent is treated as unmeasured (explored again).
	stale = 5 * time.Minute
)

// ewma is a time-decayed average of irregular samples: atomics only.
// Concurrent updates may lose a little weight, never the value.
type ewma struct {
	bits atomic.Uint64 // float64 value
	last atomic.Int64  // unix nanos of the latest sample, 0: none yet
}

func (e *ewma) observe(v float64, now int64, decay time.Duration) {
	prev := e.last.Swap(now)
	if prev == 0 {
		e.bits.Store(math.Float64bits(v))
		return
	}
	e.blend(v, now, prev, decay)
}

// observeFromZero is observe with a prior of zero worth a second of
// samples: a provider's first failure is not a 100% failure rate.
func (e *ewma) observeFromZero(v float64, now int64, decay time.Duration) {
	prev := e.last.Swap(now)
	if prev == 0 {
		prev = now - int64(time.Second)
	}
	e.blend(v, now, prev, decay)
}

func (e *ewma) blend(v float64, now, prev int64, decay time.Duration) {
	w := math.Exp(-float64(max(now-prev, 0)) / float64(decay))
	for {
		old := e.bits.Load()
		nv := math.Float64frombits(old)*w + v*(1-w)
		if e.bits.CompareAndSwap(old, math.Float64bits(nv)) {
			return
		}
	}
}

// value is the average and whether it has a sample no older than stale.
func (e *ewma) value(now int64) (float64, bool) {
	last := e.last.Load()
	if last == 0 || now-last > int64(stale) {
		return 0, false
	}
	return math.Float64frombits(e.bits.Load()), true
}

// rate is a time-decayed count: events per decay period, read at now.
type rate struct {
	bits atomic.Uint64
	last atomic.Int64
}

func (r *rate) add(now int64, decay time.Duration) {
	prev := r.last.Swap(now)
	w := 0.0
	if prev != 0 {
		w = math.Exp(-float64(max(now-prev, 0)) / float64(decay))
	}
	for {
		old := r.bits.Load()
		nv := math.Float64frombits(old)*w + 1
		if r.bits.CompareAndSwap(old, math.Float64bits(nv)) {
			return
		}
	}
}

func (r *rate) at(now int64, decay time.Duration) float64 {
	last := r.last.Load()
	if last == 0 {
		return 0
	}
	return math.Float64frombits(r.bits.Load()) * math.Exp(-float64(max(now-last, 0))/float64(decay))
}

// Stats is what routing knows of one provider. It lives in the provider's
// shared health entry, so a reload keeps it, and every site naming the
// provider feeds and reads the same one.
type Stats struct {
	// Priority and Weight are the provider's as last provisioned, for the
	// admin view, which groups providers into tiers without a handler.
	Priority, Weight atomic.Int64

	firstEvent [Classes]ewma
	failure    ewma // 1 per provider-level failure, 0 per first event
	picks      rate
}

// ObserveFirstEvent records an attempt's time to its first valid event
// for a request of sizeClass: the provider answered.
func (s *Stats) ObserveFirstEvent(sizeClass int, d time.Duration, now time.Time) {
	t := now.UnixNano()
	s.firstEvent[clamp(sizeClass)].observe(float64(d), t, firstEventDecay)
	s.firstEvent[overall].observe(float64(d), t, firstEventDecay)
	s.failure.observeFromZero(0, t, failureDecay)
}

// ObserveAtLeast records an attempt that ended without a first event
// after d (a cancelled hedge loser, a failure): its first event would
// have taken at least d. That says something only when d is above the
// estimate, so only then is it a sample; a loser cancelled 20 ms after it
// started must not make its provider look fast.
func (s *Stats) ObserveAtLeast(sizeClass int, d time.Duration, now time.Time) {
	t := now.UnixNano()
	for _, c := range [2]int{clamp(sizeClass), overall} {
		if v, ok := s.firstEvent[c].value(t); !ok || float64(d) > v {
			s.firstEvent[c].observe(float64(d), t, firstEventDecay)
		}
	}
}

// ObserveSuccess records an attempt that succeeded without a first-event
// time to learn from (a complete non-streaming answer).
func (s *Stats) ObserveSuccess(now time.Time) {
	s.failure.observeFromZero(0, now.UnixNano(), failureDecay)
}

// ObserveFailure records a provider-level failure.
func (s *Stats) ObserveFailure(now time.Time) {
	s.failure.observeFromZero(1, now.UnixNano(), failureDecay)
}

// NotePick counts the provider as a tier's first choice.
func (s *Stats) NotePick(now time.Time) { s.picks.add(now.UnixNano(), pickDecay) }

// PickRate is the recent rate of NotePick, in picks per 10 s: the
// provider's share of a tier is its rate over the tier's sum.
func (s *Stats) PickRate(now time.Time) float64 { return s.picks.at(now.UnixNano(), pickDecay) }

// FirstEvent is the recent first-event time for sizeClass: the class's own
// average when it has a recent sample, else the average over every class;
// false when the provider has no recent sample at all.
func (s *Stats) FirstEvent(sizeClass int, now time.Time) (time.Duration, bool) {
	t := now.UnixNano()
	if v, ok := s.firstEvent[clamp(sizeClass)].value(t); ok {
		return time.Duration(v), true
	}
	v, ok := s.firstEvent[overall].value(t)
	return time.Duration(v), ok
}

// FailureRate is the recent share of provider-level failures among the
// attempts that reached a verdict (0 when none recently).
func (s *Stats) FailureRate(now time.Time) float64 {
	v, _ := s.failure.value(now.UnixNano())
	return v
}

// Reset forgets what was measured (an admin reset of the provider).
func (s *Stats) Reset() {
	for i := range s.firstEvent {
		s.firstEvent[i].reset()
	}
	s.failure.reset()
}

func (e *ewma) reset() {
	e.last.Store(0)
	e.bits.Store(0)
}

func clamp(c int) int { return min(max(c, 0), overall-1) }
