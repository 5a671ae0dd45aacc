package llmhedge

import (
	"fmt"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/llmhedge/caddy-llm-hedge/internal/engine"
)

// The Caddy layer's side of hedging: the hedge {} options, their defaults
// and checks, and the engine's Hedge made of them. The race itself is
// internal/engine (hedge.go, race.go).

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
	// Count the budget in input tokens (each request's body bytes / 4)
	// instead of requests: hedged input tokens stay within budget percent
	// of the requests' input tokens, the floor being 1 hedge per second of
	// the window's mean size. One hedge of a 200k-token prompt then weighs
	// what it costs. Default: false (requests).
	BudgetTokens bool `json:"budget_tokens,omitempty"`
	// Requests of at least this many estimated input tokens are hedged
	// only after its delay, when that is longer than their hedge delay.
	// Default: none.
	LargePrompt *LargePrompt `json:"large_prompt,omitempty"`
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
	case c.LargePrompt != nil && (c.LargePrompt.Tokens <= 0 || c.LargePrompt.After <= 0):
		return fmt.Errorf("hedge: large_prompt needs positive tokens and a positive delay")
	}
	return nil
}

// LargePrompt is when a large request is hedged: its hedge sends a second
// large prompt, often to a provider whose prompt cache is cold.
type LargePrompt struct {
	// Estimated input tokens (body bytes / 4) from which the rule applies.
	Tokens int64 `json:"tokens"`
	// The hedge delay of such a request, when longer than its own.
	After caddy.Duration `json:"after"`
}

// engine is the policy the engine runs, defaults applied.
func (c *HedgeConfig) engine() engine.Hedge {
	e := engine.Hedge{Enabled: c.enabled(), Delay: time.Duration(c.Delay), Min: time.Duration(c.Min), Max: time.Duration(c.Max),
		Percentile: c.Percentile, MaxAttempts: c.MaxAttempts, BudgetPercent: c.budgetPercent(), BudgetTokens: c.BudgetTokens}
	if c.LargePrompt != nil {
		e.LargeTokens, e.LargeAfter = c.LargePrompt.Tokens, time.Duration(c.LargePrompt.After)
	}
	return e
}

// budgetMismatch returns a warning when the hedge percentile and the hedge
// budget disagree by more than 2×, or "" when they fit. Hedging at pN fires
// for about (100-N)% of requests, so p90 pairs with a 10% budget: a much
// smaller budget silently disables most hedges, a much larger one is never
// reached and protects nothing.
func budgetMismatch(pct float64, budgetPercent float64) string {
	if budgetPercent <= 0 || pct <= 0 || pct > 100 {
		return ""
	}
	expected := 100 - pct
	switch {
	case budgetPercent > 2*expected:
		return fmt.Sprintf("hedge after p%g launches about %g%% extra requests but the budget allows %g%%: the budget will not bound hedging at that percentile; pair p%g with a budget near %g%%",
			pct, expected, budgetPercent, pct, expected)
	case 2*budgetPercent < expected:
		return fmt.Sprintf("hedge after p%g wants about %g%% extra requests but the budget allows only %g%%: most hedges will be refused; use a budget near %g%% or a higher percentile (p%g)",
			pct, expected, budgetPercent, expected, 100-budgetPercent)
	}
	return ""
}
