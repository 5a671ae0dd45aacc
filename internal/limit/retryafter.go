package limit

import (
	"net/http"
	"strings"
	"time"
)

// maxRetryAfter bounds what a provider can ask us to wait; anything longer is
// as good as "not today" and clamping keeps the arithmetic from overflowing.
const MaxRetryAfter = 24 * time.Hour

// parseRetryAfter reads how long a provider asked us to wait. retry-after-ms
// (OpenAI) wins when it is valid because it is more precise; otherwise
// Retry-After is delta-seconds (a decimal like "1.5" is accepted and rounded
// up to the millisecond) or an HTTP date relative to now. ok is false when
// neither header holds a usable value; a date in the past gives (0, true).
// The result is clamped to [0, 24h].
func ParseRetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if v := h.Get("retry-after-ms"); v != "" {
		if us, ok := ParseDecimalMilli(v); ok {
			return ScaleRetryAfter(us, time.Microsecond), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if ms, ok := ParseDecimalMilli(v); ok {
		return ScaleRetryAfter(ms, time.Millisecond), true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return clampRetryAfter(t.Sub(now)), true
}

// scaleRetryAfter converts n units to a duration, clamping before the
// multiplication so it cannot overflow.
func ScaleRetryAfter(n int64, unit time.Duration) time.Duration {
	if n > int64(MaxRetryAfter/unit) {
		return MaxRetryAfter
	}
	return clampRetryAfter(time.Duration(n) * unit)
}

func clampRetryAfter(d time.Duration) time.Duration {
	if d < 0 {
		return 0
	}
	if d > MaxRetryAfter {
		return MaxRetryAfter
	}
	return d
}

// parseDecimalMilli parses a non-negative decimal ("12", "1.5") and returns it
// in thousandths, rounded up. It accepts no sign, exponent or spaces inside,
// so "-1", "1e3" and "inf" are rejected. Values saturate well above 24h in
// any unit so huge inputs clamp instead of overflowing.
func ParseDecimalMilli(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	const saturate = int64(1) << 50 // > 24h in microseconds, far from overflow
	intPart, frac, hasDot := strings.Cut(s, ".")
	if intPart == "" || (hasDot && frac == "") {
		return 0, false
	}
	var v int64
	for i := 0; i < len(intPart); i++ {
		c := intPart[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if v < saturate {
			v = v*10 + int64(c-'0')
		}
	}
	if v >= saturate/1000 {
		v = saturate / 1000
	}
	v *= 1000
	var thousandths int64
	roundUp := false
	for i := 0; i < len(frac); i++ {
		c := frac[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		switch {
		case i < 3:
			thousandths = thousandths*10 + int64(c-'0')
		case c != '0':
			roundUp = true
		}
	}
	for i := len(frac); i < 3; i++ {
		thousandths *= 10
	}
	if roundUp {
		thousandths++
	}
	return v + thousandths, true
}

// shouldRetry reports whether the provider allows a retry: only an explicit
// `x-should-retry: false` forbids it.
func ShouldRetry(h http.Header) bool {
	return !strings.EqualFold(strings.TrimSpace(h.Get("x-should-retry")), "false")
}
