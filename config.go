package llmhedge

import (
	"fmt"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmhedge/caddy-llm-hedge/internal/affinity"
	"github.com/llmhedge/caddy-llm-hedge/internal/health"
	"github.com/llmhedge/caddy-llm-hedge/internal/stream"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// Defaults, in one place: the godoc of each field states them, and the
// Caddyfile parser, Provision and the code that falls back on them for an
// unset value read them here.
const (
	defaultConnectTimeout   = 10 * time.Second // timeouts.connect
	defaultFirstByteTimeout = 60 * time.Second // timeouts.first_byte
	defaultResponseTimeout  = 10 * time.Minute // timeouts.response
	defaultIdleTimeout      = 90 * time.Second // timeouts.idle
	defaultTotalTimeout     = 15 * time.Minute // timeouts.total
	defaultMaxBody          = 32 << 20         // max_body

	defaultHedgePercentile  = 90                     // hedge.percentile, when hedge.delay is not set
	defaultHedgeMin         = 500 * time.Millisecond // hedge.min
	defaultHedgeMax         = 8 * time.Second        // hedge.max
	defaultHedgeMaxAttempts = 2                      // hedge.max_attempts
	maxHedgeAttempts        = 5                      // hedge.max_attempts' upper bound
	defaultHedgeBudget      = 10                     // hedge.budget, percent of requests
	hedgeBudgetFloor        = 1                      // hedges per second the budget always allows

	defaultAttempts      = 4                      // retry.attempts
	defaultSameProvider  = 1                      // retry.same_provider
	defaultBackoffBase   = 500 * time.Millisecond // retry.backoff_base
	defaultBackoffMax    = 8 * time.Second        // retry.backoff_max
	defaultRetryAfterMax = 20 * time.Second       // retry.retry_after_max
	defaultRetryBudget   = 20                     // retry.budget, percent of requests
	retryBudgetFloor     = 3                      // retries per second the budget always allows
	budgetWindow         = 10 * time.Second       // the window both budgets count over

	breakerDefaultFailures = health.DefaultFailures // cooldown.failures
	breakerDefaultDuration = health.DefaultDuration // cooldown.duration; cooldown.max defaults to it

	defaultMaxBuffer   = 1 << 20                   // stream.max_buffer, bytes before commit
	defaultResume      = 1                         // stream.resume, continuations of a cut stream per request
	defaultGateBuffer  = stream.DefaultGateBuffer  // a gate's buffer when none is given: stream.max_buffer's default
	defaultGateEvents  = stream.DefaultGateEvents  // events a gate buffers before the first valid one
	defaultFinishGrace = stream.DefaultFinishGrace // an OpenAI stream's wait for [DONE] after its finish_reason

	defaultAffinityTTL      = affinity.DefaultTTL      // affinity.ttl
	defaultAffinityCapacity = affinity.DefaultCapacity // sessions remembered

	defaultQuotaReserve = 0                        // a provider's quota_reserve, percent
	keyCooldownDefault  = 30 * time.Second         // a key's 429 cooldown with no Retry-After or reset header
	rateLimitResetMax   = health.RateLimitResetMax // a rate-limit reset further away is clock skew or garbage: clamped

	// maxClientDeadline bounds X-Stainless-Timeout before it is converted,
	// so a huge value cannot overflow a Duration (it could only raise total,
	// which a client deadline never does).
	maxClientDeadline = 24 * time.Hour
)

// HedgeConfig configures hedge racing of streaming requests: when the
// first attempt is slow to produce its first valid event, an alternative
// provider is launched and the first valid event wins.
type HedgeConfig struct {
	// Fixed hedge delay. Default: none, the delay is adaptive (Percentile).
	Delay caddy.Duration `json:"delay,omitempty"`
	// Adaptive hedge delay: this percentile (1-99.9) of the provider's
	// recent time to first valid event, per request-size class. Default 90
	// when Delay is not set.
	Percentile float64 `json:"percentile,omitempty"`
	// Lower clamp of the adaptive delay. Default: 500ms.
	Min caddy.Duration `json:"min,omitempty"`
	// Upper clamp of the adaptive delay; max/4 is the bootstrap delay until
	// 20 samples exist. Default: 8s.
	Max caddy.Duration `json:"max,omitempty"`
	// Attempts racing at once, the first included (2-5). Default: 2.
	MaxAttempts int `json:"max_attempts,omitempty"`
	// Hedges as a percentage of requests over a 10 s window, with a floor
	// of 1 hedge per second. Default: 10.
	Budget *float64 `json:"budget,omitempty"`
	// Disables hedging: attempts run one after another. Default: false.
	Off bool `json:"off,omitempty"`
}

func (c *HedgeConfig) setDefaults() {
	if c.Delay == 0 && c.Percentile == 0 {
		c.Percentile = defaultHedgePercentile
	}
	if c.Min == 0 {
		c.Min = caddy.Duration(defaultHedgeMin)
	}
	if c.Max == 0 {
		c.Max = caddy.Duration(defaultHedgeMax)
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = defaultHedgeMaxAttempts
	}
}

func (c *HedgeConfig) enabled() bool { return !c.Off && c.MaxAttempts > 1 }

func (c *HedgeConfig) budgetPercent() float64 {
	if c.Budget == nil {
		return defaultHedgeBudget
	}
	return *c.Budget
}

func (c *HedgeConfig) validate() error {
	switch {
	case c.Delay < 0 || c.Min < 0 || c.Max < 0:
		return fmt.Errorf("hedge: negative duration")
	case c.Min > c.Max:
		return fmt.Errorf("hedge: min %s is above max %s", time.Duration(c.Min), time.Duration(c.Max))
	case c.Percentile < 0 || c.Percentile >= 100:
		return fmt.Errorf("hedge: percentile %v out of range (0, 100)", c.Percentile)
	case c.MaxAttempts < 1 || c.MaxAttempts > maxHedgeAttempts:
		return fmt.Errorf("hedge: max_attempts %d out of range 1..%d", c.MaxAttempts, maxHedgeAttempts)
	case c.Budget != nil && (*c.Budget < 0 || *c.Budget > 100):
		return fmt.Errorf("hedge: budget %v%% out of range 0..100", *c.Budget)
	}
	return nil
}

// ModelRule maps one model name (or glob) to another.
type ModelRule struct {
	// Requested model, a glob such as `claude-*`; `*` matches every model.
	From string `json:"from"`
	// Model sent upstream instead.
	To string `json:"to"`
}

// RetryConfig is the retry policy of one request.
type RetryConfig struct {
	// Attempts per request, hedges and retries included. Default: 4.
	Attempts int `json:"attempts,omitempty"`
	// Extra tries on one provider after a transient error (500, 502, 503,
	// 529, connection reset) before moving on. Default: 1.
	SameProvider *int `json:"same_provider,omitempty"`
	// First same-provider backoff; it doubles per retry, plus 0-25%
	// jitter. Default: 500ms.
	BackoffBase caddy.Duration `json:"backoff_base,omitempty"`
	// Cap of the backoff. Default: 8s.
	BackoffMax caddy.Duration `json:"backoff_max,omitempty"`
	// A Retry-After up to this long is waited out on the same provider;
	// a longer one moves on to the next provider. Default: 20s.
	RetryAfterMax caddy.Duration `json:"retry_after_max,omitempty"`
	// Retries as a percentage of requests over a 10 s window, with a floor
	// of 3 per second. Default: 20.
	Budget *float64 `json:"budget,omitempty"`
	// After every provider of a model failed retryably, try another model.
	// Default: none.
	FallbackModels []ModelRule `json:"fallback_models,omitempty"`
	// A request for a model matching From that a provider refuses with a
	// 400 saying the prompt is too long (over the model's context window)
	// is retried once with the model To, on any provider that serves it.
	// The retry counts in attempts and the retry budget. Without a rule,
	// or with no provider of To, the 400 is the answer. Default: none.
	ContextFallbacks []ModelRule `json:"context_fallbacks,omitempty"`
}

func (c *RetryConfig) setDefaults() {
	if c.Attempts == 0 {
		c.Attempts = defaultAttempts
	}
	if c.SameProvider == nil {
		n := defaultSameProvider
		c.SameProvider = &n
	}
	if c.BackoffBase == 0 {
		c.BackoffBase = caddy.Duration(defaultBackoffBase)
	}
	if c.BackoffMax == 0 {
		c.BackoffMax = caddy.Duration(defaultBackoffMax)
	}
	if c.RetryAfterMax == 0 {
		c.RetryAfterMax = caddy.Duration(defaultRetryAfterMax)
	}
}

func (c *RetryConfig) budgetPercent() float64 {
	if c.Budget == nil {
		return defaultRetryBudget
	}
	return *c.Budget
}

func (c *RetryConfig) sameProvider() int {
	if c.SameProvider == nil {
		return defaultSameProvider
	}
	return *c.SameProvider
}

func (c *RetryConfig) validate() error {
	switch {
	case c.Attempts < 1:
		return fmt.Errorf("retry: attempts must be at least 1")
	case c.SameProvider != nil && *c.SameProvider < 0:
		return fmt.Errorf("retry: same_provider must not be negative")
	case c.BackoffBase < 0 || c.BackoffMax < 0 || c.RetryAfterMax < 0:
		return fmt.Errorf("retry: negative duration")
	case c.BackoffBase > c.BackoffMax:
		return fmt.Errorf("retry: backoff base %s is above max %s", time.Duration(c.BackoffBase), time.Duration(c.BackoffMax))
	case c.Budget != nil && (*c.Budget < 0 || *c.Budget > 100):
		return fmt.Errorf("retry: budget %v%% out of range 0..100", *c.Budget)
	}
	for _, f := range c.FallbackModels {
		if f.From == "" || f.To == "" {
			return fmt.Errorf("retry: fallback_model needs <from> and <to>")
		}
		if err := wire.CheckModelName(f.To); err != nil {
			return fmt.Errorf("retry: fallback_model %s %s: %w", f.From, f.To, err)
		}
	}
	for _, f := range c.ContextFallbacks {
		if f.From == "" || f.To == "" {
			return fmt.Errorf("retry: context_fallback needs <from> and <to>")
		}
		if err := wire.CheckModelName(f.To); err != nil {
			return fmt.Errorf("retry: context_fallback %s %s: %w", f.From, f.To, err)
		}
	}
	return nil
}

// CooldownConfig configures the circuit breaker of each provider.
type CooldownConfig struct {
	// Consecutive provider-level failures that open the breaker. Default: 3.
	Failures int `json:"failures,omitempty"`
	// How long the breaker stays open before one probe is let through.
	// Default: 30s.
	Duration caddy.Duration `json:"duration,omitempty"`
	// Growth cap of the open period while probes keep failing; it doubles
	// per failed probe. Default: Duration (no growth).
	Max caddy.Duration `json:"max,omitempty"`
}

func (c *CooldownConfig) config() health.Cooldown {
	cc := health.Cooldown{Failures: c.Failures, Duration: time.Duration(c.Duration), Max: time.Duration(c.Max)}
	if cc.Failures == 0 {
		cc.Failures = breakerDefaultFailures
	}
	if cc.Duration == 0 {
		cc.Duration = breakerDefaultDuration
	}
	if cc.Max < cc.Duration {
		cc.Max = cc.Duration
	}
	return cc
}

func (c *CooldownConfig) validate() error {
	if c.Failures < 0 || c.Duration < 0 || c.Max < 0 {
		return fmt.Errorf("cooldown: negative value")
	}
	return nil
}

// AffinityConfig configures sticky routing of a conversation to the
// provider holding its prompt cache.
type AffinityConfig struct {
	// Disables affinity. Default: false.
	Off bool `json:"off,omitempty"`
	// Read the session key from this request header instead of the body's
	// metadata.user_id (Anthropic) or user (OpenAI). Default: none, the
	// body's field.
	Header string `json:"header,omitempty"`
	// How long a remembered winner is kept for a session. Default: 1h.
	TTL caddy.Duration `json:"ttl,omitempty"`
}

func (c *AffinityConfig) setDefaults() {
	if c.TTL == 0 {
		c.TTL = caddy.Duration(defaultAffinityTTL)
	}
}

func (c *AffinityConfig) enabled() bool { return !c.Off }
