package engine

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/affinity"
	"github.com/llmhedge/caddy-llm-hedge/internal/routing"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// routeTier builds providers of one tier whose recent first events took
// the given times (0: never measured), with the clock fixed at healthT0.
func routeTier(t testing.TB, firsts ...time.Duration) []*provider {
	saved := clock
	t.Cleanup(func() { clock = saved })
	clock = func() time.Time { return healthT0 }
	var out []*provider
	for i, d := range firsts {
		name := string(rune('a' + i))
		p := &provider{cfg: &ProviderConfig{Name: name}, name: name, weight: 1, health: newTestHealth(name)}
		if d > 0 {
			p.health.Route.ObserveFirstEvent(0, d, healthT0)
		}
		out = append(out, p)
	}
	return out
}

// draws returns a rand that yields vs in turn, forever.
func draws(vs ...float64) func() float64 {
	i := 0
	return func() float64 { v := vs[i%len(vs)]; i++; return v }
}

func names(ps []*provider) string {
	s := ""
	for _, p := range ps {
		s += p.name
	}
	return s
}

func TestOrderTier(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name    string
		firsts  []time.Duration
		policy  routing.Policy
		rand    []float64
		prepare func([]*provider)
		want    string // the order
		why     string
		best    string // the least-cost provider named when the pick is another
	}{
		{name: "least cost first, the rest by cost", firsts: []time.Duration{300 * ms, 100 * ms, 900 * ms}, rand: []float64{0.5},
			want: "bac", why: routing.WhyBest},
		{name: "exploration: a random one, then the least cost", firsts: []time.Duration{300 * ms, 100 * ms, 900 * ms},
			rand: []float64{0.001, 0.99, 0}, want: "cba", why: routing.WhyExplore, best: "b"},
		{name: "unmeasured ties with the tier's best", firsts: []time.Duration{300 * ms, 0, 100 * ms}, rand: []float64{0.5, 0.5, 0.9},
			want: "bca", why: routing.WhyBest},
		{name: "nothing measured: by weight", firsts: []time.Duration{0, 0, 0}, rand: []float64{0.7},
			want: "cab", why: routing.WhyWeighted},
		{name: "in flight tilt near-equals", firsts: []time.Duration{100 * ms, 110 * ms}, rand: []float64{0.5},
			prepare: func(ps []*provider) {
				for range 8 {
					ps[0].health.BeginAttempt()
				}
			}, want: "ba", why: routing.WhyBest},
		{name: "failures cost tries", firsts: []time.Duration{100 * ms, 150 * ms}, rand: []float64{0.5},
			prepare: func(ps []*provider) {
				for i := range 100 {
					ps[0].health.Route.ObserveFailure(healthT0.Add(time.Duration(i) * 100 * ms))
				}
			}, want: "ba", why: routing.WhyBest},
		{name: "weight is a prior", firsts: []time.Duration{100 * ms, 150 * ms}, rand: []float64{0.5},
			prepare: func(ps []*provider) { ps[1].weight = 2 }, want: "ba", why: routing.WhyBest},
		{name: "an open breaker goes last", firsts: []time.Duration{100 * ms, 300 * ms, 900 * ms}, rand: []float64{0.5},
			prepare: func(ps []*provider) { ps[0].health.OpenAtLeast(healthT0, healthT0.Add(time.Minute)) },
			want:    "bca", why: routing.WhyBest},
		{name: "first: as written", firsts: []time.Duration{300 * ms, 100 * ms}, policy: routing.First, rand: []float64{0.5},
			want: "ab", why: routing.WhyFirst},
		{name: "weighted_random ignores speed", firsts: []time.Duration{300 * ms, 100 * ms}, policy: routing.WeightedRandom,
			rand: []float64{0.9, 0.1}, want: "ab", why: routing.WhyWeighted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps := routeTier(t, tt.firsts...)
			if tt.prepare != nil {
				tt.prepare(ps)
			}
			h := &Engine{policy: tt.policy, rand: draws(tt.rand...)}
			dec := h.orderTier(ps, 0, healthT0, true)
			if got := names(ps); got != tt.want || dec.why != tt.why || dec.pick != ps[0] {
				t.Fatalf("order %s, why %s, pick %v; want %s, %s", got, dec.why, dec.pick.name, tt.want, tt.why)
			}
			if got := ""; dec.best != nil {
				got = dec.best.name
				if got != tt.best {
					t.Fatalf("least cost named %q, want %q", got, tt.best)
				}
			} else if tt.best != "" {
				t.Fatalf("least cost not named, want %q", tt.best)
			}
		})
	}
}

// TestAffinityWithinTheBound: a session's pick stays first while its first
// events are within 3x the tier's fastest, and the adaptive pick replaces
// it beyond; weighted_random keeps the pick whatever its speed.
func TestAffinityWithinTheBound(t *testing.T) {
	for _, tc := range []struct {
		pickTime time.Duration
		policy   routing.Policy
		want     string
	}{
		{250 * time.Millisecond, routing.Adaptive, whyAffinity},
		{350 * time.Millisecond, routing.Adaptive, whyAffinityMoved},
		{350 * time.Millisecond, routing.WeightedRandom, whyAffinity},
	} {
		ps := routeTier(t, 100*time.Millisecond, 200*time.Millisecond)
		h := &Engine{providers: ps, policy: tc.policy, affinity: affinity.NewTable(0, 0), rand: draws(0.5)}
		h.affinity.Put("s", "b", healthT0)
		ps[1].health.Route.Reset()
		ps[1].health.Route.ObserveFirstEvent(0, tc.pickTime, healthT0)
		cands, dec := h.candidates(dialectAnthropic, "m", "s", 0)
		first := "b"
		if tc.want == whyAffinityMoved {
			first = "a"
		}
		if cands[0].name != first || dec.why != tc.want {
			t.Errorf("%v %v: first %s (%s), want %s (%s)", tc.policy, tc.pickTime, cands[0].name, dec.why, first, tc.want)
		}
		if tc.want == whyAffinityMoved && (dec.moved != ps[1] || dec.pick != ps[0]) {
			t.Errorf("moved %v: decision does not name the pick it left", dec)
		}
	}
}

// TestRoutePickAllocs: ordering a tier, the pick included, allocates
// nothing.
func TestRoutePickAllocs(t *testing.T) {
	ps := routeTier(t, 300*time.Millisecond, 100*time.Millisecond, 900*time.Millisecond)
	h := &Engine{rand: draws(0.3, 0.6, 0.9, 0.005)}
	if n := testing.AllocsPerRun(1000, func() { h.orderTier(ps, 0, healthT0, true) }); n != 0 {
		t.Fatalf("orderTier allocates %v times per pick", n)
	}
}

// BenchmarkRoutePick is the cost of routing one request: the adaptive
// order of a tier of three measured providers (their costs, the pick, the
// rest by cost). candidates adds the request's candidate list (one slice,
// as before routing existed).
func BenchmarkRoutePick(b *testing.B) {
	for _, n := range []int{3, 8} {
		firsts := make([]time.Duration, n)
		for i := range firsts {
			firsts[i] = time.Duration(100+37*i) * time.Millisecond
		}
		ps := routeTier(b, firsts...)
		for _, p := range ps {
			p.cfg.Models = nil
		}
		h := &Engine{providers: ps, rand: rand.Float64} // as Provision sets it
		b.Run("orderTier/"+string(rune('0'+n)), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				h.orderTier(ps, 0, healthT0, true)
			}
		})
		b.Run("candidates/"+string(rune('0'+n)), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				h.candidates(dialectAnthropic, "m", "", 0)
			}
		})
	}
}

// TestRerankForHedge: when a hedge starts, the unused candidates of each
// tier are ordered by their cost then; used ones keep their places, and
// the order of another policy is left alone.
func TestRerankForHedge(t *testing.T) {
	ms := time.Millisecond
	ps := routeTier(t, 100*ms, 300*ms, 500*ms, 900*ms)
	ps[3].cfg.Priority = 1
	for _, policy := range []routing.Policy{routing.Adaptive, routing.WeightedRandom} {
		st := &requestState{h: &Engine{policy: policy}, req: &wire.Request{}, plan: newPlan([]*provider{ps[0], ps[1], ps[2], ps[3]}, "m")}
		st.plan.used[0] = true
		// Since the plan was made, c answers in 150 ms and b has 64 attempts in flight.
		ps[2].health.Route.Reset()
		ps[2].health.Route.ObserveFirstEvent(0, 150*ms, healthT0)
		for range 64 {
			ps[1].health.BeginAttempt()
		}
		rerank(st)
		want := "acbd"
		if policy != routing.Adaptive {
			want = "abcd"
		}
		if got := names(st.plan.cands); got != want {
			t.Errorf("%v: plan %s after rerank, want %s", policy, got, want)
		}
		for range 64 {
			ps[1].health.EndAttempt()
		}
	}
}

// TestExplorationHedgeDelay: an exploring first attempt is raced after
// at most 3x the least-cost provider's recent first event, below
// hedge.min; any other attempt keeps its provider's hedge delay.
func TestExplorationHedgeDelay(t *testing.T) {
	ms := time.Millisecond
	ps := routeTier(t, 900*ms, 100*ms)
	h := &Engine{Config: Config{Hedge: Hedge{Percentile: 90, Min: 500 * ms, Max: 8 * time.Second}}}
	explore := routeDecision{why: routing.WhyExplore, pick: ps[0], best: ps[1], bestEst: 100 * ms}
	for _, tc := range []struct {
		name  string
		route routeDecision
		n     int
		want  time.Duration
	}{
		{"exploring first attempt", explore, 1, 300 * ms},
		{"a later attempt", explore, 2, 2 * time.Second},
		{"the least-cost pick", routeDecision{why: routing.WhyBest, pick: ps[0]}, 1, 2 * time.Second},
		{"explored with nothing measured to bound it", routeDecision{why: routing.WhyExplore, pick: ps[0]}, 1, 2 * time.Second},
	} {
		st := &requestState{h: h, req: &wire.Request{}, route: tc.route}
		if got := hedgeDelayFirst(st, &attempt{p: ps[0], n: tc.n}); got != tc.want {
			t.Errorf("%s: hedge delay %v, want %v (bootstrap max/4 = 2s)", tc.name, got, tc.want)
		}
	}
}

// hedge { large_prompt <tokens> <delay> }: a request of that many
// estimated input tokens or more is hedged after the longer delay, even
// when it explores; a smaller one keeps its hedge delay.
func TestLargePromptHedgeDelay(t *testing.T) {
	ms := time.Millisecond
	ps := routeTier(t, 900*ms, 100*ms)
	h := &Engine{Config: Config{Hedge: Hedge{Delay: time.Second, LargeTokens: 50_000, LargeAfter: 20 * time.Second}}}
	explore := routeDecision{why: routing.WhyExplore, pick: ps[0], best: ps[1], bestEst: 100 * ms}
	for _, tc := range []struct {
		name  string
		bytes int
		want  time.Duration
	}{
		{"a 200k-token prompt", 800_000, 20 * time.Second},
		{"at the threshold", 200_000, 20 * time.Second},
		{"a small prompt, exploring", 4_000, 300 * ms},
	} {
		st := &requestState{h: h, req: &wire.Request{Body: make([]byte, tc.bytes)}, route: explore}
		if got := hedgeDelayFirst(st, &attempt{p: ps[0], n: 1}); got != tc.want {
			t.Errorf("%s: hedge delay %v, want %v", tc.name, got, tc.want)
		}
	}
}
