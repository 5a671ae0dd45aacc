package engine

import (
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// Observer hears what the engine does: the counters of the metrics, the
// transitions of a provider's state, and each request's Report when it
// ends. The Caddy layer implements it (metrics, log lines, placeholders).
// Its methods are called on the goroutines of requests and attempts and
// must not block.
type Observer interface {
	// Attempt counts an attempt's result on a provider (won is counted
	// by Finished): failed_<class>, lost, cancelled...
	Attempt(provider, result string)
	HedgeLaunched(provider string)
	Retry(provider, reason string)
	BudgetExhausted(kind string)
	// Resumed counts a continuation's outcome; Continuation the tokens a
	// continuation attempt used.
	Resumed(outcome string)
	Continuation(provider string, u *wire.Usage)
	RoutePick(provider, why string)
	QuotaSkip(provider string)
	// Translation counts a translated attempt sent, or a candidate skipped
	// for a material loss, by provider and client format.
	Translation(provider, client, result string)
	// Discovered counts how the discovery of an unknown object ended.
	Discovered(outcome string)
	// Transition is a change of a provider's state, reported once by the
	// request whose failure or success made it.
	Transition(t Transition)
	// Finished is the end of a request; rep is valid during the call only.
	Finished(rep *Report)
}

// The kinds of Transition.
const (
	BreakerOpened = "breaker_opened"
	BreakerClosed = "breaker_closed"
	BreakerReset  = "breaker_reset"
	KeyDisabled   = "key_disabled"
	KeyReenabled  = "key_reenabled"
)

// Transition is one change of a provider's state.
type Transition struct {
	Kind     string
	Provider string
	URL      string // the base URL, redacted
	// Breaker opened: the consecutive failures, until when and for how
	// long, whether a probe failed; BreakerReset: the state it was in.
	Consecutive int64
	OpenUntil   time.Time
	OpenFor     time.Duration
	Probe       bool
	Was         string
	// What failed (breaker opened, key disabled), as the log shows it.
	Class  string
	Error  string
	Status int
	// Key is a key's fingerprint; Reason why it came back (reload, admin reset).
	Key    string
	Reason string
}

// observers calls its Observer, when there is one: an Engine a test
// builds by hand has none.
type observers struct{ o Observer }

func (o observers) Attempt(provider, result string) {
	if o.o != nil {
		o.o.Attempt(provider, result)
	}
}

func (o observers) HedgeLaunched(provider string) {
	if o.o != nil {
		o.o.HedgeLaunched(provider)
	}
}

func (o observers) Retry(provider, reason string) {
	if o.o != nil {
		o.o.Retry(provider, reason)
	}
}

func (o observers) BudgetExhausted(kind string) {
	if o.o != nil {
		o.o.BudgetExhausted(kind)
	}
}

func (o observers) Resumed(outcome string) {
	if o.o != nil {
		o.o.Resumed(outcome)
	}
}

func (o observers) Continuation(provider string, u *wire.Usage) {
	if o.o != nil {
		o.o.Continuation(provider, u)
	}
}

func (o observers) RoutePick(provider, why string) {
	if o.o != nil {
		o.o.RoutePick(provider, why)
	}
}

func (o observers) QuotaSkip(provider string) {
	if o.o != nil {
		o.o.QuotaSkip(provider)
	}
}

func (o observers) Translation(provider, client, result string) {
	if o.o != nil {
		o.o.Translation(provider, client, result)
	}
}

func (o observers) Discovered(outcome string) {
	if o.o != nil {
		o.o.Discovered(outcome)
	}
}

func (o observers) Transition(t Transition) {
	if o.o != nil {
		o.o.Transition(t)
	}
}

func (o observers) Finished(rep *Report) {
	if o.o != nil {
		o.o.Finished(rep)
	}
}
