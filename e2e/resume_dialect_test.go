package e2e

import (
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// vertexCalls are the requests a Vertex simulator answered, without the
// ADC token exchange.
func vertexCalls(vx *upstream) []sim.RequestRecord {
	var calls []sim.RequestRecord
	for _, r := range vx.Requests() {
		if r.Path != sim.VertexTokenPath {
			calls = append(calls, r)
		}
	}
	return calls
}

// Item 6 (issue 21): a Gemini stream cut after 40 words is continued on
// `api vertex`, whose Gemini answers a trailing model turn from the start.
// By default a Gemini request there gets replay-match (prefill is on for
// Anthropic Messages only); with `prefill on` the continuation that starts
// the answer again is a divergence and replay-match follows. Either way
// genai reads the 60 words once.
func TestResumePrefillFollowsDialect(t *testing.T) {
	for _, tt := range []struct {
		name      string
		opts      []string
		prefilled []bool // the Vertex calls, in order: prefilled or not
	}{
		{"default", nil, []bool{false}},
		{"prefill on", []string{"prefill on"}, []bool{true, false}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			vx := newVertex(t)
			if err := vx.SetConfig(sim.Config{Wire: sim.WireVertex, Key: vertexToken, Tokens: 60, Text: longText, Prefill: sim.PrefillRestart}); err != nil {
				t.Fatal(err)
			}
			p := startProxy(t, provider("cut", resumeCut40(t), "priority 1", "api gemini")+
				vertexProvider("vertex", vx, append([]string{"priority 2"}, tt.opts...)...)+"hedge off\nretry {\n attempts 4\n}\n")
			text, _, err := geminiGenerate(ctxTimeout(t, 10*time.Second), geminiClient(t, p, "k"), "gemini-test", true)
			if err != nil || text != longText {
				t.Fatalf("continued stream: %v\ntext %q\nwant %q", err, text, longText)
			}
			calls := vertexCalls(vx)
			if len(calls) != len(tt.prefilled) {
				t.Fatalf("vertex saw %d calls, want %d", len(calls), len(tt.prefilled))
			}
			for i, want := range tt.prefilled {
				if calls[i].Prefilled != want {
					t.Errorf("vertex call %d prefilled %v, want %v", i, calls[i].Prefilled, want)
				}
			}
		})
	}
}

// Item 7 (issue 21): a prefill that pushes the prompt over the context
// window does not move the continuation to the context_fallback model (a
// `prefill off` provider of another model): it goes on to replay-match on
// the request's own model.
func TestResumeNeverSwitchesModel(t *testing.T) {
	cut := cutOnce(t)
	long := newUpstream(t, sim.Config{Tokens: 60, Text: longText, Faults: []sim.Fault{{Kind: sim.FaultContextLength, Count: 1}}})
	big := newUpstream(t, sim.Config{Tokens: 60, Text: longText})
	p := startProxy(t, provider("cut", cut, "priority 1", "api anthropic", "models claude-test")+
		provider("long", long, "priority 2", "api anthropic", "models claude-test")+
		provider("big", big, "priority 3", "api anthropic", "models claude-big", "prefill off")+
		"hedge off\nretry {\n attempts 4\n context_fallback claude-test claude-big\n}\n")
	m, err := streamAnthropic(ctxTimeout(t, 10*time.Second), anthropicClient(p, "k"), anthropicParams("claude-test"))
	if err != nil || messageText(m) != longText {
		t.Fatalf("continued stream: %v\ntext %q\nwant %q", err, messageText(m), longText)
	}
	if n := len(big.Requests()); n != 0 {
		t.Fatalf("the context_fallback model's provider saw %d requests (prefilled: %v), want none", n, big.Requests()[0].Prefilled)
	}
	recs := long.Requests()
	if len(recs) != 2 || !recs[0].Prefilled || recs[1].Prefilled {
		t.Fatalf("long saw %d requests, want the prefill (400) then the replay", len(recs))
	}
}

// Item 9 (issue 21): after a prefill continuation of a Chat stream (whose
// original input count is unknown) the usage counts the 40 delivered
// chunks as 40 output tokens, and the prompt is the continuation's less
// them: what the uncut request reports, within the simulator's rounding.
func TestResumeChatPrefillUsage(t *testing.T) {
	cut := resumeCut40(t)
	other := newUpstream(t, sim.Config{Tokens: 60, Text: longText})
	p := startProxy(t, provider("cut", cut, "priority 1", "api openai")+provider("other", other, "priority 2", "api openai", "prefill on")+"hedge off\n")
	params := openaiParams("gpt-test")
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	acc, _, err := resumeStreamChat(ctxTimeout(t, 10*time.Second), openaiClient(p, "k"), params)
	if err != nil || resumeChatText(acc) != longText {
		t.Fatalf("continued stream: %v\ntext %q", err, resumeChatText(acc))
	}
	if recs := other.Requests(); len(recs) != 1 || !recs[0].Prefilled {
		t.Fatalf("other saw %d requests, want one prefilled", len(recs))
	}
	uncut, _, err := resumeStreamChat(ctxTimeout(t, 10*time.Second), openaiClient(p, "k"), params) // cut's fault is spent
	if err != nil || uncut.Usage.CompletionTokens != 60 {
		t.Fatalf("uncut stream: %v, usage %+v", err, uncut.Usage)
	}
	u := acc.Usage
	if u.CompletionTokens < 59 || u.CompletionTokens > 61 || u.PromptTokens < uncut.Usage.PromptTokens-3 || u.PromptTokens > uncut.Usage.PromptTokens+3 {
		t.Fatalf("usage %+v after a prefill, want about 60 completion tokens and the uncut prompt's %d", u, uncut.Usage.PromptTokens)
	}
}
