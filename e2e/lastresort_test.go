package e2e

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// When the only closed provider fails and the others are cooling down, the
// request probes the one that recovers first instead of failing while it
// still has attempts: a partial outage must not turn into 503s.
func TestLastResortProbeAfterFailover(t *testing.T) {
	a := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 503, Count: 1}}})
	b := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 503, Count: 1}}})
	c := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("a", a, "priority 0")+provider("b", b, "priority 1")+provider("c", c, "priority 2")+
		"hedge off\n retry {\n same_provider 0\n }\n cooldown {\n failures 1\n duration 30s\n }")
	client := anthropicClient(p, "k")

	// a and b fail once each and open; c answers.
	if _, err := client.Messages.New(ctxTimeout(t, 10*time.Second), anthropicParams("claude-test")); err != nil {
		t.Fatalf("first request: %v", err)
	}
	if completions(a) != 1 || completions(b) != 1 || completions(c) != 1 {
		t.Fatalf("first request: a=%d b=%d c=%d, want 1 each", completions(a), completions(b), completions(c))
	}

	// Now c fails once: a and b are open, so the request must probe a (it
	// opened first) rather than answer 503.
	if err := c.SetFaults([]sim.Fault{{Kind: sim.FaultStatus, Status: 503, Count: 1}}); err != nil {
		t.Fatal(err)
	}
	m, err := client.Messages.New(ctxTimeout(t, 10*time.Second), anthropicParams("claude-test"))
	if err != nil {
		t.Fatalf("second request: %v", err)
	}
	if messageText(*m) != wantText {
		t.Fatalf("text %q", messageText(*m))
	}
	if completions(a) != 2 || completions(b) != 1 || completions(c) != 2 {
		t.Fatalf("second request: a=%d b=%d c=%d, want the probe on a (2, 1, 2)", completions(a), completions(b), completions(c))
	}
}

// In a race, a transient failure fails over at once instead of waiting for a
// backoff; when that failover fails too, the first provider must still get
// its same-provider retry rather than the request ending in 503.
func TestLastResortRetryAfterRacerFailover(t *testing.T) {
	once529 := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 529, Count: 1}}})
	dead := &upstream{URL: fmt.Sprintf("http://127.0.0.1:%d", freePort(t))}
	p := startProxy(t, provider("once529", once529, "vendor b")+provider("dead", dead, "vendor a", "priority 1")+
		"retry {\n backoff 100ms 1s\n }")
	m, err := streamAnthropic(ctxTimeout(t, 10*time.Second), anthropicClient(p, "k"), anthropicParams("claude-test"))
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	if messageText(m) != wantText {
		t.Fatalf("text %q", messageText(m))
	}
	if n := completions(once529); n != 2 {
		t.Fatalf("once529 saw %d requests, want 2 (the 529, then its retry)", n)
	}
}

// A model no configured provider serves is the client's mistake: 404 in
// its dialect, no upstream attempt.
func TestLastResortUnservedModelIs404(t *testing.T) {
	up := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("claude-only", up, "models claude-*"))
	_, err := openaiClient(p, "k").Chat.Completions.New(ctxTimeout(t, 5*time.Second), openaiParams("gpt-unknown"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || !strings.Contains(apiErr.Message, `"gpt-unknown": no configured provider serves it`) {
		t.Fatalf("want a 404 naming the model, got %v", err)
	}
	if n := completions(up); n != 0 {
		t.Fatalf("provider saw %d requests", n)
	}
}
