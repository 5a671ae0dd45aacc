package dashboard

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestRecentKeepsTheLastHundredNewestFirst(t *testing.T) {
	var rc Recent
	for i := range 250 {
		chain := make([]Attempt, i%12)
		rc.Record(Request{Model: fmt.Sprintf("m%d", i), Site: strings.Repeat("s", 100), Attempts: i % 12, Chain: chain})
	}
	got := rc.Snapshot()
	if len(got) != RecentSize {
		t.Fatalf("%d requests, want %d", len(got), RecentSize)
	}
	for i, r := range got {
		if want := fmt.Sprintf("m%d", 249-i); r.Model != want {
			t.Fatalf("row %d: model %q, want %q", i, r.Model, want)
		}
		if len(r.Site) != MaxText {
			t.Fatalf("site of %d bytes kept, want %d", len(r.Site), MaxText)
		}
		if len(r.Chain) != min(r.Attempts, MaxAttempts) {
			t.Fatalf("row %d: %d attempts in the chain, want %d", i, len(r.Chain), min(r.Attempts, MaxAttempts))
		}
	}
}

func TestRecentConcurrentRecordAndSnapshot(t *testing.T) {
	var rc Recent
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 500 {
				rc.Record(Request{Attempts: w*1000 + i, Chain: []Attempt{{Provider: "a"}}})
			}
		})
	}
	for range 50 {
		for _, r := range rc.Snapshot() {
			if len(r.Chain) != 1 {
				t.Fatalf("torn row: %+v", r)
			}
		}
	}
	wg.Wait()
	if n := len(rc.Snapshot()); n != RecentSize {
		t.Fatalf("%d rows after 2000 records", n)
	}
}

func TestSeriesCountsQuantilesAndForgetsOldSteps(t *testing.T) {
	var s Series
	t0 := time.Unix(1_800_000_000, 0)
	for i := range 100 { // 1..100 ms first events in one step
		s.RecordAttempt("alpha", t0, OutcomeOK, time.Duration(i+1)*time.Millisecond)
	}
	s.RecordAttempt("alpha", t0, ClassifyOutcome("provider_error"), 0)
	s.RecordAttempt("beta", t0.Add(Step), ClassifyOutcome("hedge_loser_cancelled"), 0)

	snap := s.Snapshot(t0.Add(Step))
	if len(snap) != 2 || snap[0].Provider != "alpha" || snap[1].Provider != "beta" {
		t.Fatalf("providers: %+v", snap)
	}
	pts := snap[0].Points
	if len(pts) != Buckets {
		t.Fatalf("%d points, want %d", len(pts), Buckets)
	}
	p := pts[Buckets-2]
	if p.Counts[OutcomeOK] != 100 || p.Counts[OutcomeError] != 1 {
		t.Fatalf("counts %v", p.Counts)
	}
	// bins are 2^(i/2) ms wide: the true p50 (50 ms) and p95 (95 ms) lie
	// within a factor of sqrt(2) below the bound reported.
	if *p.P50Ms < 50 || *p.P50Ms > 50*1.415 || *p.P95Ms < 95 || *p.P95Ms > 95*1.415 {
		t.Fatalf("p50 %v p95 %v", *p.P50Ms, *p.P95Ms)
	}
	if pts[Buckets-1].P50Ms != nil {
		t.Fatal("a step with no first event has a p50")
	}
	if got := snap[1].Points[Buckets-1].Counts[OutcomeLost]; got != 1 {
		t.Fatalf("beta lost %d", got)
	}
	// 15 minutes later the step's slot is reused: the old counts are gone.
	later := t0.Add(Buckets * Step)
	s.RecordAttempt("alpha", later, OutcomeOK, 0)
	for _, p := range s.Snapshot(later)[0].Points[:Buckets-1] {
		if p.Counts != [outcomes]uint32{} {
			t.Fatalf("a step older than 15 minutes is still shown: %+v", p)
		}
	}
}
