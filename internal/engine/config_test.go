package engine

import (
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/health"
)

// testConfig is the policy a handler with no options runs (the Caddy
// layer's defaults), for tests that build an Engine by hand.
func testConfig() Config {
	return Config{
		Timeouts: Timeouts{Connect: 10 * time.Second, FirstByte: 60 * time.Second, Response: 10 * time.Minute,
			Idle: 90 * time.Second, Total: 15 * time.Minute},
		Hedge: Hedge{Enabled: true, Percentile: 90, Min: 500 * time.Millisecond, Max: 8 * time.Second, MaxAttempts: 2, BudgetPercent: 10},
		Retry: Retry{Attempts: 4, SameProvider: 1, BackoffBase: 500 * time.Millisecond, BackoffMax: 8 * time.Second,
			RetryAfterMax: 20 * time.Second, BudgetPercent: 20},
		Stream:   Stream{DropMalformed: true, MaxBuffer: 1 << 20, Resume: 1},
		Cooldown: health.Cooldown{Failures: health.DefaultFailures, Duration: health.DefaultDuration, Max: health.DefaultDuration},
		MaxBody:  32 << 20,
	}
}
