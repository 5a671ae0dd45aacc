package routing

import "math"

// Policy is how a request's first provider is chosen within a priority
// tier (the Caddyfile's lb_policy).
type Policy uint8

const (
	Adaptive       Policy = iota // least cost, with exploration (the default)
	WeightedRandom               // random, in proportion to weight
	First                        // in the order written
)

// Policy names, in Caddy's lb_policy words.
const (
	NameAdaptive       = "adaptive"
	NameWeightedRandom = "weighted_random"
	NameFirst          = "first"
)

// ParsePolicy reads a policy name; "" is the default, adaptive.
func ParsePolicy(s string) (Policy, bool) {
	switch s {
	case "", NameAdaptive:
		return Adaptive, true
	case NameWeightedRandom:
		return WeightedRandom, true
	case NameFirst:
		return First, true
	}
	return 0, false
}

func (p Policy) String() string {
	switch p {
	case WeightedRandom:
		return NameWeightedRandom
	case First:
		return NameFirst
	}
	return NameAdaptive
}

const (
	// Explore is the share of a tier's picks each provider other than the
	// least-cost one gets, at random: a provider that recovered is measured
	// again without waiting for a breaker probe.
	Explore = 0.01
	// DefaultCapacity is the attempts in flight that double a provider's
	// cost when it has no max_in_flight: LLM endpoints do not queue a
	// request behind another as a web server does, so attempts in flight
	// only tilt a choice between providers of near-equal speed.
	DefaultCapacity = 32
	// maxFailure caps the failure rate in the cost: a provider failing
	// every attempt costs 10x, not infinity (its breaker takes it out).
	maxFailure = 0.9
	// minQuota caps the quota factor at 10x.
	minQuota = 0.1
)

// Input is what the cost of one provider is made of.
type Input struct {
	// FirstEvent is the recent first-event time for the request's size
	// class, in nanoseconds; 0: not measured.
	FirstEvent float64
	InFlight   int64
	Capacity   int64   // max_in_flight, 0: DefaultCapacity
	Failure    float64 // recent failure rate, 0-1
	Quota      float64 // share of the keys' quota left, 0-1 (1: unknown or plenty)
	Weight     float64 // the operator's prior, default 1
}

// Cost is the expected time to a first event on the provider, as routing
// compares it: its recent first-event time (unmeasured counts as
// unmeasured: the tier's best, so it is tried), stretched by the attempts
// in flight (1 + in_flight/capacity), by the tries a failure rate f costs
// (1/(1-f)) and by a short quota (1/quota left), and divided by the
// provider's weight.
func Cost(in Input, unmeasured float64) float64 {
	lat := in.FirstEvent
	if lat <= 0 {
		lat = unmeasured
	}
	capacity := in.Capacity
	if capacity <= 0 {
		capacity = DefaultCapacity
	}
	load := 1 + float64(max(in.InFlight, 0))/float64(capacity)
	fail := 1 / (1 - min(max(in.Failure, 0), maxFailure))
	quota := 1 / min(max(in.Quota, minQuota), 1)
	w := in.Weight
	if w <= 0 {
		w = 1
	}
	return lat * load * fail * quota / w
}

// Unmeasured is the first-event time a provider without samples is given:
// the best measured in its tier, so a new or long-idle provider is tried
// at once; 1 s when nothing in the tier is measured (then weight and load
// decide).
func Unmeasured(ins []Input) float64 {
	best := 0.0
	for _, in := range ins {
		if in.FirstEvent > 0 && (best == 0 || in.FirstEvent < best) {
			best = in.FirstEvent
		}
	}
	if best == 0 {
		return 1e9
	}
	return best
}

// Why a provider was picked.
const (
	WhyBest     = "least_cost" // the tier's lowest cost
	WhyExplore  = "explore"    // the exploration share
	WhyWeighted = "weighted"   // weighted random (the policy, or a tier not measured yet)
	WhyFirst    = "first"      // the order written
)

// Pick chooses the provider a tier tries first from its costs: the least
// cost, except that with probability Explore×(len(costs)-1) one of the
// others is taken uniformly at random, so each keeps Explore of the picks.
// A tier nothing in which is measured yet (measured false) is picked by
// weight. Ties go to a random one of the tied. u, v and x are uniform
// draws in [0, 1).
func Pick(costs, weights []float64, measured bool, u, v, x float64) (int, string) {
	n := len(costs)
	switch {
	case n == 0:
		return -1, ""
	case n == 1:
		return 0, WhyBest
	case !measured:
		return WeightedPick(weights, u), WhyWeighted
	}
	best, ties := 0, 1
	for i := 1; i < n; i++ {
		switch {
		case costs[i] < costs[best]:
			best, ties = i, 1
		case costs[i] == costs[best]:
			ties++
			if x*float64(ties) < 1 { // reservoir: each of the tied equally likely
				best = i
			}
			x = math.Mod(x*float64(ties), 1)
		}
	}
	if u < Explore*float64(n-1) {
		k := min(int(v*float64(n-1)), n-2)
		if k >= best {
			k++
		}
		return k, WhyExplore
	}
	return best, WhyBest
}

// WeightedPick draws an index with probability weight/sum (a weight <= 0
// counts as 1).
func WeightedPick(weights []float64, u float64) int {
	sum := 0.0
	for _, w := range weights {
		sum += positive(w)
	}
	t := u * sum
	for i, w := range weights {
		if t < positive(w) {
			return i
		}
		t -= positive(w)
	}
	return len(weights) - 1
}

func positive(w float64) float64 {
	if w <= 0 {
		return 1
	}
	return w
}
