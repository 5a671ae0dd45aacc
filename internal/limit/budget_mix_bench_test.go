package limit

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// BenchmarkHedgeBudgetMix replays one mix of requests through the hedge
// decision under three budgets and reports the first-event p99 and the
// input tokens hedging cost (overhead-%: hedged input tokens over the
// requests'), the figures docs/cost.md chooses a budget by:
//
//	go test -run '^$' -bench BenchmarkHedgeBudgetMix ./internal/limit
//
// The mix, fixed-seed: 100 requests a second for 60 s; 90% of 4k input
// tokens, 10% of 200k (an agent's turn); a provider whose first event
// takes 0.4-1.2 s, 1.5-4 s for a large prompt, and 20-40 s for 5% of the
// small requests and 40% of the large (the tail a hedge is for: long
// prompts are the slow ones); a hedge fired after 1.5 s (4 s for a large
// prompt) answers in the provider's usual time. Requests hedged: 8.5%,
// within the request-counted budget; their input tokens: a third of the
// traffic's. The cells: the budget counted in requests (10%), in input
// tokens (10% tokens), in tokens with large_prompt 100k 20s, and in
// tokens at 40%.
func BenchmarkHedgeBudgetMix(b *testing.B) {
	type req struct {
		at               time.Duration
		tokens           int64
		first, hedgeTook time.Duration
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var mix []req
	for i := range 6000 {
		r := req{at: time.Duration(i) * 10 * time.Millisecond, tokens: 4000}
		lo, hi := 400*time.Millisecond, 1200*time.Millisecond
		if rng.IntN(10) == 0 {
			r.tokens, lo, hi = 200_000, 1500*time.Millisecond, 4*time.Second
		}
		usual := func() time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo))) }
		r.first, r.hedgeTook = usual(), usual()
		slow := rng.IntN(100) < 5 // 5% of the small requests stall
		if r.tokens > 4000 {
			slow = rng.IntN(100) < 40 // and 40% of the large: long prompts are the slow ones
		}
		if slow {
			r.first = 20*time.Second + time.Duration(rng.Int64N(int64(20*time.Second)))
		}
		mix = append(mix, r)
	}
	for _, cell := range []struct {
		name       string
		percent    float64
		tokens     bool
		largeAfter time.Duration // 0: no large_prompt rule
	}{
		{"requests-10%", 10, false, 0},
		{"tokens-10%", 10, true, 0},
		{"tokens-10%+large_prompt", 10, true, 20 * time.Second},
		{"tokens-40%", 40, true, 0},
	} {
		b.Run(cell.name, func(b *testing.B) {
			var p99, overhead float64
			for b.Loop() {
				t0 := time.Unix(1_700_000_000, 0)
				bud := NewBudget(cell.percent, 1, 10*time.Second)
				if cell.tokens {
					bud = NewWeightedBudget(cell.percent, 1, 10*time.Second)
				}
				// The decisions in time order, as a server makes them: each
				// request's arrival, and its hedge timer when it fires.
				type event struct {
					at    time.Duration
					i     int
					hedge bool
				}
				events := make([]event, 0, 2*len(mix))
				delays := make([]time.Duration, len(mix))
				for i, r := range mix {
					delay := 1500 * time.Millisecond
					if r.tokens >= 100_000 {
						delay = 4 * time.Second
						if cell.largeAfter > 0 {
							delay = cell.largeAfter
						}
					}
					delays[i] = delay
					events = append(events, event{at: r.at, i: i})
					if r.first > delay {
						events = append(events, event{at: r.at + delay, i: i, hedge: true})
					}
				}
				slices.SortStableFunc(events, func(a, b event) int { return int(a.at - b.at) })
				lat := make([]time.Duration, len(mix))
				var reqTok, hedgeTok int64
				for _, ev := range events {
					r := mix[ev.i]
					if !ev.hedge {
						bud.RecordRequestN(t0.Add(ev.at), r.tokens)
						reqTok += r.tokens
						lat[ev.i] = r.first
						continue
					}
					if _, ok := bud.TakeN(t0.Add(ev.at), r.tokens); ok {
						hedgeTok += r.tokens
						lat[ev.i] = min(r.first, delays[ev.i]+r.hedgeTook)
					}
				}
				slices.Sort(lat)
				p99 = lat[len(lat)*99/100].Seconds()
				overhead = 100 * float64(hedgeTok) / float64(reqTok)
			}
			b.ReportMetric(p99, "p99-s")
			b.ReportMetric(overhead, "overhead-%")
		})
	}
}
