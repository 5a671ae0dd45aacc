package dashboard

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

func TestRescueFromTheChain(t *testing.T) {
	ok := func(p string) Request { return Request{Outcome: "success", Provider: p} }
	for _, c := range []struct {
		name  string
		r     Request
		chain []Attempt
		want  string
	}{
		{"first attempt alone", ok("a"), []Attempt{{Provider: "a", Reason: "initial", Outcome: "request_success"}}, ""},
		{"first attempt won its hedge race", ok("a"), []Attempt{
			{Provider: "a", Reason: "initial", Outcome: "hedge_winner"},
			{Provider: "b", Reason: "hedge_triggered", Outcome: "hedge_loser_cancelled"}}, ""},
		{"hedge won", ok("b"), []Attempt{
			{Provider: "a", Reason: "initial", Outcome: "hedge_loser_cancelled"},
			{Provider: "b", Reason: "hedge_triggered", Outcome: "hedge_winner"}}, RescueHedge},
		{"failover", ok("b"), []Attempt{
			{Provider: "a", Reason: "initial", Outcome: "provider_error"},
			{Provider: "b", Reason: "failover", Outcome: "request_success"}}, RescueFailover},
		{"retry on the same provider", ok("a"), []Attempt{
			{Provider: "a", Reason: "initial", Outcome: "provider_error"},
			{Provider: "a", Reason: "retry", Outcome: "request_success"}}, RescueFailover},
		{"continued", ok("a"), []Attempt{
			{Provider: "a", Reason: "initial", Outcome: "stream_error"},
			{Provider: "b", Reason: "resume_prefill", Outcome: "resume_prefill"}}, RescueContinuation},
		{"continuation broke", Request{Outcome: "stream_error", Provider: "a"}, []Attempt{
			{Provider: "a", Reason: "initial", Outcome: "stream_error"},
			{Provider: "b", Reason: "resume_prefill", Outcome: "resume_broken"}}, ""},
		{"translated", Request{Outcome: "success", Provider: "c", Translated: true},
			[]Attempt{{Provider: "c", Reason: "initial", Outcome: "request_success"}}, RescueTranslation},
		{"exhausted", Request{Outcome: "exhausted"}, []Attempt{
			{Provider: "a", Reason: "initial", Outcome: "provider_error"},
			{Provider: "b", Reason: "failover", Outcome: "provider_error"}}, ""},
	} {
		if got := Rescue(&c.r, c.chain); got != c.want {
			t.Errorf("%s: rescue %q, want %q", c.name, got, c.want)
		}
	}
}

// at is a fixed clock: the tests inject now, never read the wall.
var at = time.Unix(1_800_000_000, 0)

func TestOverviewRatesOfTheLastMinute(t *testing.T) {
	var o Overview
	rec := func(ago time.Duration, outcome string, firstMs int64, chain ...Attempt) {
		o.RecordRequest(&Request{Time: at.Add(-ago), Outcome: outcome, Provider: "b", FirstEventMs: firstMs, InputTokens: 100, OutputTokens: 10}, chain)
	}
	failover := []Attempt{{Provider: "a", Reason: "initial", Outcome: "provider_error"}, {Provider: "b", Reason: "failover", Outcome: "request_success"}}
	for range 6 {
		rec(10*time.Second, "success", 200)
	}
	rec(20*time.Second, "success", 800, failover...)
	rec(20*time.Second, "exhausted", 0)
	rec(30*time.Second, "client_error", 0) // counted, not judged
	rec(3*time.Minute, "success", 3000)    // in the latency window, not the rate's
	rec(20*time.Minute, "success", 9000)   // gone

	v := o.Snapshot(at)
	if v.RequestsPerMin != 9 || v.Judged != 8 || v.RescuedPerMin != 1 || v.Rescued[RescueFailover] != 1 {
		t.Fatalf("per minute: %d requests, %d judged, %d rescued %v", v.RequestsPerMin, v.Judged, v.RescuedPerMin, v.Rescued)
	}
	if v.SuccessRate == nil || *v.SuccessRate != 7.0/8 {
		t.Fatalf("success rate %v, want 7/8", v.SuccessRate)
	}
	if v.TokensInPerMin != 900 || v.TokensOutPerMin != 90 {
		t.Fatalf("tokens per minute %d / %d", v.TokensInPerMin, v.TokensOutPerMin)
	}
	// 8 first events in 5 minutes: 6 of 200, 800, 3000. Bins are within
	// 41% above the value.
	if v.FirstEventP50Ms == nil || *v.FirstEventP50Ms < 200 || *v.FirstEventP50Ms > 283 {
		t.Fatalf("p50 %v, want the bin of 200 ms", v.FirstEventP50Ms)
	}
	if *v.FirstEventP95Ms < 3000 || *v.FirstEventP95Ms > 4243 {
		t.Fatalf("p95 %v, want the bin of 3000 ms", *v.FirstEventP95Ms)
	}
	var total uint32
	for _, n := range v.Requests {
		total += n
	}
	if len(v.Requests) != Buckets || total != 10 || v.Requests[Buckets-3] != 6 {
		t.Fatalf("the requests column: %d steps, %d requests, last %v", len(v.Requests), total, v.Requests[Buckets-5:])
	}
	if v.Spend != nil {
		t.Fatalf("spend %+v without a RecordSpend", v.Spend)
	}

	// Nothing judged: no success rate, no quantile, as JSON nulls.
	var empty Overview
	e := empty.Snapshot(at)
	b, _ := json.Marshal(e)
	for _, want := range []string{`"success_rate":null`, `"first_event_p50_ms":null`, `"spend":null`, `"requests_per_min":0`} {
		if !strings.Contains(string(b), want) {
			t.Fatalf("empty overview %s: no %s", b, want)
		}
	}
}

func TestOverviewSpendPerHourAndReliabilityShare(t *testing.T) {
	var b Board
	// Spend started 10 minutes ago: 0.90 of answers and 0.10 of overhead.
	for i := range 10 {
		b.RecordSpend(at.Add(-time.Duration(10-i)*time.Minute), 0.09, 0.01)
	}
	b.RecordSpend(at.Add(-time.Hour), 100, 100) // out of the window
	v := b.Overview.Snapshot(at)
	s := v.Spend
	if s == nil {
		t.Fatal("no spend after RecordSpend")
	}
	if math.Abs(s.AnswerUSD-0.9) > 1e-9 || math.Abs(s.OverheadUSD-0.1) > 1e-9 || math.Abs(s.ReliabilityShare-0.1) > 1e-9 {
		t.Fatalf("spend %+v, want 0.90 + 0.10, share 10%%", s)
	}
	// 1.00 over the 10 minutes since the first step with spend: 6.00 an hour.
	if s.WindowS != 600 || math.Abs(s.USDPerHour-6) > 1e-9 {
		t.Fatalf("window %d s, %.4f USD/h; want 600 s, 6 USD/h", s.WindowS, s.USDPerHour)
	}
	// Prices configured, nothing spent: a spend of 0, not "no prices".
	var z Board
	z.RecordSpend(at.Add(-time.Minute), 0, 0)
	if s := z.Overview.Snapshot(at).Spend; s == nil || s.USDPerHour != 0 || s.ReliabilityShare != 0 {
		t.Fatalf("zero spend: %+v", s)
	}
}

func TestOverviewDropsARecordFromALapAgo(t *testing.T) {
	var o Overview
	o.RecordRequest(&Request{Time: at, Outcome: "success"}, nil)
	o.RecordRequest(&Request{Time: at.Add(-Buckets * Step), Outcome: "success"}, nil) // same slot, a lap older
	o.RecordSpend(at.Add(-Buckets*Step), 1, 1)
	if v := o.Snapshot(at); v.RequestsPerMin != 1 || v.Spend != nil {
		t.Fatalf("%d requests, spend %+v: a record from a lap ago was kept", v.RequestsPerMin, v.Spend)
	}
}

func TestBoardRecordRequestAllocatesNothing(t *testing.T) {
	var b Board
	chain := []Attempt{{Provider: "a", Reason: "initial", Outcome: "provider_error"}, {Provider: "b", Reason: "failover", Outcome: "request_success"}}
	r := Request{Time: at, Outcome: "success", Provider: "b", Model: "m", Site: "s", FirstEventMs: 100}
	if n := testing.AllocsPerRun(100, func() { b.Overview.RecordRequest(&r, chain) }); n != 0 {
		t.Fatalf("Overview.RecordRequest: %v allocations", n)
	}
	if n := testing.AllocsPerRun(100, func() { b.RecordSpend(at, 0.1, 0.01) }); n != 0 {
		t.Fatalf("RecordSpend: %v allocations", n)
	}
}

func TestFeedKeepsTheLastTransitionsNewestFirst(t *testing.T) {
	var b Board
	if got := b.Feed.Snapshot(); len(got) != 0 {
		t.Fatalf("a new feed has %d transitions", len(got))
	}
	for i := range FeedSize + 7 {
		b.RecordTransition(at.Add(time.Duration(i)*time.Second), "breaker_opened", fmt.Sprintf("p%d", i), strings.Repeat("x", 500))
	}
	got := b.Feed.Snapshot()
	if len(got) != FeedSize {
		t.Fatalf("%d transitions kept, want %d", len(got), FeedSize)
	}
	for i, tr := range got {
		want := FeedSize + 6 - i
		if tr.Provider != fmt.Sprintf("p%d", want) || !tr.Time.Equal(at.Add(time.Duration(want)*time.Second)) || tr.Kind != "breaker_opened" {
			t.Fatalf("transition %d: %+v, want p%d", i, tr, want)
		}
		if len(tr.Detail) != MaxDetail {
			t.Fatalf("a detail of %d bytes kept", len(tr.Detail))
		}
	}
	js, _ := json.Marshal(got[0])
	if !strings.HasPrefix(string(js), `{"time":"`) || !strings.Contains(string(js), `"kind":"breaker_opened","provider":"p56"`) {
		t.Fatalf("JSON %s", js)
	}
}
