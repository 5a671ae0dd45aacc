package llmhedge_test

import (
	"strings"
	"testing"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// longText is an answer of 60 words: one delta each.
var longText = strings.TrimSpace(strings.Repeat("alpha beta gamma delta epsilon zeta eta theta iota kappa ", 6))

// A stream cut after 40 deltas is finished by replay-match on a provider
// that gives the same answer: the SDK reads the whole text, one message.
func TestResumeReplayAnthropic(t *testing.T) {
	cut := newUpstream(t, sim.Config{Tokens: 60, Text: longText, Faults: []sim.Fault{{Kind: sim.FaultCut, After: 40, Count: 1}}})
	other := newUpstream(t, sim.Config{Tokens: 60, Text: longText})
	p := startProxy(t, provider("cut", cut, "priority 1")+provider("other", other, "priority 2", "prefill off"))

	m, err := streamAnthropic(ctxTimeout(t, 10*time.Second), anthropicClient(p, "k"), anthropicParams("claude-test"))
	if err != nil {
		t.Fatalf("continued stream: %v (text so far %q)", err, messageText(m))
	}
	if got := messageText(m); got != longText {
		t.Fatalf("text = %q\nwant %q", got, longText)
	}
	if len(m.Content) != 1 {
		t.Fatalf("content blocks = %d, want 1", len(m.Content))
	}
	if m.Usage.OutputTokens != 60 {
		t.Errorf("output tokens = %d, want 60", m.Usage.OutputTokens)
	}
	if n := completions(other); n != 1 {
		t.Errorf("other saw %d completions, want 1", n)
	}
}

// Without an eligible provider giving the same text, the client gets the
// error event, never an altered text.
func TestResumeSampledIsAnError(t *testing.T) {
	cut := newUpstream(t, sim.Config{Tokens: 60, Text: longText, Faults: []sim.Fault{{Kind: sim.FaultCut, After: 40}}})
	other := newUpstream(t, sim.Config{Tokens: 60, Text: "something else entirely"})
	p := startProxy(t, provider("cut", cut, "priority 1")+provider("other", other, "priority 2", "prefill off"))
	m, err := streamAnthropic(ctxTimeout(t, 10*time.Second), anthropicClient(p, "k"), anthropicParams("claude-test"))
	if err == nil {
		t.Fatalf("diverged continuation finished cleanly: %q", messageText(m))
	}
	if got := messageText(m); !strings.HasPrefix(longText, got) {
		t.Fatalf("client text %q is not a prefix of the answer", got)
	}
}
