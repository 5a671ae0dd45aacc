package engine

import (
	"context"
	"testing"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/limit"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

func TestRetryWaitDecision(t *testing.T) {
	const base = 500 * time.Millisecond
	tests := []struct {
		name         string
		sameProvider int
		tries        int // attempts already made on the provider, the failed one included
		class        wire.FailClass
		retryAfter   time.Duration
		hasRA        bool
		noRetry      bool
		deadline     time.Duration // request time left; 0: none
		spent        bool          // retry budget exhausted
		attemptsMade int
		jitter       float64
		wantWait     time.Duration
		wantOK       bool
	}{
		{name: "500 retried after the base", sameProvider: 1, tries: 1, class: wire.ClassStatus5xx, wantWait: base, wantOK: true},
		{name: "jitter adds up to 25%", sameProvider: 1, tries: 1, class: wire.ClassStatus5xx, jitter: 1, wantWait: base * 5 / 4, wantOK: true},
		{name: "503 retried", sameProvider: 1, tries: 1, class: wire.ClassOverloaded, wantWait: base, wantOK: true},
		{name: "reset retried", sameProvider: 1, tries: 1, class: wire.ClassReset, wantWait: base, wantOK: true},
		{name: "same_provider 1 allows one extra try only", sameProvider: 1, tries: 2, class: wire.ClassStatus5xx},
		{name: "same_provider 0 never retries", sameProvider: 0, tries: 1, class: wire.ClassStatus5xx},
		{name: "second retry doubles the backoff", sameProvider: 2, tries: 2, class: wire.ClassStatus5xx, wantWait: 2 * base, wantOK: true},
		{name: "same_provider 2 allows two extra tries only", sameProvider: 2, tries: 3, class: wire.ClassStatus5xx},
		{name: "429 without Retry-After moves on", sameProvider: 1, tries: 1, class: wire.ClassRateLimited},
		{name: "429 with Retry-After waits it", sameProvider: 1, tries: 1, class: wire.ClassRateLimited, hasRA: true, retryAfter: 2 * time.Second, wantWait: 2 * time.Second, wantOK: true},
		{name: "Retry-After shorter than the base waits the base", sameProvider: 1, tries: 1, class: wire.ClassRateLimited, hasRA: true, retryAfter: 0, wantWait: base, wantOK: true},
		{name: "Retry-After over retry_after_max moves on", sameProvider: 1, tries: 1, class: wire.ClassOverloaded, hasRA: true, retryAfter: 21 * time.Second},
		{name: "Retry-After at retry_after_max is waited", sameProvider: 1, tries: 1, class: wire.ClassOverloaded, hasRA: true, retryAfter: 20 * time.Second, wantWait: 20 * time.Second, wantOK: true},
		{name: "x-should-retry false", sameProvider: 1, tries: 1, class: wire.ClassOverloaded, noRetry: true},
		{name: "wait crossing the total timeout is skipped", sameProvider: 1, tries: 1, class: wire.ClassRateLimited, hasRA: true, retryAfter: 3 * time.Second, deadline: time.Second},
		{name: "wait within the total timeout", sameProvider: 1, tries: 1, class: wire.ClassRateLimited, hasRA: true, retryAfter: time.Second, deadline: time.Minute, wantWait: time.Second, wantOK: true},
		{name: "budget spent", sameProvider: 1, tries: 1, class: wire.ClassStatus5xx, spent: true},
		{name: "no attempts left", sameProvider: 1, tries: 1, class: wire.ClassStatus5xx, attemptsMade: testConfig().Retry.Attempts},
		{name: "bad key not retried", sameProvider: 1, tries: 1, class: wire.ClassAuth},
		{name: "connection refused not retried", sameProvider: 1, tries: 1, class: wire.ClassConnect},
		{name: "first-byte timeout not retried", sameProvider: 1, tries: 1, class: wire.ClassFirstByteTimeout},
		{name: "request error not retried", sameProvider: 1, tries: 1, class: wire.ClassRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			percent, floor := 20.0, 3.0
			if tt.spent {
				percent, floor = 0, 0
			}
			h := retryTestHandler(tt.sameProvider, percent, floor, tt.jitter)
			p := &provider{name: "p", health: newTestHealth("p")} // retryWait asks its breaker
			st := &requestState{h: h, ctx: context.Background(), plan: newPlan([]*provider{p}, "m")}
			if tt.deadline > 0 {
				ctx, cancel := context.WithTimeout(context.Background(), tt.deadline)
				defer cancel()
				st.ctx = ctx
			}
			st.plan.tries[p] = tt.tries
			for range tt.attemptsMade {
				st.attempts = append(st.attempts, &attempt{p: p})
			}
			a := &attempt{p: p, class: tt.class, retryAfter: tt.retryAfter, hasRA: tt.hasRA, noRetry: tt.noRetry}
			wait, ok := retryWait(st, a)
			if ok != tt.wantOK || wait != tt.wantWait {
				t.Fatalf("retryWait = (%v, %v), want (%v, %v)", wait, ok, tt.wantWait, tt.wantOK)
			}
			if _, extras := h.retryBudget.Snapshot(clock()); extras != 0 {
				t.Fatalf("retryWait took %d extras from the budget; the retry is charged when it starts", extras)
			}
		})
	}
}

// retryTestHandler is a handler with only what retryWait reads: the retry
// policy, its budget and a fixed jitter.
func retryTestHandler(sameProvider int, budgetPercent, floor float64, jitter float64) *Engine {
	cfg := testConfig()
	cfg.Retry.SameProvider = sameProvider
	h := &Engine{Config: cfg}
	h.retryBudget = limit.NewBudget(budgetPercent, floor, budgetWindow)
	h.rand = func() float64 { return jitter }
	return h
}
