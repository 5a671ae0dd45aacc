package limit

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var budgetEpoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestBudgetAllowance(t *testing.T) {
	tests := []struct {
		name     string
		percent  float64
		floor    float64
		requests int
		want     int // extras granted when every request asks for several
	}{
		{"share of requests", 10, 0, 100, 10},
		{"floor alone on a quiet site", 10, 1, 0, 10},
		{"share plus floor", 20, 3, 100, 20 + 30},
		{"a fraction of an extra is not granted", 10, 0, 15, 1},
		{"tiny site without floor gets nothing", 10, 0, 5, 0},
		{"nothing configured never allows", 0, 0, 1000, 0},
		{"floor only", 0, 0.5, 1000, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBudget(tt.percent, tt.floor, 10*time.Second)
			now := budgetEpoch
			for range tt.requests {
				b.RecordRequest(now)
			}
			got := 0
			for range tt.requests*3 + 100 {
				if b.TryAcquire(now) {
					got++
				}
			}
			if got != tt.want {
				t.Errorf("granted %d extras, want %d", got, tt.want)
			}
			req, ext := b.Snapshot(now)
			if req != int64(tt.requests) || ext != int64(tt.want) {
				t.Errorf("snapshot = (%d, %d), want (%d, %d)", req, ext, tt.requests, tt.want)
			}
		})
	}
}

func TestBudgetWindowSlides(t *testing.T) {
	b := NewBudget(10, 0, 10*time.Second)
	t0 := budgetEpoch
	for range 100 {
		b.RecordRequest(t0)
	}
	for range 10 {
		if !b.TryAcquire(t0) {
			t.Fatal("budget refused within its share")
		}
	}
	steps := []struct {
		at       time.Duration
		requests int64
		extras   int64
		allowed  bool
	}{
		{0, 100, 10, false},
		{5 * time.Second, 100, 10, false},
		{9*time.Second + 999*time.Millisecond, 100, 10, false},
		{10 * time.Second, 0, 0, false}, // the first second left the window
	}
	for _, s := range steps {
		now := t0.Add(s.at)
		if req, ext := b.Snapshot(now); req != s.requests || ext != s.extras {
			t.Errorf("at +%v: snapshot = (%d, %d), want (%d, %d)", s.at, req, ext, s.requests, s.extras)
		}
		if got := b.TryAcquire(now); got != s.allowed {
			t.Errorf("at +%v: tryAcquire = %v, want %v", s.at, got, s.allowed)
		}
	}
	// Fresh traffic refills the share.
	t1 := t0.Add(10 * time.Second)
	for range 50 {
		b.RecordRequest(t1)
	}
	got := 0
	for range 20 {
		if b.TryAcquire(t1) {
			got++
		}
	}
	if got != 5 {
		t.Errorf("after the window slid, granted %d of 50 requests' share, want 5", got)
	}
}

func TestBudgetStormStaysWithinShare(t *testing.T) {
	// Every request of a minute-long outage wants three extra attempts; the
	// upstream must see at most (1 + 10%) × requests + 1/s × seconds.
	const (
		seconds = 60
		rps     = 50
		percent = 10.0
		floor   = 1.0
	)
	b := NewBudget(percent, floor, 10*time.Second)
	attempts, requests := 0, 0
	for s := range seconds {
		for i := range rps {
			now := budgetEpoch.Add(time.Duration(s)*time.Second + time.Duration(i)*time.Second/rps)
			b.RecordRequest(now)
			requests++
			attempts++
			for range 3 {
				if b.TryAcquire(now) {
					attempts++
				}
			}
		}
	}
	limit := (1+percent/100)*float64(requests) + floor*seconds
	if float64(attempts) > limit {
		t.Errorf("%d upstream attempts for %d requests, limit %.0f", attempts, requests, limit)
	}
	if float64(attempts) < float64(requests)*(1+percent/100) {
		t.Errorf("%d upstream attempts for %d requests: the budget did not even allow its share", attempts, requests)
	}
}

func TestBudgetClockGoesBack(t *testing.T) {
	b := NewBudget(0, 1, 10*time.Second)
	t0 := budgetEpoch.Add(time.Hour)
	b.RecordRequest(t0)
	// A little back: counted in the newest bucket, still in the window.
	b.RecordRequest(t0.Add(-2 * time.Second))
	if req, _ := b.Snapshot(t0); req != 2 {
		t.Errorf("requests after a small step back = %d, want 2", req)
	}
	// Far back: the window restarts instead of freezing.
	back := t0.Add(-time.Hour)
	b.RecordRequest(back)
	if req, _ := b.Snapshot(back); req != 1 {
		t.Errorf("requests after a large step back = %d, want 1", req)
	}
}

func TestBudgetConcurrent(t *testing.T) {
	b := NewBudget(10, 0, 10*time.Second)
	now := budgetEpoch
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				b.RecordRequest(now)
			}
		})
	}
	wg.Wait()
	var granted atomic.Int64
	for range 8 {
		wg.Go(func() {
			for range 500 {
				if b.TryAcquire(now) {
					granted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if got := granted.Load(); got != 800 {
		t.Errorf("granted %d extras concurrently for 8000 requests at 10%%, want exactly 800", got)
	}
}

func TestBudgetAllowsRefundCharge(t *testing.T) {
	t0 := budgetEpoch
	t.Run("allows does not take", func(t *testing.T) {
		b := NewBudget(0, 0.1, 10*time.Second) // one extra per window
		for range 3 {
			if !b.Allows(t0) {
				t.Fatal("allows = false on an unused budget")
			}
		}
		if _, ok := b.Take(t0); !ok {
			t.Fatal("take refused the one extra")
		}
		if b.Allows(t0) {
			t.Fatal("allows = true once the extra is taken")
		}
	})
	t.Run("refund gives the extra back", func(t *testing.T) {
		b := NewBudget(0, 0.1, 10*time.Second)
		tok, _ := b.Take(t0)
		b.Refund(tok)
		if _, ext := b.Snapshot(t0); ext != 0 {
			t.Fatalf("extras after refund = %d, want 0", ext)
		}
		if _, ok := b.Take(t0.Add(time.Second)); !ok {
			t.Fatal("the refunded extra cannot be taken again")
		}
	})
	t.Run("refund of a bucket that left the window is a no-op", func(t *testing.T) {
		b := NewBudget(0, 0.1, 10*time.Second)
		old, _ := b.Take(t0)
		later := t0.Add(10 * time.Second)
		if _, ok := b.Take(later); !ok {
			t.Fatal("the window slid but the extra was refused")
		}
		b.Refund(old) // its bucket was reused by the window: must not touch it
		if _, ext := b.Snapshot(later); ext != 1 {
			t.Fatalf("extras = %d, want 1: a stale refund freed a current extra", ext)
		}
	})
	t.Run("charge is debt repaid by later traffic", func(t *testing.T) {
		b := NewBudget(10, 0, 10*time.Second)
		for range 10 {
			b.RecordRequest(t0)
		}
		if _, ok := b.Take(t0); !ok {
			t.Fatal("10% of 10 requests refused")
		}
		b.Charge(t0) // granted outside the budget
		for range 10 {
			b.RecordRequest(t0)
		}
		if b.Allows(t0) {
			t.Fatal("20 requests at 10% allow 2 extras, 2 are counted: no room")
		}
		for range 10 {
			b.RecordRequest(t0)
		}
		if !b.Allows(t0) {
			t.Fatal("30 requests at 10% allow 3 extras, 2 are counted: room for one")
		}
	})
}

func BenchmarkBudget(b *testing.B) {
	bg := NewBudget(10, 1, 10*time.Second)
	now := budgetEpoch
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			bg.RecordRequest(now)
			bg.TryAcquire(now)
		}
	})
}
