package e2e

import (
	"testing"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// aboutSixty accepts the output tokens of a prefill continuation across
// clouds: the delivered part is counted as the growth of the prompt, and the
// simulator counts a prompt as its body's bytes / 4, which differ by cloud
// (Bedrock's body has no model, an anthropic_version): a few tokens either
// way. Real providers count the same prompt the same on every cloud.
func aboutSixty(n int64) bool { return n >= 55 && n <= 65 }

// A Claude stream cut on one cloud is continued on another with prefill:
// Anthropic's API → Bedrock (SigV4), Bedrock → Vertex (ADC). The client
// reads one whole message; the target saw the delivered text as its
// assistant turn, through its own URL, body rules and auth.
func TestResumeAcrossClouds(t *testing.T) {
	awsTestEnv(t)
	cut := []sim.Fault{{Kind: sim.FaultCut, After: 40, Count: 1}}
	bedrock := func(faults []sim.Fault) *upstream {
		return newUpstream(t, sim.Config{Wire: sim.WireBedrock, Region: "us-west-2", Tokens: 60, Text: longText,
			AWSAccessKey: testAWSKeyID, AWSSecretKey: testAWSSecret, Faults: faults})
	}
	t.Run("anthropic to bedrock", func(t *testing.T) {
		an := newUpstream(t, sim.Config{Tokens: 60, Text: longText, Faults: cut})
		br := bedrock(nil)
		p := startProxy(t, provider("anthropic", an, "api anthropic", "priority 1")+bedrockProvider("bedrock", br, "priority 2")+"hedge off\n")
		m, err := streamAnthropic(ctxTimeout(t, 10*time.Second), anthropicClient(p, "k"), anthropicParams("claude-test"))
		if err != nil || messageText(m) != longText || !aboutSixty(m.Usage.OutputTokens) {
			t.Fatalf("continued stream: %v, text %q, output tokens %d", err, messageText(m), m.Usage.OutputTokens)
		}
		if recs := br.Requests(); len(recs) != 1 || !recs[0].Prefilled {
			t.Fatalf("bedrock saw %+v, want one continuation with a prefill", recs)
		}
	})
	t.Run("bedrock to vertex", func(t *testing.T) {
		br := bedrock(cut)
		vx := newVertex(t)
		if err := vx.SetConfig(sim.Config{Wire: sim.WireVertex, Key: vertexToken, Tokens: 60, Text: longText}); err != nil {
			t.Fatal(err)
		}
		p := startProxy(t, bedrockProvider("bedrock", br, "priority 1")+vertexProvider("vertex", vx, "priority 2")+"hedge off\n")
		m, err := streamAnthropic(ctxTimeout(t, 10*time.Second), anthropicClient(p, "k"), anthropicParams("claude-test"))
		if err != nil || messageText(m) != longText || !aboutSixty(m.Usage.OutputTokens) {
			t.Fatalf("continued stream: %v, text %q, output tokens %d", err, messageText(m), m.Usage.OutputTokens)
		}
		var calls []sim.RequestRecord
		for _, r := range vx.Requests() {
			if r.Path != "/token" { // the ADC token exchange
				calls = append(calls, r)
			}
		}
		if len(calls) != 1 || !calls[0].Prefilled {
			t.Fatalf("vertex saw %d calls (prefilled: %v), want one continuation with a prefill", len(calls), len(calls) > 0 && calls[0].Prefilled)
		}
	})
}
