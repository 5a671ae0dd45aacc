package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"google.golang.org/genai"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// What a thinking model streams first, before its answer: Claude Code's
// extended thinking (a signed thinking block), Codex's reasoning (a
// reasoning item with its summary and encrypted content) and a Chat
// reasoner's reasoning_content. Each reaches
// its SDK whole through the proxy after a primary's 529 before the first
// byte; cut inside the thinking, it reaches the SDK as an error, never as
// a clean end, and is not continued elsewhere (a continuation cannot carry
// the vendor's signature or encrypted reasoning: the resume outcome is
// ineligible and the third provider is never asked).

// thinkingProxy starts a proxy whose primary answers 529, whose secondary
// is sc, and whose third provider (a simulator) would take a
// continuation.
func thinkingProxy(t *testing.T, sc *streamScript, api string) (p *proxy, primary, other *upstream) {
	t.Helper()
	primary = newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 529}}})
	other = newUpstream(t, sim.Config{Tokens: 60, Text: longText})
	p = startProxy(t, provider("primary", primary, "priority 0", "api "+api, "key sk-op")+
		provider("secondary", sc.up(), "priority 1", "api "+api, "key sk-op")+
		provider("other", other, "priority 2", "api "+api, "key sk-op")+
		"hedge off\n retry {\n same_provider 0\n }\n cooldown {\n failures 100\n }\n stream {\n resume 1\n }\n")
	return p, primary, other
}

// wantIneligibleCut checks that the second request's cut was not
// continued.
func wantIneligibleCut(t *testing.T, p *proxy, other *upstream) {
	t.Helper()
	wantIneligibleCuts(t, p, other, 1)
}

// wantIneligibleCuts checks that, of the proxy's first two requests, cuts
// were cut and none was continued: the third provider was never asked,
// and the requests' log lines (in the order they ended) note cuts
// continuations, each ineligible.
func wantIneligibleCuts(t *testing.T, p *proxy, other *upstream, cuts int) {
	t.Helper()
	if n := len(other.Requests()); n != 0 {
		t.Fatalf("the third provider saw %d requests, want no continuation attempt", n)
	}
	var outcomes []any
	for _, line := range streamLogLines(t, p, 2) {
		chain, _ := line["chain"].([]any)
		for _, e := range chain {
			if m, _ := e.(map[string]any); m["event"] == "resume" {
				outcomes = append(outcomes, m["outcome"])
			}
		}
	}
	if len(outcomes) != cuts || slices.ContainsFunc(outcomes, func(o any) bool { return o != "ineligible" }) {
		t.Fatalf("continuation outcomes %v, want %d ineligible", outcomes, cuts)
	}
}

// thinkingSteps is a thinking model's n steps, each a JSON string given
// to event (the step's event in the wire's shape), and the steps' text
// joined, as the client must read it.
func thinkingSteps(n int, event func(step string) string) (events []string, text string) {
	for i := range n {
		s := fmt.Sprintf("Step %d: read the file, then check the test. ", i)
		events = append(events, event(jsonString(s)))
		text += s
	}
	return events, text
}

// jsonString is s as a JSON string.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestAnthropicThinkingThroughProxy(t *testing.T) {
	const signature = "EqQBCkYIBxgCKkDsig+/=="
	ev := streamSSE
	deltas, wantThinking := thinkingSteps(12, func(step string) string {
		return ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":`+step+`}}`)
	})
	var cut atomic.Bool
	sc := newStreamScript(t, func(r *http.Request, send func(...string) bool) {
		if !send(ev("message_start", `{"type":"message_start","message":{"id":"msg_think","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":1}}}`),
			ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`)) ||
			!send(deltas[:6]...) || cut.Load() {
			return // cut inside the thinking block
		}
		send(deltas[6:]...)
		send(ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"`+signature+`"}}`),
			ev("content_block_stop", `{"type":"content_block_stop","index":0}`),
			ev("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`),
			ev("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hello "}}`),
			ev("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"world."}}`),
			ev("content_block_stop", `{"type":"content_block_stop","index":1}`),
			ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":150}}`),
			ev("message_stop", `{"type":"message_stop"}`))
	})
	p, primary, other := thinkingProxy(t, sc, "anthropic")
	params := anthropicParams("claude-sonnet-4-5")
	params.MaxTokens = 4096
	params.Thinking = anthropic.ThinkingConfigParamOfEnabled(2048)

	m, err := streamAnthropic(ctxTimeout(t, 15*time.Second), anthropicClient(p, "client-key"), params)
	if err != nil {
		t.Fatalf("after the primary's 529: %v", err)
	}
	if len(m.Content) != 2 || m.Content[0].Type != "thinking" || m.Content[0].Thinking != wantThinking ||
		m.Content[0].Signature != signature || m.Content[1].Text != "Hello world." || m.StopReason != anthropic.StopReasonEndTurn {
		t.Fatalf("after the primary's 529: the SDK's message %+v", m)
	}
	if len(primary.Requests()) == 0 || sc.hits.Load() != 1 {
		t.Fatalf("primary saw %d requests, secondary %d: want the 529 then one", len(primary.Requests()), sc.hits.Load())
	}

	cut.Store(true)
	m, err = streamAnthropic(ctxTimeout(t, 15*time.Second), anthropicClient(p, "client-key"), params)
	if err == nil {
		t.Fatalf("a stream cut inside its thinking finished cleanly: %+v", m)
	}
	if len(m.Content) != 1 || !strings.HasPrefix(wantThinking, m.Content[0].Thinking) || m.Content[0].Signature != "" {
		t.Fatalf("cut inside the thinking: the SDK's message before the error %+v", m)
	}
	wantIneligibleCut(t, p, other)
}

func TestResponsesReasoningThroughProxy(t *testing.T) {
	const encrypted = "gAAAAABoc2ltLXJlYXNvbmluZw=="
	ev := func(typ, rest string) string {
		return streamSSE(typ, `{"type":"`+typ+`",`+rest+`}`)
	}
	resp := func(status, output string) string {
		return `"response":{"id":"resp_think","object":"response","created_at":1,"status":"` + status + `","model":"gpt-5-codex","output":[` + output + `],` +
			`"usage":{"input_tokens":12,"input_tokens_details":{"cached_tokens":0},"output_tokens":150,"output_tokens_details":{"reasoning_tokens":128},"total_tokens":162}}`
	}
	seq := 3 // the events before the deltas are 0-3
	deltas, wantSummary := thinkingSteps(12, func(step string) string {
		seq++
		return ev("response.reasoning_summary_text.delta", `"item_id":"rs_1","output_index":0,"summary_index":0,"delta":`+step+`,"sequence_number":`+fmt.Sprint(seq))
	})
	reasoning := `{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":` + jsonString(wantSummary) + `}],"encrypted_content":"` + encrypted + `"}`
	message := `{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hello world.","annotations":[]}]}`
	var cut atomic.Bool
	sc := newStreamScript(t, func(r *http.Request, send func(...string) bool) {
		if !send(ev("response.created", resp("in_progress", "")+`,"sequence_number":0`),
			ev("response.in_progress", resp("in_progress", "")+`,"sequence_number":1`),
			ev("response.output_item.added", `"output_index":0,"item":{"type":"reasoning","id":"rs_1","summary":[]},"sequence_number":2`),
			ev("response.reasoning_summary_part.added", `"item_id":"rs_1","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":""},"sequence_number":3`)) ||
			!send(deltas[:6]...) || cut.Load() {
			return // cut inside the reasoning
		}
		send(deltas[6:]...)
		send(ev("response.reasoning_summary_text.done", `"item_id":"rs_1","output_index":0,"summary_index":0,"text":`+jsonString(wantSummary)+`,"sequence_number":16`),
			ev("response.reasoning_summary_part.done", `"item_id":"rs_1","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":`+jsonString(wantSummary)+`},"sequence_number":17`),
			ev("response.output_item.done", `"output_index":0,"item":`+reasoning+`,"sequence_number":18`),
			ev("response.output_item.added", `"output_index":1,"item":{"type":"message","id":"msg_1","status":"in_progress","role":"assistant","content":[]},"sequence_number":19`),
			ev("response.content_part.added", `"item_id":"msg_1","output_index":1,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]},"sequence_number":20`),
			ev("response.output_text.delta", `"item_id":"msg_1","output_index":1,"content_index":0,"delta":"Hello ","sequence_number":21`),
			ev("response.output_text.delta", `"item_id":"msg_1","output_index":1,"content_index":0,"delta":"world.","sequence_number":22`),
			ev("response.output_text.done", `"item_id":"msg_1","output_index":1,"content_index":0,"text":"Hello world.","sequence_number":23`),
			ev("response.content_part.done", `"item_id":"msg_1","output_index":1,"content_index":0,"part":{"type":"output_text","text":"Hello world.","annotations":[]},"sequence_number":24`),
			ev("response.output_item.done", `"output_index":1,"item":`+message+`,"sequence_number":25`),
			ev("response.completed", resp("completed", reasoning+","+message)+`,"sequence_number":26`))
	})
	p, primary, other := thinkingProxy(t, sc, "responses")
	params := responsesParams("gpt-5-codex")
	// Codex's request: not stored, the reasoning carried back encrypted
	// (a stored response is never continued: resume.go).
	params.Store = openai.Bool(false)
	params.Include = []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent}

	ask := func() responsesStreamed {
		return streamResponses(ctxTimeout(t, 15*time.Second), openaiClient(p, "client-key"), params)
	}
	got := ask()
	if got.err != nil || got.summary != wantSummary || got.text != "Hello world." || got.completed == nil {
		t.Fatalf("after the primary's 529: summary %q, text %q, completed %v, err %v", got.summary, got.text, got.completed != nil, got.err)
	}
	out := got.completed.Output
	if len(out) != 2 || out[0].Type != "reasoning" || out[0].EncryptedContent != encrypted ||
		len(out[0].Summary) != 1 || out[0].Summary[0].Text != wantSummary || got.completed.OutputText() != "Hello world." {
		t.Fatalf("after the primary's 529: the completed response's output %+v", out)
	}
	if len(primary.Requests()) == 0 || sc.hits.Load() != 1 {
		t.Fatalf("primary saw %d requests, secondary %d: want the 529 then one", len(primary.Requests()), sc.hits.Load())
	}

	cut.Store(true)
	got = ask()
	if got.err == nil || got.completed != nil {
		t.Fatalf("a stream cut inside its reasoning finished cleanly: summary %q, completed %v", got.summary, got.completed != nil)
	}
	if !strings.HasPrefix(wantSummary, got.summary) || got.text != "" {
		t.Fatalf("cut inside the reasoning: summary %q, text %q before the error", got.summary, got.text)
	}
	wantIneligibleCut(t, p, other)
}

// A Chat Completions stream that reasons first (reasoning_content, as
// DeepSeek and the OpenAI-compatible gateways opencode talks to send it):
// the same after a 529, and the same when cut inside the reasoning.
func TestChatReasoningThroughProxy(t *testing.T) {
	deltas, wantReasoning := thinkingSteps(12, func(step string) string { return streamOChunk(`{"reasoning_content":`+step+`}`, "null") })
	var cut atomic.Bool
	sc := newStreamScript(t, func(r *http.Request, send func(...string) bool) {
		if !send(streamORole) || !send(deltas[:6]...) || cut.Load() {
			return // cut inside the reasoning
		}
		send(deltas[6:]...)
		send(streamOContent("Hello "), streamOContent("world."), streamOChunk(`{}`, `"stop"`), streamODone)
	})
	p, primary, other := thinkingProxy(t, sc, "openai")
	ask := func() (reasoning, text string, err error) {
		stream := openaiClient(p, "client-key").Chat.Completions.NewStreaming(ctxTimeout(t, 15*time.Second), openaiParams("deepseek-reasoner"))
		defer stream.Close()
		for stream.Next() {
			for _, c := range stream.Current().Choices {
				text += c.Delta.Content
				if f, ok := c.Delta.JSON.ExtraFields["reasoning_content"]; ok {
					var s string
					if err := json.Unmarshal([]byte(f.Raw()), &s); err != nil {
						return reasoning, text, err
					}
					reasoning += s
				}
			}
		}
		return reasoning, text, stream.Err()
	}
	reasoning, text, err := ask()
	if err != nil || reasoning != wantReasoning || text != "Hello world." {
		t.Fatalf("after the primary's 529: reasoning %q, text %q, err %v", reasoning, text, err)
	}
	if len(primary.Requests()) == 0 || sc.hits.Load() != 1 {
		t.Fatalf("primary saw %d requests, secondary %d: want the 529 then one", len(primary.Requests()), sc.hits.Load())
	}

	cut.Store(true)
	reasoning, text, err = ask()
	if err == nil {
		t.Fatalf("a stream cut inside its reasoning finished cleanly: reasoning %q, text %q", reasoning, text)
	}
	if !strings.HasPrefix(wantReasoning, reasoning) || text != "" {
		t.Fatalf("cut inside the reasoning: reasoning %q, text %q before the error", reasoning, text)
	}
	wantIneligibleCut(t, p, other)
}

// A Gemini stream cut inside its thoughts (Gemini CLI's shape; the whole
// stream and a cut after the thoughts: gemini_thoughts_test.go) is the
// genai SDK's error and is not continued elsewhere.
func TestGeminiThoughtsCutNotContinued(t *testing.T) {
	chunk := func(part string) string {
		return streamSSE("", `{"candidates": [{"content": {"parts": [{`+part+`}],"role": "model"},"index": 0}],`+
			`"usageMetadata": {"promptTokenCount": 5,"totalTokenCount": 29,"thoughtsTokenCount": 24},"modelVersion": "gemini-2.5-pro","responseId": "r1"}`)
	}
	var thoughts []string
	for i := range 4 {
		thoughts = append(thoughts, chunk(fmt.Sprintf(`"text": "Step %d of the plan. ","thought": true`, i)))
	}
	sc := newStreamScript(t, func(r *http.Request, send func(...string) bool) {
		send(thoughts...) // and the body ends: cut inside the thoughts
	})
	p, _, other := thinkingProxy(t, sc, "gemini")
	for range 2 { // the log's first two lines are these requests'
		var thought, text string
		var err error
		for resp, e := range geminiClient(t, p, "client-key").Models.GenerateContentStream(ctxTimeout(t, 15*time.Second), "gemini-test", genai.Text("hello"), nil) {
			if err = e; err != nil {
				break
			}
			for _, cand := range resp.Candidates {
				for _, part := range cand.Content.Parts {
					if part.Thought {
						thought += part.Text
					} else {
						text += part.Text
					}
				}
			}
		}
		var apiErr genai.APIError
		if !errors.As(err, &apiErr) || apiErr.Code != http.StatusBadGateway || text != "" || !strings.HasPrefix(thought, "Step 0") {
			t.Fatalf("cut inside the thoughts: thoughts %q, text %q, err %v; want the thoughts, then a 502 APIError", thought, text, err)
		}
	}
	wantIneligibleCuts(t, p, other, 2)
}
