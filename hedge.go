package llmhedge

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
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

func (h *Handler) parseHedge(d *caddyfile.Dispenser, lines optionLines) error {
	if d.NextArg() {
		if d.Val() == "off" && !d.NextArg() {
			h.Hedge.Off = true
			return nil
		}
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if err := lines.once(d, "hedge "+d.Val()); err != nil {
			return err
		}
		var err error
		switch d.Val() {
		case "after":
			var v string
			if v, err = oneArg(d); err != nil {
				return err
			}
			if strings.HasPrefix(v, "p") {
				pct, perr := strconv.ParseFloat(v[1:], 64)
				if perr != nil || pct <= 0 || pct >= 100 {
					return d.Errf("hedge after: %q is not a percentile like p90", v)
				}
				h.Hedge.Percentile, h.Hedge.Delay = pct, 0
			} else {
				dur, derr := caddy.ParseDuration(v)
				if derr != nil || dur <= 0 {
					return d.Errf("hedge after: %q is not a positive duration or a percentile like p90", v)
				}
				h.Hedge.Delay, h.Hedge.Percentile = caddy.Duration(dur), 0
			}
		case "min":
			h.Hedge.Min, err = durationArg(d)
		case "max":
			h.Hedge.Max, err = durationArg(d)
		case "max_attempts":
			h.Hedge.MaxAttempts, err = intArg(d, 1)
			if err == nil && h.Hedge.MaxAttempts > maxHedgeAttempts {
				return d.Errf("hedge max_attempts: %d is above %d", h.Hedge.MaxAttempts, maxHedgeAttempts)
			}
		case "budget":
			// budget <percent>% [tokens]
			args := d.RemainingArgs()
			if len(args) == 0 || len(args) > 2 || (len(args) == 2 && args[1] != "tokens") {
				return d.Errf("hedge budget: want <percent>%% [tokens]")
			}
			pct, perr := strconv.ParseFloat(strings.TrimSuffix(args[0], "%"), 64)
			if perr != nil || pct < 0 || pct > 100 {
				return d.Errf("hedge budget: %q is not a percentage between 0 and 100", args[0])
			}
			h.Hedge.Budget, h.Hedge.BudgetTokens = &pct, len(args) == 2
		case "large_prompt":
			// large_prompt <tokens> <delay>
			args := d.RemainingArgs()
			if len(args) != 2 {
				return d.Errf("hedge large_prompt: want <tokens> <delay>, e.g. large_prompt 100k 20s")
			}
			n, nerr := tokenCount(args[0])
			dur, derr := caddy.ParseDuration(args[1])
			if nerr != nil || n < 1 || n > 1e12 || derr != nil || dur <= 0 {
				return d.Errf("hedge large_prompt: %q %q is not a token count and a positive delay (e.g. 100k 20s)", args[0], args[1])
			}
			h.Hedge.LargePrompt = &LargePrompt{Tokens: int64(n), After: caddy.Duration(dur)}
		case "off":
			if d.NextArg() {
				return d.ArgErr()
			}
			h.Hedge.Off = true
		default:
			return d.Errf("hedge: unknown option %q", d.Val())
		}
		if err != nil {
			return err
		}
	}
	return hedgeConflict(h, lines)
}

// hedgeConflict refuses off together with another hedge option, and a
// clamp whose min is above its max, at the line of the later option.
func hedgeConflict(h *Handler, lines optionLines) error {
	options := []string{"hedge after", "hedge min", "hedge max", "hedge max_attempts", "hedge budget", "hedge large_prompt"}
	if off, ok := lines["hedge off"]; ok {
		if other, ok := lines.last(options...); ok {
			at := other
			if off.Line > other.Line {
				at = off
			}
			return errAt(at, "hedge: off conflicts with %s: with hedging off no other hedge option applies", other.Text)
		}
	}
	if err := h.Hedge.clampConflict(); err != nil {
		at, _ := lines.last("hedge min", "hedge max")
		return errAt(at, "%v", err)
	}
	return nil
}

// tokenCount reads a token count: a number, or with the suffix k or m
// (100k, 1.5m).
func tokenCount(v string) (float64, error) {
	mult := 1.0
	switch {
	case strings.HasSuffix(v, "k"), strings.HasSuffix(v, "K"):
		mult, v = 1e3, v[:len(v)-1]
	case strings.HasSuffix(v, "m"), strings.HasSuffix(v, "M"):
		mult, v = 1e6, v[:len(v)-1]
	}
	n, err := strconv.ParseFloat(v, 64)
	return math.Round(n * mult), err
}
