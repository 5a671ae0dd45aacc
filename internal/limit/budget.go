package limit

import (
	"sync"
	"time"
)

// budgetBuckets is how many slices the window is cut into; the window slides
// one slice at a time, so it always covers between 9/10 and all of its length.
const budgetBuckets = 10

// budget bounds extra attempts (hedges or retries) as a share of the requests
// seen recently, plus a floor so a quiet site can still hedge:
//
//	extras in the window ≤ percent/100 × requests in the window + floorPerSecond × window
//
// An extra is granted only if it still fits, so over any storm upstream
// attempts stay within
// (1 + percent/100) × requests + floor × seconds.
//
// Why a window counter and not golang.org/x/time/rate: rate.Limiter is a
// token bucket refilled at a fixed rate, so it can express the floor but not
// "a share of the traffic we actually observed"; its rate would have to be
// re-tuned on every request. Counting requests and extras in the same sliding
// window makes the share exact and costs one short critical section.
//
// A weighted budget (NewWeightedBudget) counts each request and extra by
// its weight (its input tokens) instead of one: extras' weight stays within
// percent of the requests' weight, plus the floor in requests of the
// window's mean weight. One 200k-token hedge then weighs what it costs.
type Budget struct {
	percent  float64
	floor    float64 // extras allowed per window regardless of traffic
	width    time.Duration
	weighted bool

	mu      sync.Mutex
	started bool
	origin  time.Time // first time seen; bucket indexes count widths from it
	head    int64     // index of the newest bucket
	buckets [budgetBuckets]budgetBucket
}

type budgetBucket struct {
	index    int64
	requests int64
	extras   int64
	// weighted: the weights of the requests and the extras
	reqWeight, extraWeight int64
}

// newBudget returns a budget allowing percent% extra attempts plus
// floorPerSecond per second, measured over window (10s when window <= 0).
func NewBudget(percent, floorPerSecond float64, window time.Duration) *Budget {
	if window <= 0 {
		window = 10 * time.Second
	}
	width := window / budgetBuckets
	if width <= 0 {
		width = 1
	}
	if percent < 0 {
		percent = 0
	}
	if floorPerSecond < 0 {
		floorPerSecond = 0
	}
	return &Budget{
		percent: percent,
		floor:   floorPerSecond * window.Seconds(),
		width:   width,
	}
}

// NewWeightedBudget is NewBudget counting weights (RecordRequestN, TakeN).
func NewWeightedBudget(percent, floorPerSecond float64, window time.Duration) *Budget {
	b := NewBudget(percent, floorPerSecond, window)
	b.weighted = true
	return b
}

// recordRequest counts one incoming request; call it once per request,
// before any tryAcquire for that request.
func (b *Budget) RecordRequest(now time.Time) { b.RecordRequestN(now, 1) }

// RecordRequestN counts one incoming request of weight n (a weighted
// budget; others count the request only).
func (b *Budget) RecordRequestN(now time.Time, n int64) {
	b.mu.Lock()
	bk := b.bucket(now)
	bk.requests++
	bk.reqWeight += max(n, 1)
	b.mu.Unlock()
}

// tryAcquire takes one extra attempt from the budget if the window allows it.
func (b *Budget) TryAcquire(now time.Time) bool {
	_, ok := b.Take(now)
	return ok
}

// Token names the bucket an extra was charged to, so that an extra
// taken for an attempt that then could not start is given back exactly.
type Token int64

// take is tryAcquire that also returns what refund needs.
func (b *Budget) Take(now time.Time) (Token, bool) { return b.TakeN(now, 1) }

// TakeN takes an extra of weight n (a weighted budget; others take one).
func (b *Budget) TakeN(now time.Time, n int64) (Token, bool) {
	n = max(n, 1)
	b.mu.Lock()
	defer b.mu.Unlock()
	cur := b.bucket(now)
	if !b.fitsLocked(n) {
		return 0, false
	}
	cur.extras++
	cur.extraWeight += n
	return Token(cur.index), true
}

// allows reports whether an extra would be granted now, without taking it:
// for a decision whose attempt starts later (a retry after its backoff).
func (b *Budget) Allows(now time.Time) bool { return b.AllowsN(now, 1) }

// AllowsN is Allows for an extra of weight n.
func (b *Budget) AllowsN(now time.Time, n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.bucket(now)
	return b.fitsLocked(max(n, 1))
}

// charge counts an extra that was granted outside the budget (a request's
// one failover once the budget is spent), so the window stays truthful and
// the traffic that follows repays it before it gets extras of its own.
func (b *Budget) Charge(now time.Time) {
	b.mu.Lock()
	bk := b.bucket(now)
	bk.extras++
	bk.extraWeight++
	b.mu.Unlock()
}

// refund gives back an extra taken with take whose attempt never started.
// If its bucket already left the window there is nothing to give back.
func (b *Budget) Refund(t Token) { b.RefundN(t, 1) }

// RefundN gives back an extra of weight n taken with TakeN.
func (b *Budget) RefundN(t Token, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	slot := int64(t) % budgetBuckets
	if slot < 0 {
		slot += budgetBuckets
	}
	if bk := &b.buckets[slot]; bk.index == int64(t) && bk.extras > 0 {
		bk.extras--
		bk.extraWeight = max(bk.extraWeight-max(n, 1), 0)
	}
}

// fitsLocked reports whether one more extra of weight n fits in the
// window.
func (b *Budget) fitsLocked(n int64) bool {
	requests, extras := b.sumLocked()
	if !b.weighted {
		// percent×requests/100 is exact for whole percents; the epsilon absorbs
		// rounding of fractional ones so 10% of 100 always allows 10.
		return float64(extras+1) <= b.percent*float64(requests)/100+b.floor+1e-9
	}
	reqW, extraW := b.weightsLocked()
	// The floor is in requests of the window's mean weight (the extra's own
	// when the window saw none), so a quiet site can still hedge.
	mean := float64(n)
	if requests > 0 {
		mean = float64(reqW) / float64(requests)
	}
	return float64(extraW+n) <= b.percent*float64(reqW)/100+b.floor*mean+1e-9
}

// weightsLocked sums the weights in the window.
func (b *Budget) weightsLocked() (requests, extras int64) {
	for i := range b.buckets {
		bk := &b.buckets[i]
		if bk.index > b.head-budgetBuckets && bk.index <= b.head {
			requests += bk.reqWeight
			extras += bk.extraWeight
		}
	}
	return requests, extras
}

// SnapshotWeights returns the weights of the requests and extras in the
// current window (a weighted budget's; others count 1 each).
func (b *Budget) SnapshotWeights(now time.Time) (requests, extras int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.bucket(now)
	return b.weightsLocked()
}

// snapshot returns the requests and extras counted in the current window.
func (b *Budget) Snapshot(now time.Time) (requests, extras int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.bucket(now)
	return b.sumLocked()
}

// bucket advances the window to now and returns the bucket now falls in.
// Time comes from the caller; time.Now values carry a monotonic reading, so
// wall-clock jumps do not disturb the window. A time slightly in the past is
// counted in the newest bucket; a large jump back restarts the window.
func (b *Budget) bucket(now time.Time) *budgetBucket {
	if !b.started {
		b.started, b.origin = true, now
	}
	idx := int64(now.Sub(b.origin) / b.width)
	switch {
	case idx < b.head-budgetBuckets:
		b.buckets = [budgetBuckets]budgetBucket{}
		b.head = idx
	case idx < b.head:
		idx = b.head
	default:
		b.head = idx
	}
	slot := idx % budgetBuckets
	if slot < 0 {
		slot += budgetBuckets
	}
	bk := &b.buckets[slot]
	if bk.index != idx {
		*bk = budgetBucket{index: idx}
	}
	return bk
}

func (b *Budget) sumLocked() (requests, extras int64) {
	for i := range b.buckets {
		bk := &b.buckets[i]
		if bk.index > b.head-budgetBuckets && bk.index <= b.head {
			requests += bk.requests
			extras += bk.extras
		}
	}
	return requests, extras
}
