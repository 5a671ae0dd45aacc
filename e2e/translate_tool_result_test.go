package e2e

import (
	"net/http"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// A tool_result of several text parts (an MCP tool's items, a file and a
// note) reaches a provider of another format with its parts on lines of
// their own, never glued into one word: the simulator quotes the result it
// read, so the answer shows what the target model was given.
func TestTranslateToolResultParts(t *testing.T) {
	for _, target := range []string{"openai", "responses", "gemini"} {
		t.Run(target, func(t *testing.T) {
			other := newUpstream(t, sim.Config{ToolCalls: xlCalls, ToolAnswer: xlAnswer, Key: "sk-target"})
			p := startProxy(t, provider("other", other, "api "+target, "key sk-target", "translate anthropic", "model * gemini-2.5-flash"))
			c := anthropicClient(p, "sk-client")
			params := anthropic.MessageNewParams{
				Model: "claude-sonnet-4-5", MaxTokens: 256,
				Tools:    []anthropic.ToolUnionParam{xlWeatherTool()},
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Paris?"))},
			}
			var hdr http.Header
			call := xlSend(t, c, params, false, &hdr)
			var id string
			for _, b := range call.Content {
				if b.Type == "tool_use" {
					id = b.ID
				}
			}
			if id == "" {
				t.Fatalf("no tool_use in %+v", call.Content)
			}
			result := anthropic.ToolResultBlockParam{ToolUseID: id, Content: []anthropic.ToolResultBlockParamContentUnion{
				{OfText: &anthropic.TextBlockParam{Text: "line one"}},
				{OfText: &anthropic.TextBlockParam{Text: "line two"}},
			}}
			params.Messages = append(params.Messages, call.ToParam(),
				anthropic.NewUserMessage(anthropic.ContentBlockParamUnion{OfToolResult: &result}))
			for _, stream := range []bool{false, true} {
				answer := xlSend(t, c, params, stream, &hdr)
				want := "The tool returned: line one\nline two"
				if len(answer.Content) != 1 || answer.Content[0].Text != want {
					t.Errorf("stream=%v: answer %s, want the text %q", stream, answer.RawJSON(), want)
				}
			}
		})
	}
}
