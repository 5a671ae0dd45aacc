package limit

import (
	"math/rand/v2"
	"time"
)

// retryBackoff returns how long to wait before the n-th retry (n >= 1) on the
// same provider: base·2^(n-1), capped at max, plus 0–25% jitter. rnd returns a
// value in [0, 1); nil uses math/rand/v2. A max <= 0 leaves the delay uncapped
// (it still saturates instead of overflowing).
//
// Why not github.com/cenkalti/backoff/v5, although it is in Caddy's module
// graph: its ExponentialBackOff is a stateful, non-thread-safe object per retry
// sequence, draws from the global math/rand (tests cannot seed it), and jitters
// symmetrically (interval·(1±factor)) around an interval that it caps before
// jittering. Our retries are counted by the request path, which needs a pure
// function of n with additive, never-negative jitter; keeping a backoff object
// per request would add an allocation and state to get the same arithmetic.
func Backoff(base, max time.Duration, n int, rnd func() float64) time.Duration {
	if base <= 0 {
		return 0
	}
	if n < 1 {
		n = 1
	}
	// A delay whose +25% jitter surely fits in a time.Duration (146 years)
	// even after float64 rounding; MaxInt64/1.25 would not.
	const ceiling = time.Duration(1 << 62)
	limit := ceiling
	if max > 0 && max < limit {
		limit = max
	}
	d := base
	if d > limit {
		d = limit
	}
	for i := 1; i < n && d < limit; i++ {
		if d > limit/2 {
			d = limit
			break
		}
		d *= 2
	}
	// Jitter is added after the cap so that retries which reached the cap stay
	// spread out instead of all firing at exactly max.
	r := rand.Float64
	if rnd != nil {
		r = rnd
	}
	f := r()
	if !(f > 0) { // also catches NaN
		return d
	}
	if f > 1 {
		f = 1
	}
	return d + time.Duration(float64(d)*0.25*f)
}
