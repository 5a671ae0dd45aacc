package dashboard

import (
	"encoding/json"
	"fmt"
	"reflect"
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
	a := snap[0]
	if len(a.OK) != Buckets || len(a.P95Ms) != Buckets || a.StepSecs != 5 || a.Start != t0.Add(Step).Unix()-(Buckets-1)*5 {
		t.Fatalf("alpha: %d points from %d every %d s", len(a.OK), a.Start, a.StepSecs)
	}
	i := Buckets - 2
	if a.OK[i] != 100 || a.Error[i] != 1 || a.Lost[i] != 0 {
		t.Fatalf("step %d: ok %d error %d lost %d", i, a.OK[i], a.Error[i], a.Lost[i])
	}
	// bins are 2^(i/2) ms wide: the true p50 (50 ms) and p95 (95 ms) lie
	// within a factor of sqrt(2) below the bound reported.
	if a.P50Ms[i] < 50 || a.P50Ms[i] > 50*1.415 || a.P95Ms[i] < 95 || a.P95Ms[i] > 95*1.415 {
		t.Fatalf("p50 %v p95 %v", a.P50Ms[i], a.P95Ms[i])
	}
	if js, _ := a.P50Ms[Buckets-3:].MarshalJSON(); !strings.HasPrefix(string(js), "[null,") || !strings.HasSuffix(string(js), ",null]") {
		t.Fatalf("a step with no first event is not null: %s", js)
	}
	if got := snap[1].Lost[Buckets-1]; got != 1 {
		t.Fatalf("beta lost %d", got)
	}
	// 15 minutes later the step's slot is reused: the old counts are gone.
	later := t0.Add(Buckets * Step)
	s.RecordAttempt("alpha", later, OutcomeOK, 0)
	a = s.Snapshot(later)[0]
	for i := range Buckets - 1 {
		if a.OK[i] != 0 || a.Error[i] != 0 || a.P50Ms[i] != 0 {
			t.Fatalf("a step older than 15 minutes is still shown at %d", i)
		}
	}
	if a.OK[Buckets-1] != 1 {
		t.Fatalf("the new step: %d ok", a.OK[Buckets-1])
	}
}

func TestSeriesJSONIsWhatEncodingJSONReads(t *testing.T) {
	var s Series
	now := time.Unix(1_800_000_000, 0)
	s.RecordAttempt("a\"b", now, OutcomeLost, 30*time.Millisecond)
	s.RecordAttempt("z", now.Add(-Step), OutcomeOther, 0)
	s.RecordAttemptEvents("z", now, OutcomeOK, 0, ClassifyEvents("hedge_triggered", "hedge_winner"))
	snap := s.Snapshot(now)
	var back []ProviderSeries
	if err := json.Unmarshal(AppendJSON(nil, snap), &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, snap) {
		t.Fatalf("round trip:\n%+v\nwant\n%+v", back, snap)
	}
}

func TestSeriesRetainForgetsRemovedProviders(t *testing.T) {
	var s Series
	now := time.Unix(1_800_000_000, 0)
	s.RecordAttempt("kept", now, 0, time.Millisecond)
	s.RecordAttempt("removed", now, 0, time.Millisecond)
	s.Retain(func(n string) bool { return n == "kept" })
	got := s.Snapshot(now)
	if len(got) != 1 || got[0].Provider != "kept" {
		t.Fatalf("after Retain the series hold %+v, want only \"kept\"", got)
	}
}

// Hedges and continuations are counted per provider over the window: a
// hedge and whether it won, a continuation and whether it completed.
func TestSeriesCountsHedgesAndContinuations(t *testing.T) {
	var s Series
	t0 := time.Unix(1_800_000_000, 0)
	for _, a := range []struct{ reason, outcome string }{
		{"hedge_triggered", "hedge_winner"}, {"hedge_triggered", "hedge_loser_cancelled"}, {"initial", "hedge_winner"},
		{"resume_replay", "resume_replay"}, {"resume_prefill", "resume_broken"}, {"resume_replay", "provider_error"},
	} {
		s.RecordAttemptEvents("p", t0, ClassifyOutcome(a.outcome), 0, ClassifyEvents(a.reason, a.outcome))
	}
	s.RecordAttemptEvents("p", t0.Add(-Buckets*Step), OutcomeOK, 0, EventHedge|EventHedgeWon) // too old to show
	got := s.Snapshot(t0)[0]
	if got.Hedges != 2 || got.HedgesWon != 1 || got.Continuations != 3 || got.ContinuationsOK != 1 {
		t.Fatalf("hedges %d won %d, continuations %d ok %d; want 2, 1, 3, 1", got.Hedges, got.HedgesWon, got.Continuations, got.ContinuationsOK)
	}
	if ok, errs := got.OK[Buckets-1], got.Error[Buckets-1]; ok != 3 || errs != 2 {
		t.Fatalf("ok %d error %d, want 3 (two winners, a completed continuation) and 2", ok, errs)
	}
}

// A provider name is written as JSON, not Go, quotes it: a control or
// non-printable character, U+2028, a quote or a backslash come back from
// encoding/json exactly; a byte that is not UTF-8 (a name from JSON config
// cannot hold one) as encoding/json writes it, U+FFFD.
func TestSeriesJSONProviderNames(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	for _, name := range []string{
		"ctl\x01\x1f", "del\x7f", "tab\tnl\n", "ls\u2028ps\u2029", `quote"back\slash`, "nbsp\u00a0", "tag\U000e0001",
		"<html>&amp;", "naïve 名前 😀", "bad\xffbyte\xc3",
	} {
		var s Series
		s.RecordAttempt(name, now, OutcomeOK, time.Millisecond)
		out := AppendJSON(nil, s.Snapshot(now))
		var back []ProviderSeries
		if err := json.Unmarshal(out, &back); err != nil {
			t.Errorf("%q: not JSON: %v: %s", name, err, out[:min(len(out), 80)])
			continue
		}
		want, _ := json.Marshal(name) // what encoding/json makes of it
		var wantName string
		_ = json.Unmarshal(want, &wantName)
		if len(back) != 1 || back[0].Provider != wantName {
			t.Errorf("%q: came back as %+q, want %+q", name, back[0].Provider, wantName)
		}
	}
}
