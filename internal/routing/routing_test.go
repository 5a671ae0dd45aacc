package routing

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestCost(t *testing.T) {
	base := Input{FirstEvent: 100e6, Weight: 1, Quota: 1}
	with := func(f func(*Input)) Input { in := base; f(&in); return in }
	tests := []struct {
		name string
		in   Input
		want float64
	}{
		{"first-event time alone", base, 100e6},
		{"unmeasured takes the tier's best", with(func(in *Input) { in.FirstEvent = 0 }), 50e6},
		{"32 in flight double it", with(func(in *Input) { in.InFlight = 32 }), 200e6},
		{"max_in_flight is the capacity", with(func(in *Input) { in.InFlight = 4; in.Capacity = 8 }), 150e6},
		{"half the attempts failing double it", with(func(in *Input) { in.Failure = 0.5 }), 200e6},
		{"failure capped at 10x", with(func(in *Input) { in.Failure = 1 }), 1000e6},
		{"half the quota left doubles it", with(func(in *Input) { in.Quota = 0.5 }), 200e6},
		{"no quota left: 10x", with(func(in *Input) { in.Quota = 0 }), 1000e6},
		{"weight 2 halves it", with(func(in *Input) { in.Weight = 2 }), 50e6},
		{"weight 0 counts as 1", with(func(in *Input) { in.Weight = 0 }), 100e6},
	}
	for _, tt := range tests {
		if got := Cost(tt.in, 50e6); math.Abs(got-tt.want) > 1 {
			t.Errorf("%s: cost %v, want %v", tt.name, got, tt.want)
		}
	}
	if got := Unmeasured([]Input{{}, {FirstEvent: 300}, {FirstEvent: 200}}); got != 200 {
		t.Errorf("Unmeasured = %v, want the best measured 200", got)
	}
	if got := Unmeasured([]Input{{}, {}}); got != 1e9 {
		t.Errorf("Unmeasured of a tier with nothing measured = %v, want 1s", got)
	}
}

// pickShares draws n picks and returns each index's share and the
// share of picks made for each reason.
func pickShares(costs, weights []float64, measured bool, n int) ([]float64, map[string]float64) {
	r := rand.New(rand.NewPCG(1, 2))
	shares := make([]float64, len(costs))
	why := map[string]float64{}
	for range n {
		i, w := Pick(costs, weights, measured, r.Float64(), r.Float64(), r.Float64())
		shares[i] += 1 / float64(n)
		why[w] += 1 / float64(n)
	}
	return shares, why
}

func TestPickLeastCostWithExploration(t *testing.T) {
	shares, why := pickShares([]float64{300, 100, 900}, []float64{1, 1, 1}, true, 200000)
	if shares[1] < 0.975 || shares[1] > 0.985 {
		t.Errorf("least cost got %.3f of the picks, want 1 - 2%% explored to the others", shares[1])
	}
	for i, s := range shares {
		if s < Explore*0.9 {
			t.Errorf("provider %d got %.4f of the picks, want at least ~%v", i, s, Explore)
		}
	}
	if math.Abs(why[WhyExplore]-2*Explore) > 0.002 {
		t.Errorf("explored %.4f, want %v", why[WhyExplore], 2*Explore)
	}
}

func TestPickUnmeasuredByWeight(t *testing.T) {
	shares, why := pickShares([]float64{1, 1, 1}, []float64{1, 2, 1}, false, 100000)
	for i, want := range []float64{0.25, 0.5, 0.25} {
		if math.Abs(shares[i]-want) > 0.01 {
			t.Errorf("provider %d: share %.3f, want %v (its weight's)", i, shares[i], want)
		}
	}
	if why[WhyWeighted] != 1 && math.Abs(why[WhyWeighted]-1) > 1e-9 {
		t.Errorf("reasons %v, want all weighted", why)
	}
}

func TestPickTiesAtRandom(t *testing.T) {
	shares, _ := pickShares([]float64{5, 2, 2, 2}, []float64{1, 1, 1, 1}, true, 100000)
	for i := 1; i < 4; i++ {
		if math.Abs(shares[i]-1.0/3) > 0.02 {
			t.Errorf("tied provider %d: share %.3f, want about a third", i, shares[i])
		}
	}
	if i, _ := Pick([]float64{math.Inf(1), 7}, []float64{1, 1}, true, 0.9, 0, 0); i != 1 {
		t.Errorf("an infinite cost won over 7")
	}
}

var t0 = time.Unix(1_800_000_000, 0)

// feed records a first event of d every gap from at for span and returns
// the time after the last.
func feed(s *Stats, class int, d, gap, span time.Duration, at time.Time) time.Time {
	for end := at.Add(span); at.Before(end); at = at.Add(gap) {
		s.ObserveFirstEvent(class, d, at)
	}
	return at
}

// TestFirstEventFollowsWithinSeconds: a busy provider going from 100 ms to
// 500 ms shows above 300 ms within two seconds of traffic; a provider seen
// only by exploration (a sample a second) shows its recovery within a few.
func TestFirstEventFollowsWithinSeconds(t *testing.T) {
	var s Stats
	at := feed(&s, 0, 100*time.Millisecond, 10*time.Millisecond, 10*time.Second, t0)
	if est, _ := s.FirstEvent(0, at); est < 95*time.Millisecond || est > 105*time.Millisecond {
		t.Fatalf("steady 100 ms: estimate %v", est)
	}
	at = feed(&s, 0, 500*time.Millisecond, 10*time.Millisecond, 2*time.Second, at)
	if est, _ := s.FirstEvent(0, at); est < 300*time.Millisecond {
		t.Fatalf("2 s after turning 500 ms: estimate %v, want above 300 ms", est)
	}
	at = feed(&s, 0, 500*time.Millisecond, 10*time.Millisecond, 10*time.Second, at)
	n := 0
	for est, _ := s.FirstEvent(0, at); est > 300*time.Millisecond; est, _ = s.FirstEvent(0, at) {
		at = at.Add(time.Second)
		s.ObserveFirstEvent(0, 100*time.Millisecond, at)
		n++
	}
	if n > 3 {
		t.Fatalf("recovered at a sample a second: %d samples to go below 300 ms, want at most 3", n)
	}
}

func TestObserveAtLeastOnlyRaises(t *testing.T) {
	var s Stats
	s.ObserveFirstEvent(0, 300*time.Millisecond, t0)
	s.ObserveAtLeast(0, 20*time.Millisecond, t0.Add(time.Second)) // a loser cancelled early
	if est, _ := s.FirstEvent(0, t0.Add(time.Second)); est != 300*time.Millisecond {
		t.Fatalf("a 20 ms loser moved the estimate to %v", est)
	}
	s.ObserveAtLeast(0, 2*time.Second, t0.Add(10*time.Second)) // cancelled after 2 s: at least that
	if est, _ := s.FirstEvent(0, t0.Add(10*time.Second)); est < time.Second {
		t.Fatalf("a 2 s loser left the estimate at %v", est)
	}
	var fresh Stats
	fresh.ObserveAtLeast(3, time.Second, t0)
	if est, ok := fresh.FirstEvent(3, t0); !ok || est != time.Second {
		t.Fatalf("unmeasured, a 1 s loss: %v %v, want 1s", est, ok)
	}
}

func TestFirstEventClassFallbackAndStaleness(t *testing.T) {
	var s Stats
	s.ObserveFirstEvent(2, 400*time.Millisecond, t0)
	if est, ok := s.FirstEvent(2, t0); !ok || est != 400*time.Millisecond {
		t.Fatalf("own class: %v %v", est, ok)
	}
	if est, ok := s.FirstEvent(9, t0); !ok || est != 400*time.Millisecond {
		t.Fatalf("a class without samples falls back to the overall average: %v %v", est, ok)
	}
	if _, ok := s.FirstEvent(2, t0.Add(stale+time.Second)); ok {
		t.Fatal("a sample older than 5 minutes still counts: the provider would never be explored as unmeasured")
	}
	for i := range 50 {
		s.ObserveFailure(t0.Add(time.Duration(i) * time.Second))
	}
	s.Reset()
	if _, ok := s.FirstEvent(2, t0); ok {
		t.Fatal("Reset kept the estimate")
	}
	if s.ObserveSuccess(t0.Add(time.Minute)); s.FailureRate(t0.Add(time.Minute)) != 0 {
		t.Fatalf("Reset kept the failure rate: %v after a success", s.FailureRate(t0.Add(time.Minute)))
	}
}

func TestFailureRateAndPicks(t *testing.T) {
	var s Stats
	at := t0
	for i := range 1000 { // 50 s, five decay times
		at = at.Add(50 * time.Millisecond)
		if i%2 == 0 {
			s.ObserveFailure(at)
		} else {
			s.ObserveSuccess(at)
		}
	}
	if f := s.FailureRate(at); f < 0.4 || f > 0.6 {
		t.Fatalf("every other attempt failing: rate %.2f", f)
	}
	var one Stats
	one.ObserveFailure(t0)
	if f := one.FailureRate(t0); f > 0.15 {
		t.Fatalf("a provider's first failure: rate %.2f, want a prior of health to hold it low", f)
	}
	for range 100 {
		at = at.Add(100 * time.Millisecond)
		s.ObserveFirstEvent(0, time.Second, at)
	}
	if f := s.FailureRate(at); f > 0.5*0.5 {
		t.Fatalf("10 s of successes after: rate %.2f, want it decayed below a quarter", f)
	}
	var a, b Stats
	for i := range 1000 {
		at = at.Add(10 * time.Millisecond)
		if i%4 == 0 {
			b.NotePick(at)
		} else {
			a.NotePick(at)
		}
	}
	share := a.PickRate(at) / (a.PickRate(at) + b.PickRate(at))
	if math.Abs(share-0.75) > 0.02 {
		t.Fatalf("share %.3f, want 0.75", share)
	}
}

func TestParsePolicy(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Policy
		ok   bool
	}{{"", Adaptive, true}, {"adaptive", Adaptive, true}, {"weighted_random", WeightedRandom, true}, {"first", First, true}, {"least_conn", 0, false}} {
		got, ok := ParsePolicy(tc.in)
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("ParsePolicy(%q) = %v, %v", tc.in, got, ok)
		}
		if ok && tc.in != "" && got.String() != tc.in {
			t.Errorf("%v.String() = %q", got, got.String())
		}
	}
}
