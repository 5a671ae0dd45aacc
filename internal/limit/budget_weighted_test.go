package limit

import (
	"testing"
	"time"
)

// With a mix of small and 200k-token requests where the big ones are the
// slow ones (each asks for a hedge of its own size, and half the small
// ones do): a weighted budget keeps the hedged tokens within its share of
// the requests' tokens plus the floor (in requests of the mean size),
// while a request-counted one grants the big hedges by count and spends
// most of the traffic's tokens again.
func TestWeightedBudgetBoundsTokens(t *testing.T) {
	const percent, floor = 10.0, 1.0
	window := 10 * time.Second
	t0 := time.Unix(1_700_000_000, 0)
	weighted := NewWeightedBudget(percent, floor, window)
	counted := NewBudget(percent, floor, window)
	var countedExtraTokens, reqTokens int64
	// 100 requests a second for 10 s: nine of 1,000 tokens, then one of
	// 200,000.
	for i := range 1000 {
		now := t0.Add(time.Duration(i) * 10 * time.Millisecond)
		size := int64(1000)
		if i%10 == 0 {
			size = 200_000
		}
		reqTokens += size
		weighted.RecordRequestN(now, size)
		counted.RecordRequestN(now, size)
		if size == 1000 && i%2 == 1 {
			continue // a fast small request: no hedge
		}
		weighted.TakeN(now, size)
		if _, ok := counted.TakeN(now, size); ok {
			countedExtraTokens += size
		}
	}
	end := t0.Add(9990 * time.Millisecond)
	reqW, extraW := weighted.SnapshotWeights(end)
	if reqW != reqTokens {
		t.Fatalf("window holds %d request tokens, want %d", reqW, reqTokens)
	}
	requests, _ := weighted.Snapshot(end)
	mean := float64(reqW) / float64(requests)
	limit := percent/100*float64(reqW) + floor*window.Seconds()*mean
	if float64(extraW) > limit {
		t.Fatalf("hedged %d tokens, over the budget's %.0f (10%% of %d plus the floor)", extraW, limit, reqW)
	}
	if extraW == 0 {
		t.Fatal("the weighted budget granted nothing")
	}
	if float64(countedExtraTokens) <= limit {
		t.Fatalf("the request-counted budget hedged %d tokens, within %.0f: the mix does not show the difference", countedExtraTokens, limit)
	}
	t.Logf("request tokens %d; hedged: weighted %d (%.1f%%), request-counted %d (%.1f%%)", reqW,
		extraW, 100*float64(extraW)/float64(reqW), countedExtraTokens, 100*float64(countedExtraTokens)/float64(reqW))
}

// A weighted budget's refund gives back the weight taken.
func TestWeightedBudgetRefund(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	b := NewWeightedBudget(10, 0, 10*time.Second)
	b.RecordRequestN(t0, 10_000)
	tok, ok := b.TakeN(t0, 1000)
	if !ok {
		t.Fatal("10% of 10,000 tokens refused 1,000")
	}
	if _, ok := b.TakeN(t0, 1); ok {
		t.Fatal("the budget granted past its share")
	}
	b.RefundN(tok, 1000)
	if !b.AllowsN(t0, 1000) {
		t.Fatal("the refund did not give the weight back")
	}
}
