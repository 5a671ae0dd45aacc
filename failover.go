package llmhedge

import (
	"fmt"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/llmhedge/caddy-llm-hedge/internal/engine"
	"github.com/llmhedge/caddy-llm-hedge/internal/health"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// The Caddy layer's side of failover: the retry {} and cooldown {}
// options, their defaults and checks, and the engine's Retry and the
// health's Cooldown made of them. The failover rule itself is
// internal/engine (failover.go, policy.go).

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

// engine is the retry policy the engine runs, defaults applied.
func (c *RetryConfig) engine() engine.Retry {
	return engine.Retry{Attempts: c.Attempts, SameProvider: c.sameProvider(), BackoffBase: time.Duration(c.BackoffBase),
		BackoffMax: time.Duration(c.BackoffMax), RetryAfterMax: time.Duration(c.RetryAfterMax), BudgetPercent: c.budgetPercent(),
		FallbackModels: c.FallbackModels, ContextFallbacks: c.ContextFallbacks}
}
