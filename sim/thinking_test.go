package sim

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// A tool-use cycle with thinking on, sent by anthropic-sdk-go: accepted
// when its assistant turn starts with thinking the simulator signed (or
// thinking is off, or the knob is off); refused with Anthropic's 400 when
// the turn has no thinking or a signature the simulator never issued.
func TestRequireThinkingSignatures(t *testing.T) {
	_, srv := serve(t, Config{RequireThinkingSignatures: true, ToolCalls: []ToolCall{{Name: "get_weather"}}})
	_, lax := serve(t, Config{ToolCalls: []ToolCall{{Name: "get_weather"}}})
	tool := anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{Name: "get_weather",
		InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{}}}}
	call := anthropic.NewToolUseBlock("toolu_1", map[string]any{}, "get_weather")
	result := anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_1", "sunny", false))
	cycle := func(thinking bool, first ...anthropic.ContentBlockParamUnion) anthropic.MessageNewParams {
		p := anthropic.MessageNewParams{Model: "claude-test", MaxTokens: 2048, Tools: []anthropic.ToolUnionParam{tool},
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather?")),
				anthropic.NewAssistantMessage(append(first, call)...), result}}
		if thinking {
			p.Thinking = anthropic.ThinkingConfigParamOfEnabled(1024)
		}
		return p
	}
	const thought = "The user wants the weather."
	signed := anthropic.NewThinkingBlock(ThinkingSignature(thought), thought)
	forged := anthropic.NewThinkingBlock("EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds", thought)
	for _, c := range []struct {
		name   string
		srv    string
		params anthropic.MessageNewParams
		refuse string // a part of the 400's message; "" for accepted
	}{
		{"signed thinking", "strict", cycle(true, signed), ""},
		{"thinking off", "strict", cycle(false), ""},
		{"knob off", "lax", cycle(true), ""},
		{"no thinking", "strict", cycle(true), "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `tool_use`"},
		{"forged signature", "strict", cycle(true, forged), "messages.1.content.0: Invalid `signature` in `thinking` block"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := srv
			if c.srv == "lax" {
				s = lax
			}
			client := anthropicClient(s, "k")
			msg, err := client.Messages.New(t.Context(), c.params)
			if c.refuse == "" {
				if err != nil || msg.StopReason != anthropic.StopReasonEndTurn || !strings.Contains(msg.Content[0].Text, "sunny") {
					t.Fatalf("err %v, message %+v", err, msg)
				}
				return
			}
			var apiErr *anthropic.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.Error(), "invalid_request_error") || !strings.Contains(apiErr.Error(), c.refuse) {
				t.Fatalf("err %v, want a 400 invalid_request_error with %q", err, c.refuse)
			}
		})
	}
}

func TestRequireThinkingSignaturesCaddyfile(t *testing.T) {
	var h Handler
	if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("llm_sim {\n\trequire_thinking_signatures\n}")); err != nil || !h.RequireThinkingSignatures {
		t.Fatalf("err %v, knob %v", err, h.RequireThinkingSignatures)
	}
	if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("llm_sim {\n\trequire_thinking_signatures yes\n}")); err == nil {
		t.Fatal("an argument must be refused")
	}
}
