package engine

import (
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/health"
	"github.com/llmhedge/caddy-llm-hedge/internal/routing"
	"github.com/llmhedge/caddy-llm-hedge/internal/stream"
)

// Config is the policy of one handler, with every default already
// applied: the Caddy layer reads the Caddyfile or JSON, checks it, fills
// in its defaults and hands the engine this (module.go's engineConfig).
type Config struct {
	Timeouts Timeouts
	Hedge    Hedge
	Retry    Retry
	Stream   Stream
	Cooldown health.Cooldown
	Policy   routing.Policy
	// AffinityTTL is how long a session's winner is remembered (the table
	// itself is the Caddy layer's, in Env); AffinityHeader names the
	// request header the session key is read from, "" for the body's.
	AffinityTTL    time.Duration
	AffinityHeader string
	// MaxBody is the largest request body read, in bytes.
	MaxBody int64
	// Forward are the globs of further paths forwarded as they are.
	Forward []string
}

// Timeouts bound each phase of an attempt and the whole request.
type Timeouts struct {
	Connect, FirstByte, Response, Idle, Total time.Duration
}

// Hedge is when a second attempt races a slow first one.
type Hedge struct {
	Enabled bool
	// Delay, when set, is fixed; else the Percentile of the provider's
	// recent first events, clamped to [Min, Max].
	Delay, Min, Max time.Duration
	Percentile      float64
	MaxAttempts     int
	// BudgetPercent is hedges as a percentage of requests; with
	// BudgetTokens, hedged input tokens as a percentage of the requests'.
	BudgetPercent float64
	BudgetTokens  bool
	// LargeTokens, when set, is the input size (estimated tokens) from
	// which a request is hedged only after LargeAfter (when that is longer
	// than its hedge delay): its hedge costs a second large prompt.
	LargeTokens int64
	LargeAfter  time.Duration
}

// Retry is the retry policy of one request.
type Retry struct {
	Attempts, SameProvider                 int
	BackoffBase, BackoffMax, RetryAfterMax time.Duration
	BudgetPercent                          float64
	FallbackModels, ContextFallbacks       []ModelRule
}

// ModelRule maps one model name (or glob) to another.
type ModelRule struct {
	// Requested model, a glob such as `claude-*`; `*` matches every model.
	From string `json:"from"`
	// Model sent upstream instead.
	To string `json:"to"`
}

// Stream is first-event validation and the relay.
type Stream struct {
	Reject        []string
	DropMalformed bool
	MaxBuffer     int64
	Resume        int
}

// Limits of the engine's own, not configurable.
const (
	hedgeBudgetFloor = 1                // hedges per second the budget always allows
	retryBudgetFloor = 3                // retries per second the budget always allows
	budgetWindow     = 10 * time.Second // the window both budgets count over

	defaultGateEvents  = stream.DefaultGateEvents  // events a gate buffers before the first valid one
	defaultFinishGrace = stream.DefaultFinishGrace // an OpenAI stream's wait for [DONE] after its finish_reason
	keyCooldownDefault = 30 * time.Second          // a key's 429 cooldown with no Retry-After or reset header
	rateLimitResetMax  = health.RateLimitResetMax  // a rate-limit reset further away is clock skew or garbage: clamped

	// maxClientDeadline bounds X-Stainless-Timeout before it is converted,
	// so a huge value cannot overflow a Duration (it could only raise total,
	// which a client deadline never does).
	maxClientDeadline = 24 * time.Hour
)
