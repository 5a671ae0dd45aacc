package e2e

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"

	"github.com/llmhedge/caddy-llm-hedge/internal/engine"
	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// Failback (issue 26): turn 1 of a tool loop with thinking on is served by
// translation while the Anthropic provider is down (529 on every call
// turn); turn 2, carrying the tool result, goes to the recovered Anthropic
// provider, whose simulator checks thinking as Anthropic does
// (RequireThinkingSignatures): the translated turn holds no signed
// thinking, so the same history sent to it as the client wrote it is a
// 400. Through the proxy it is accepted: translate.AnthropicFailback turns
// thinking off for that turn. anthropic-sdk-go, stream and non-stream;
// the stream's result turn also carries a text block, as Claude Code's do.
func TestTranslateFailbackThinking(t *testing.T) {
	claude := newUpstream(t, sim.Config{RequireThinkingSignatures: true, ToolCalls: xlCalls, ToolAnswer: xlAnswer,
		Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 529, Turn: sim.TurnToolCall}}})
	gpt := newUpstream(t, sim.Config{ToolCalls: xlCalls, ToolAnswer: xlAnswer, Key: "sk-openai-own"})
	p := startProxy(t, provider("claude", claude, "api anthropic")+
		provider("gpt", gpt, "api openai", "key sk-openai-own", "translate anthropic", "priority 1", "model * gpt-5")+
		"hedge off\n retry {\n same_provider 0\n }\n cooldown {\n failures 100\n }\n")
	c := anthropicClient(p, "sk-ant-client")
	for i, stream := range []bool{false, true} {
		params := anthropic.MessageNewParams{
			Model: "claude-sonnet-4-5", MaxTokens: 2048,
			Thinking: anthropic.ThinkingConfigParamOfEnabled(1024),
			Tools:    []anthropic.ToolUnionParam{xlWeatherTool()},
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Paris?"))},
		}
		var hdr http.Header
		call := xlSend(t, c, params, stream, &hdr)
		if got := hdr.Get(engine.HeaderTranslated); got != "anthropic->openai" || call.StopReason != anthropic.StopReasonToolUse {
			t.Fatalf("stream=%v: turn 1 %s = %q, stop %q: want served by translation with a tool call", stream, engine.HeaderTranslated, got, call.StopReason)
		}
		var results []anthropic.ContentBlockParamUnion
		for _, b := range call.Content {
			if b.Type == "thinking" || b.Type == "redacted_thinking" {
				t.Fatalf("stream=%v: a translated turn shows %s to an Anthropic client", stream, b.Type)
			}
			if b.Type == "tool_use" {
				results = append(results, anthropic.NewToolResultBlock(b.ID, "sunny", false))
			}
		}
		if i == 1 { // Claude Code sends reminders beside its tool results
			results = append(results, anthropic.NewTextBlock("<system-reminder>be brief</system-reminder>"))
		}
		params.Messages = append(params.Messages, call.ToParam(), anthropic.NewUserMessage(results...))

		// The recovered vendor refuses this history as the client wrote it.
		direct := anthropic.NewClient(aoption.WithBaseURL(claude.URL), aoption.WithAPIKey("sk-ant-client"), aoption.WithMaxRetries(0))
		_, err := direct.Messages.New(ctxTimeout(t, 10e9), params)
		var apiErr *anthropic.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.Error(), "Expected `thinking`") {
			t.Fatalf("stream=%v: the Anthropic simulator took the translated history with thinking on (err %v): the test proves nothing", stream, err)
		}

		answer := xlSend(t, c, params, stream, &hdr)
		if got := hdr.Get(engine.HeaderTranslated); got != "" {
			t.Fatalf("stream=%v: turn 2 translated (%q), want the recovered Anthropic provider", stream, got)
		}
		if answer.StopReason != anthropic.StopReasonEndTurn || len(answer.Content) != 1 || answer.Content[0].Text != "The tool returned: sunny" {
			t.Fatalf("stream=%v: turn 2 answer %+v stop %q", stream, answer.Content, answer.StopReason)
		}
	}
	var served int
	for _, r := range messageRecs(claude) {
		if r.ToolResult && r.Status == 200 {
			served++
		}
	}
	if served != 2 {
		t.Fatalf("the Anthropic provider served %d tool-result turns, want 2 (stream and non-stream)\n%s", served, xlAgentTrace(claude, ""))
	}
	if !strings.Contains(p.logs(t), "failback to the original vendor") {
		t.Fatal("no log line names the failback")
	}
}

// A translated stream that breaks after commit (cut, or an event that is
// not JSON) ends with the client's error event, never a clean stop; the
// text before it is what the target sent, translated burst by burst.
func TestTranslateStreamBreaks(t *testing.T) {
	for _, kind := range []sim.FaultKind{sim.FaultCut, sim.FaultMalformed} {
		t.Run(string(kind), func(t *testing.T) {
			gpt := newUpstream(t, sim.Config{Key: "sk-openai-own", Text: "one two three four five six", Tokens: 6,
				Faults: []sim.Fault{{Kind: kind, After: 3}}})
			p := startProxy(t, provider("gpt", gpt, "api openai", "key sk-openai-own", "translate anthropic", "model * gpt-5")+
				"retry {\n same_provider 0\n }\n")
			c := anthropicClient(p, "sk-ant-client")
			s := c.Messages.NewStreaming(ctxTimeout(t, 10e9), anthropicParams("claude-sonnet-4-5"))
			var msg anthropic.Message
			var stopped bool
			for s.Next() {
				ev := s.Current()
				stopped = stopped || ev.Type == "message_stop"
				if err := msg.Accumulate(ev); err != nil {
					t.Fatal(err)
				}
			}
			if s.Err() == nil || stopped {
				t.Fatalf("a broken translated stream ended cleanly (message_stop %v, text %q)", stopped, messageText(msg))
			}
			if got := messageText(msg); got != "one two three " {
				t.Fatalf("text before the break %q, want the 3 deltas sent", got)
			}
		})
	}
}
