package limit

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestRetryBackoff(t *testing.T) {
	zero := func() float64 { return 0 }
	one := func() float64 { return 1 }
	half := func() float64 { return 0.5 }
	tests := []struct {
		name      string
		base, max time.Duration
		n         int
		rnd       func() float64
		want      time.Duration
	}{
		{"first retry is base", 500 * time.Millisecond, 8 * time.Second, 1, zero, 500 * time.Millisecond},
		{"doubles", 500 * time.Millisecond, 8 * time.Second, 2, zero, time.Second},
		{"doubles again", 500 * time.Millisecond, 8 * time.Second, 4, zero, 4 * time.Second},
		{"capped", 500 * time.Millisecond, 8 * time.Second, 6, zero, 8 * time.Second},
		{"jitter up to 25%", 500 * time.Millisecond, 8 * time.Second, 1, one, 625 * time.Millisecond},
		{"half jitter", time.Second, 8 * time.Second, 2, half, 2250 * time.Millisecond},
		{"jitter applies after the cap", 500 * time.Millisecond, 8 * time.Second, 10, one, 10 * time.Second},
		{"n below 1 is the first retry", time.Second, 8 * time.Second, 0, zero, time.Second},
		{"base above max is capped", 10 * time.Second, 8 * time.Second, 1, zero, 8 * time.Second},
		{"huge n does not overflow", time.Second, 8 * time.Second, math.MaxInt, one, 10 * time.Second},
		{"huge n uncapped saturates", time.Second, 0, 1000, zero, 1 << 62},
		{"huge n uncapped with jitter does not overflow", time.Hour, 0, 200, one, 1<<62 + 1<<60},
		{"zero base", 0, time.Second, 3, one, 0},
		{"rnd out of range is clamped", time.Second, 8 * time.Second, 1, func() float64 { return 7 }, 1250 * time.Millisecond},
		{"NaN rnd means no jitter", time.Second, 8 * time.Second, 1, math.NaN, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Backoff(tt.base, tt.max, tt.n, tt.rnd)
			if got != tt.want {
				t.Errorf("retryBackoff(%v, %v, %d) = %v, want %v", tt.base, tt.max, tt.n, got, tt.want)
			}
			if got < 0 {
				t.Errorf("negative delay %v", got)
			}
		})
	}
}

func TestRetryBackoffSeededSequence(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	base, max := 500*time.Millisecond, 8*time.Second
	for n := 1; n <= 12; n++ {
		d := Backoff(base, max, n, rng.Float64)
		lo := base << (n - 1)
		if lo > max || n > 10 {
			lo = max
		}
		hi := lo + lo/4
		if d < lo || d > hi {
			t.Errorf("retry %d: %v outside [%v, %v]", n, d, lo, hi)
		}
	}
	// Same seed, same sequence: the jitter is reproducible in tests.
	a, b := rand.New(rand.NewPCG(7, 7)), rand.New(rand.NewPCG(7, 7))
	for n := 1; n <= 5; n++ {
		if x, y := Backoff(base, max, n, a.Float64), Backoff(base, max, n, b.Float64); x != y {
			t.Fatalf("retry %d: %v != %v with the same seed", n, x, y)
		}
	}
}

func TestRetryBackoffDefaultRandomness(t *testing.T) {
	for n := 1; n <= 100; n++ {
		d := Backoff(time.Second, 8*time.Second, 1, nil)
		if d < time.Second || d > 1250*time.Millisecond {
			t.Fatalf("nil rnd: %v outside [1s, 1.25s]", d)
		}
	}
}
