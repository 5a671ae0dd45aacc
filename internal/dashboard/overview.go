package dashboard

import (
	"strings"
	"sync"
	"time"
)

// The ways a request was rescued: it succeeded, and would not have
// without the module (RescueKinds in this order).
const (
	RescueFailover     = "failover"     // an attempt before the winner failed, or the winner was a retry or failover
	RescueHedge        = "hedge"        // the winner was a hedge
	RescueContinuation = "continuation" // a continuation completed a cut stream
	RescueTranslation  = "translation"  // the winner spoke another dialect, translated
)

// RescueKinds are the rescue kinds, in the order a request is classified
// by (the first that applies).
var RescueKinds = [...]string{RescueContinuation, RescueHedge, RescueFailover, RescueTranslation}

const rescueKinds = len(RescueKinds)

// Rescue says how r (with its attempts chain) was rescued, or "": a
// request that did not succeed, or that its first attempt served alone.
func Rescue(r *Request, chain []Attempt) string {
	if r.Outcome != "success" {
		return ""
	}
	failedBefore, winner := false, -1
	for i, a := range chain {
		if strings.HasPrefix(a.Reason, "resume_") && ClassifyOutcome(a.Outcome) == OutcomeOK {
			return RescueContinuation
		}
		switch {
		case winner < 0 && (a.Outcome == "request_success" || a.Outcome == "hedge_winner" ||
			(a.Outcome == "stream_error" && a.Provider == r.Provider)):
			winner = i
		case winner < 0 && ClassifyOutcome(a.Outcome) == OutcomeError:
			failedBefore = true
		}
	}
	if winner >= 0 {
		switch chain[winner].Reason {
		case "hedge_triggered":
			return RescueHedge
		case "retry", "failover", "fallback", "context_fallback":
			return RescueFailover
		}
	}
	if failedBefore {
		return RescueFailover
	}
	if r.Translated {
		return RescueTranslation
	}
	return ""
}

// overviewBucket is one step of the whole board: requests, not attempts.
type overviewBucket struct {
	mu sync.Mutex
	overviewCounts
}

type overviewCounts struct {
	step      int64
	requests  uint32 // every completion request that ended in the step
	judged    uint32 // of which the success rate counts (not a client's error or abort)
	ok        uint32 // of which succeeded
	rescued   [rescueKinds]uint32
	tokensIn  uint64 // the tokens the clients were told
	tokensOut uint64
	latency   [latencyBins]uint32 // the winners' first events

	spent                  bool // RecordSpend was called in the step
	answerUSD, overheadUSD float64
}

// reset makes b the bucket of step (b.mu held); false when step is older
// than the bucket's (a record from a lap ago), which is then dropped.
func (b *overviewBucket) reset(step int64) bool {
	if b.step == step {
		return true
	}
	if step < b.step {
		return false
	}
	b.overviewCounts = overviewCounts{step: step}
	return true
}

// Overview is the board's overview strip: per step of the series, the
// requests, successes, rescues, tokens, winners' first events and spend
// of every provider together. Fixed size: Buckets steps of ~200 bytes.
type Overview struct {
	buckets [Buckets]overviewBucket
}

func (o *Overview) bucket(t time.Time) (*overviewBucket, int64) {
	step := t.UnixNano() / int64(Step)
	return &o.buckets[((step%Buckets)+Buckets)%Buckets], step
}

// RecordRequest counts one finished request (with its attempts chain) at
// r.Time. A client's error or abort is counted as a request, not in the
// success rate; a request without a first event adds no latency.
func (o *Overview) RecordRequest(r *Request, chain []Attempt) {
	rescue := Rescue(r, chain)
	b, step := o.bucket(r.Time)
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.reset(step) {
		return
	}
	b.requests++
	switch r.Outcome {
	case "client_error", "client_abort":
	case "success":
		b.judged++
		b.ok++
	default:
		b.judged++
	}
	for i, k := range RescueKinds {
		if k == rescue {
			b.rescued[i]++
		}
	}
	b.tokensIn += uint64(max(r.InputTokens, 0))
	b.tokensOut += uint64(max(r.OutputTokens, 0))
	if r.FirstEventMs > 0 {
		b.latency[latencyBin(time.Duration(r.FirstEventMs)*time.Millisecond)]++
	}
}

// RecordSpend adds a request's spend at now: what its answer cost and
// what reliability cost on top (hedges, continuations, failed attempts a
// provider bills).
func (o *Overview) RecordSpend(now time.Time, answerUSD, overheadUSD float64) {
	b, step := o.bucket(now)
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.reset(step) {
		return
	}
	b.spent = true
	b.answerUSD += answerUSD
	b.overheadUSD += overheadUSD
}

// The windows of the overview: rates over the last minute, quantiles
// over the last five, spend over the whole series.
const (
	RateWindow    = time.Minute
	LatencyWindow = 5 * time.Minute
	SpendWindow   = Buckets * Step
)

// OverviewView is the overview strip as /llm_hedge/overview answers it.
// A figure with nothing to say is null: no request judged has no success
// rate, no first event no quantile, and no RecordSpend in SpendWindow no
// Spend (no price configured: the tokens are the figures then).
type OverviewView struct {
	Time            time.Time         `json:"time"`
	RateWindowS     int64             `json:"rate_window_s"`
	RequestsPerMin  uint32            `json:"requests_per_min"`
	SuccessRate     *float64          `json:"success_rate"` // successes over requests not a client's error or abort
	Judged          uint32            `json:"judged"`
	RescuedPerMin   uint32            `json:"rescued_per_min"`
	Rescued         map[string]uint32 `json:"rescued"` // by kind, last minute
	TokensInPerMin  uint64            `json:"input_tokens_per_min"`
	TokensOutPerMin uint64            `json:"output_tokens_per_min"`

	LatencyWindowS  int64    `json:"latency_window_s"`
	FirstEventP50Ms *float64 `json:"first_event_p50_ms"`
	FirstEventP95Ms *float64 `json:"first_event_p95_ms"`

	// Requests is the requests per step over the whole series, oldest
	// first, from Start (unix seconds), for a sparkline.
	Start    int64    `json:"start"`
	StepS    int64    `json:"step_s"`
	Requests []uint32 `json:"requests"`

	Spend *SpendView `json:"spend"`
}

// SpendView is the spend of the last WindowS seconds (from the first step
// with a RecordSpend, at most SpendWindow) and its hourly rate.
type SpendView struct {
	WindowS          int64   `json:"window_s"`
	USDPerHour       float64 `json:"usd_per_hour"`
	AnswerUSD        float64 `json:"answer_usd"`
	OverheadUSD      float64 `json:"overhead_usd"`
	ReliabilityShare float64 `json:"reliability_share"` // overhead over the whole spend; 0 when nothing was spent
}

// Snapshot returns the overview at now.
func (o *Overview) Snapshot(now time.Time) OverviewView {
	last := now.UnixNano() / int64(Step)
	first := last - Buckets + 1
	rateFrom := last - int64(RateWindow/Step) + 1
	latFrom := last - int64(LatencyWindow/Step) + 1
	v := OverviewView{
		Time: now, RateWindowS: int64(RateWindow / time.Second), LatencyWindowS: int64(LatencyWindow / time.Second),
		Start: first * int64(Step) / int64(time.Second), StepS: int64(Step / time.Second),
		Requests: make([]uint32, Buckets), Rescued: make(map[string]uint32, rescueKinds),
	}
	var ok uint32
	var rescued [rescueKinds]uint32
	var lat [latencyBins]uint32
	var spend SpendView
	spendFrom := int64(-1)
	for i := range Buckets {
		step := first + int64(i)
		b := &o.buckets[((step%Buckets)+Buckets)%Buckets]
		b.mu.Lock()
		if b.step != step {
			b.mu.Unlock()
			continue
		}
		v.Requests[i] = b.requests
		if step >= rateFrom {
			v.RequestsPerMin += b.requests
			v.Judged += b.judged
			ok += b.ok
			for k, n := range b.rescued {
				rescued[k] += n
			}
			v.TokensInPerMin += b.tokensIn
			v.TokensOutPerMin += b.tokensOut
		}
		if step >= latFrom {
			for k, n := range b.latency {
				lat[k] += n
			}
		}
		if b.spent {
			if spendFrom < 0 {
				spendFrom = step
			}
			spend.AnswerUSD += b.answerUSD
			spend.OverheadUSD += b.overheadUSD
		}
		b.mu.Unlock()
	}
	if v.Judged > 0 {
		r := float64(ok) / float64(v.Judged)
		v.SuccessRate = &r
	}
	for k, n := range rescued {
		v.Rescued[RescueKinds[k]] = n
		v.RescuedPerMin += n
	}
	if p50, p95 := quantiles(&lat); p50 > 0 {
		v.FirstEventP50Ms, v.FirstEventP95Ms = &p50, &p95
	}
	if spendFrom >= 0 {
		// From the start of the first step with spend to now: the rate of
		// the time spend was recorded in, not of 15 minutes before it.
		span := now.Sub(time.Unix(0, spendFrom*int64(Step)))
		spend.WindowS = int64(span.Round(time.Second) / time.Second)
		if total := spend.AnswerUSD + spend.OverheadUSD; total > 0 {
			spend.USDPerHour = total / span.Hours()
			spend.ReliabilityShare = spend.OverheadUSD / total
		}
		v.Spend = &spend
	}
	return v
}

// FeedSize is the number of transitions the feed keeps.
const FeedSize = 50

// Transition is one change of a provider's state, or a reload, as the
// feed shows it.
type Transition struct {
	Time     time.Time `json:"time"`
	Kind     string    `json:"kind"` // breaker_opened, breaker_closed, breaker_reset, key_disabled, key_reenabled, reload
	Provider string    `json:"provider,omitempty"`
	Detail   string    `json:"detail,omitempty"`
}

// MaxDetail bounds a transition's detail.
const MaxDetail = 160

// Feed is the ring of the last FeedSize transitions. Transitions are
// rare (one per state change, not per request): one mutex guards it.
type Feed struct {
	mu   sync.Mutex
	n    uint64
	ring [FeedSize]Transition
}

// Record adds t to the feed (its strings cut and copied).
func (f *Feed) Record(t Transition) {
	t.Kind, t.Provider = cut(t.Kind), cut(t.Provider)
	if len(t.Detail) > MaxDetail {
		t.Detail = t.Detail[:MaxDetail]
	}
	t.Detail = strings.Clone(t.Detail)
	f.mu.Lock()
	f.ring[f.n%FeedSize] = t
	f.n++
	f.mu.Unlock()
}

// Snapshot returns the transitions, newest first.
func (f *Feed) Snapshot() []Transition {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := min(f.n, FeedSize)
	out := make([]Transition, 0, n)
	for i := range n {
		out = append(out, f.ring[(f.n-1-i)%FeedSize])
	}
	return out
}
