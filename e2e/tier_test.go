package e2e

import (
	"testing"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// Issue 21 item 11: hedging on (the default, no hedge block) never trades
// a same-model retry for a lower tier. The primary serves the client's
// model; the priority-1 fallback serves another model (its model rewrite),
// so which one answered shows in the model the client reads.

const tierFallbackModel = "fallback-model"

// tierProxy starts primary (priority 0) and fallback (priority 1, every
// model rewritten to tierFallbackModel), each with its own key (a 429 on
// the client's key would be the client's answer), hedging and retries at
// their defaults. extra is appended to the block.
func tierProxy(t *testing.T, primary, fallback *upstream, extra string) *proxy {
	t.Helper()
	return startProxy(t, provider("primary", primary, "priority 0", "key sk-p")+
		provider("fallback", fallback, "priority 1", "key sk-f", "model * "+tierFallbackModel)+extra)
}

// A streaming request whose primary fails once with a transient error the
// retry policy waits out is answered by the primary, on the client's
// model: the fallback tier is never asked.
func TestHedgeKeepsTierOnTransientError(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fault  sim.Fault
		openai bool
		minGap time.Duration // the retry waits at least this long after the failure
	}{
		{"500 once, anthropic", sim.Fault{Kind: sim.FaultStatus, Status: 500, Count: 1}, false, 500 * time.Millisecond},
		{"500 once, openai", sim.Fault{Kind: sim.FaultStatus, Status: 500, Count: 1}, true, 500 * time.Millisecond},
		{"429 Retry-After 2 once, anthropic", sim.Fault{Kind: sim.FaultStatus, Status: 429, RetryAfter: "2", Count: 1}, false, 2 * time.Second},
		{"429 Retry-After 2 once, openai", sim.Fault{Kind: sim.FaultStatus, Status: 429, RetryAfter: "2", Count: 1}, true, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			primary := newUpstream(t, sim.Config{Faults: []sim.Fault{tc.fault}})
			fallback := newUpstream(t, sim.Config{})
			p := tierProxy(t, primary, fallback, "")

			ctx := ctxTimeout(t, 15*time.Second)
			var model, text string
			if tc.openai {
				acc, err := streamOpenAI(ctx, openaiClient(p, "k"), openaiParams("gpt-test"))
				if err != nil {
					t.Fatal(err)
				}
				model = acc.Model
				if len(acc.Choices) > 0 {
					text = acc.Choices[0].Message.Content
				}
				if model != "gpt-test" {
					t.Fatalf("answered by model %q, want the primary's gpt-test", model)
				}
			} else {
				m, err := streamAnthropic(ctx, anthropicClient(p, "k"), anthropicParams("claude-test"))
				if err != nil {
					t.Fatal(err)
				}
				model, text = string(m.Model), messageText(m)
				if model != "claude-test" {
					t.Fatalf("answered by model %q, want the primary's claude-test", model)
				}
			}
			if text != wantText {
				t.Fatalf("text %q, want %q", text, wantText)
			}
			if n := completions(fallback); n != 0 {
				t.Fatalf("the fallback tier got %d requests; the primary's retry was allowed", n)
			}
			starts := retryStarts(primary)
			if len(starts) != 2 {
				t.Fatalf("primary got %d attempts, want the failure and its retry", len(starts))
			}
			if gap := starts[1].Sub(starts[0]); gap < tc.minGap {
				t.Fatalf("retry %v after the failure, want at least %v", gap, tc.minGap)
			}
			l := retryLastLog(t, p, 1)
			if len(l.Chain) != 2 || l.Chain[1].Event != "retry" || l.Provider != "primary" {
				t.Fatalf("log %+v: want initial then a retry on primary", l)
			}
		})
	}
}

// Slowness still reaches the lower tier: a primary whose first token
// would take 20 s is raced by the fallback after the default hedge delay
// (the bootstrap max/4 = 2 s), the fallback answers on its own model, and
// the primary is cancelled at the commit: nothing waits for its 20 s.
func TestHedgeReachesLowerTierOnSlowness(t *testing.T) {
	primary := newUpstream(t, sim.Config{FirstToken: caddyDur(20 * time.Second)})
	fallback := newUpstream(t, sim.Config{})
	p := tierProxy(t, primary, fallback, "")

	m, err := streamAnthropic(ctxTimeout(t, 15*time.Second), anthropicClient(p, "k"), anthropicParams("claude-test"))
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Model) != tierFallbackModel || messageText(m) != wantText {
		t.Fatalf("answer %q by model %q, want the fallback's %q", messageText(m), m.Model, tierFallbackModel)
	}
	if fr := hedgeOnly(t, "fallback", fallback); m.ID != fr.ID {
		t.Fatalf("answer is message %q, want the fallback's %q", m.ID, fr.ID)
	}
	if pr := hedgeClosed(t, "primary", primary, 5*time.Second)[0]; pr.Deltas != 0 {
		t.Fatalf("primary sent %d deltas: it should have been cancelled before its first token", pr.Deltas)
	}
	l := hedgeLogLines(t, p, 1)[0]
	if !l.Hedged || l.Provider != "fallback" {
		t.Fatalf("log: %v", l)
	}
	if e := hedgeEntry(t, l, "fallback"); e.Event != "hedge_triggered" || e.Outcome != "hedge_winner" {
		t.Fatalf("fallback's chain entry: %+v\n%v", e, l)
	}
}

// The same rule holds for a fallback_model: while the only provider of
// the client's model may still be retried, a racing request does not
// switch model.
func TestHedgeKeepsModelBeforeFallbackModel(t *testing.T) {
	primary := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 529, Count: 1}}})
	other := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("primary", primary, "models model-a", "key sk-p")+
		provider("other", other, "models model-b", "key sk-o")+
		"retry {\n fallback_model model-a model-b\n }\n")

	m, err := streamAnthropic(ctxTimeout(t, 15*time.Second), anthropicClient(p, "k"), anthropicParams("model-a"))
	if err != nil || messageText(m) != wantText {
		t.Fatalf("text %q, err %v", messageText(m), err)
	}
	if string(m.Model) != "model-a" || completions(other) != 0 || len(retryStarts(primary)) != 2 {
		t.Fatalf("model %q, primary %d attempts, model-b's provider %d; want model-a after a retry on primary",
			m.Model, len(retryStarts(primary)), completions(other))
	}
	if l := retryLastLog(t, p, 1); l.FallbackModel != "" {
		t.Fatalf("log %+v: no fallback model was needed", l)
	}
}
