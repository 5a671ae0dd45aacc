package e2e

import (
	"strings"
	"testing"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// Claude Code through an `api bedrock` provider: every event it reads was
// a Bedrock event-stream frame, decoded (both CRC32s, the chunk's base64)
// and written as Anthropic SSE by the proxy.

func newBedrockText(t *testing.T, text string, faults ...sim.Fault) *upstream {
	return newUpstream(t, sim.Config{Wire: sim.WireBedrock, Region: "us-west-2", Text: text,
		AWSAccessKey: testAWSKeyID, AWSSecretKey: testAWSSecret, Faults: faults})
}

// The Anthropic provider is overloaded (529); the proxy fails over to
// Bedrock and Claude Code prints Bedrock's whole answer.
func TestClaudeCodeBedrockFailover(t *testing.T) {
	awsTestEnv(t)
	primary := newUpstream(t, sim.Config{Text: claudePrimaryText, Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 529}}})
	br := newBedrockText(t, claudeSecondaryText)
	p := startProxy(t, provider("primary", primary, "priority 0")+bedrockProvider("bedrock", br, "priority 1")+
		"hedge off\n retry {\n same_provider 0\n }\n")

	out, res := runClaude(t, p, "ANTHROPIC_MODEL=claude-test")
	if res.Exit != 0 || out.IsError || out.Result != claudeSecondaryText {
		t.Fatalf("want exit 0 and Bedrock's text %q, got is_error=%v result=%q\n%s", claudeSecondaryText, out.IsError, out.Result, res)
	}
	if n := len(br.Requests()); n != 1 {
		t.Fatalf("bedrock saw %d requests, want 1 (the failover)\n%s", n, res)
	}
}

// Every Bedrock stream is cut after three deltas, after commit. Claude
// Code must report an error, never the truncated text as its answer.
func TestClaudeCodeBedrockStreamCut(t *testing.T) {
	awsTestEnv(t)
	br := newBedrockText(t, claudeSecondaryText, sim.Fault{Kind: sim.FaultCut, After: 3})
	p := startProxy(t, bedrockProvider("bedrock", br)+
		"hedge off\n retry {\n same_provider 0\n }\n cooldown {\n failures 100\n }\n")

	out, res := runClaude(t, p, "ANTHROPIC_MODEL=claude-test", "CLAUDE_CODE_MAX_RETRIES=0")
	if res.Exit == 0 || !out.IsError {
		t.Fatalf("every Bedrock stream was cut, yet claude reported success with %q\n%s", out.Result, res)
	}
	if prefix := strings.Join(strings.Fields(claudeSecondaryText)[:3], " "); strings.Contains(out.Result, prefix) {
		t.Fatalf("claude printed the truncated answer %q\n%s", out.Result, res)
	}
}

// Claude Code on two Bedrock accounts, the first answering 503
// (ServiceUnavailableException): the proxy retries it once and fails over
// to the second. Claude Code's turn (about 50 KB, a leased body) is
// hashed for SigV4 at its first attempt; the retry and the failover sign
// that hash, and the simulators verify every signature against the bytes
// they read before their faults (a bad one would be a 403, not a 503).
func TestClaudeCodeBedrockRetrySignsOneHash(t *testing.T) {
	awsTestEnv(t)
	unavailable := newBedrockText(t, claudePrimaryText, sim.Fault{Kind: sim.FaultStatus, Status: 503})
	br := newBedrockText(t, claudeSecondaryText)
	p := startProxy(t, bedrockProvider("east", unavailable, "priority 0")+bedrockProvider("west", br, "priority 1")+
		"hedge off\n retry {\n same_provider 1\n }\n cooldown {\n failures 100\n }\n")

	out, res := runClaude(t, p, "ANTHROPIC_MODEL=claude-test")
	if res.Exit != 0 || out.IsError || out.Result != claudeSecondaryText {
		t.Fatalf("want exit 0 and the second account's text %q, got is_error=%v result=%q\n%s", claudeSecondaryText, out.IsError, out.Result, res)
	}
	first, second := unavailable.Requests(), br.Requests()
	if len(first) < 2 || len(second) < 1 {
		t.Fatalf("the accounts saw %d and %d requests, want a retry on the first and the failover\n%s", len(first), len(second), res)
	}
	for _, r := range first {
		if r.Status != 503 {
			t.Errorf("first account: status %d, want 503 (its signature verified first)", r.Status)
		}
	}
	for _, r := range second {
		if r.Status != 200 {
			t.Errorf("second account: status %d, want 200", r.Status)
		}
	}
	if n := len(second[0].CloudBody); n < 16<<10 {
		t.Errorf("Claude Code's turn was %d bytes: under 16 KiB the body is not leased, and no hash is kept", n)
	}
}
