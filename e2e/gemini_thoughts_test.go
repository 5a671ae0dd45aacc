package e2e

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genai"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// A thinking model's stream (Gemini CLI asks for the thoughts) reaches
// the genai SDK whole through the proxy, its run of thought chunks read by
// their frame: after a primary's 503 before the first byte, from the
// secondary; and cut in the answer after the thoughts, as the SDK's error,
// never as a clean end.
func TestGeminiThoughtsThroughProxy(t *testing.T) {
	chunk := func(part, finish string) string {
		return streamSSE("", `{"candidates": [{"content": {"parts": [{`+part+`}],"role": "model"},`+finish+`"index": 0}],`+
			`"usageMetadata": {"promptTokenCount": 5,"totalTokenCount": 29,"thoughtsTokenCount": 24},"modelVersion": "gemini-2.5-pro","responseId": "r1"}`)
	}
	var thoughts []string
	var wantThoughts string
	for i := range 8 {
		s := fmt.Sprintf("Step %d of the plan. ", i)
		thoughts = append(thoughts, chunk(`"text": "`+s+`","thought": true`, ""))
		wantThoughts += s
	}
	var cut atomic.Bool
	sc := newStreamScript(t, func(r *http.Request, send func(...string) bool) {
		if !send(thoughts...) || !send(chunk(`"text": "Hello "`, ""), chunk(`"text": "world."`, "")) || cut.Load() {
			return // the body ends without a finishReason: a cut
		}
		send(chunk(`"text": ""`, `"finishReason": "STOP",`))
	})
	primary := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 503}}})
	p := startProxy(t, provider("primary", primary, "priority 0", "key sk-op")+provider("secondary", sc.up(), "priority 1", "key sk-op")+
		"hedge off\n cooldown {\n failures 100\n }\n")
	ask := func() (thought, text string, err error) {
		c := geminiClient(t, p, "client-key")
		for resp, err := range c.Models.GenerateContentStream(ctxTimeout(t, 15*time.Second), "gemini-test", genai.Text("hello"), nil) {
			if err != nil {
				return thought, text, err
			}
			for _, cand := range resp.Candidates {
				if cand.Content == nil {
					continue
				}
				for _, part := range cand.Content.Parts {
					if part.Thought {
						thought += part.Text
					} else {
						text += part.Text
					}
				}
			}
		}
		return thought, text, nil
	}
	thought, text, err := ask()
	if err != nil || thought != wantThoughts || text != "Hello world." {
		t.Fatalf("after the primary's 503: thoughts %q, text %q, err %v", thought, text, err)
	}
	if n := sc.hits.Load(); n != 1 {
		t.Fatalf("the secondary served %d requests, want 1", n)
	}
	cut.Store(true)
	thought, text, err = ask()
	var apiErr genai.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != http.StatusBadGateway {
		t.Fatalf("cut after the thoughts: thoughts %q, text %q, err %v; want a 502 APIError", thought, text, err)
	}
	if thought != wantThoughts || !strings.HasPrefix("Hello world.", text) {
		t.Fatalf("cut after the thoughts: thoughts %q, text %q before the error", thought, text)
	}
}
