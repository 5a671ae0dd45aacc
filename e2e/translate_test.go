package e2e

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/llmhedge/caddy-llm-hedge/internal/engine"
	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// The scripted tool loop of the translation tests: a call, then an answer
// quoting the tool's result. (The simulator scripts one call per turn;
// parallel calls to one function are the translate package's goldens and
// property tests.)
var (
	xlCalls = []sim.ToolCall{
		{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris","unit":"c"}`)},
	}
	xlAnswer = "The tool returned: {result}"
)

func xlWeatherTool() anthropic.ToolUnionParam {
	return anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
		Name:        "get_weather",
		Description: anthropic.String("Weather of a city"),
		InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{
			"city": map[string]any{"type": "string"}, "unit": map[string]any{"type": "string"}}},
	}}
}

// Anthropic Messages clients served by translation: the Anthropic provider
// is overloaded (529) on every request, and a provider of another format
// with `translate anthropic` serves the whole tool loop, stream and
// non-stream, through anthropic-sdk-go: the tool_use block with its id,
// the name and input as called,
// stop_reason tool_use then end_turn, the answer's exact text, usage, and
// the header naming the translation.
func TestTranslateAnthropicClient(t *testing.T) {
	for _, target := range []string{"openai", "responses", "gemini"} {
		t.Run(target, func(t *testing.T) {
			claude := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 529}}})
			other := newUpstream(t, sim.Config{ToolCalls: xlCalls, ToolAnswer: xlAnswer, Key: "sk-target"})
			model := "claude-sonnet-4-5"
			block := provider("claude", claude, "api anthropic") +
				provider("other", other, "api "+target, "key sk-target", "translate anthropic", "priority 1", "model * gemini-2.5-flash") +
				"\t\thedge {\n\t\t\toff\n\t\t}\n"
			p := startProxy(t, block)
			c := anthropicClient(p, "sk-client")
			for _, stream := range []bool{false, true} {
				params := anthropic.MessageNewParams{
					Model: anthropic.Model(model), MaxTokens: 256,
					System:   []anthropic.TextBlockParam{{Text: "You are terse."}},
					Tools:    []anthropic.ToolUnionParam{xlWeatherTool()},
					Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Paris and Oslo?"))},
				}
				var hdr http.Header
				msg := xlSend(t, c, params, stream, &hdr)
				if got := hdr.Get(engine.HeaderTranslated); got != "anthropic->"+target {
					t.Fatalf("stream=%v: %s = %q, want anthropic->%s", stream, engine.HeaderTranslated, got, target)
				}
				if msg.StopReason != anthropic.StopReasonToolUse {
					t.Fatalf("stream=%v: stop_reason %q, want tool_use: %+v", stream, msg.StopReason, msg.Content)
				}
				ids := map[string]bool{}
				var results []anthropic.ContentBlockParamUnion
				var inputs []string
				for _, b := range msg.Content {
					if b.Type != "tool_use" {
						continue
					}
					if b.Name != "get_weather" || b.ID == "" || ids[b.ID] {
						t.Fatalf("stream=%v: tool_use %q id %q (ids so far %v)", stream, b.Name, b.ID, ids)
					}
					ids[b.ID] = true
					inputs = append(inputs, compactJSON(t, b.Input))
					results = append(results, anthropic.NewToolResultBlock(b.ID, "sunny in "+b.ID[:4], false))
				}
				if want := []string{`{"city":"Paris","unit":"c"}`}; strings.Join(inputs, " ") != strings.Join(want, " ") {
					t.Fatalf("stream=%v: tool inputs %v, want %v", stream, inputs, want)
				}
				if msg.Usage.OutputTokens <= 0 || msg.Usage.InputTokens <= 0 {
					t.Fatalf("stream=%v: usage %+v", stream, msg.Usage)
				}
				params.Messages = append(params.Messages, msg.ToParam(), anthropic.NewUserMessage(results...))
				answer := xlSend(t, c, params, stream, &hdr)
				if answer.StopReason != anthropic.StopReasonEndTurn || len(answer.Content) != 1 || !strings.HasPrefix(answer.Content[0].Text, "The tool returned: sunny in ") {
					t.Fatalf("stream=%v: answer %+v stop %q", stream, answer.Content, answer.StopReason)
				}
			}
			for _, r := range other.Requests() {
				if r.Status != 200 {
					t.Fatalf("the translated provider answered %d: %+v", r.Status, r)
				}
			}
		})
	}
}

// xlSend sends params, streamed or not, and returns the whole message and
// the response header.
func xlSend(t *testing.T, c *anthropic.Client, params anthropic.MessageNewParams, stream bool, hdr *http.Header) anthropic.Message {
	t.Helper()
	var resp *http.Response
	ctx := ctxTimeout(t, 20e9)
	if !stream {
		msg, err := c.Messages.New(ctx, params, aoption.WithResponseInto(&resp))
		if err != nil {
			t.Fatalf("non-stream: %v", err)
		}
		*hdr = resp.Header
		return *msg
	}
	s := c.Messages.NewStreaming(ctx, params, aoption.WithResponseInto(&resp))
	var msg anthropic.Message
	for s.Next() {
		if err := msg.Accumulate(s.Current()); err != nil {
			t.Fatalf("stream: accumulate: %v", err)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	*hdr = resp.Header
	return msg
}

func compactJSON(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("tool input %s: %v", raw, err)
	}
	out, _ := json.Marshal(v) // keys sorted: city, unit
	return string(out)
}

// A request with something the target cannot carry (a server tool)
// sends zero bytes to the translating provider; with no other candidate,
// the client gets a 400 in its own dialect naming what could not be
// carried.
func TestTranslateRefusesMaterialLoss(t *testing.T) {
	other := newUpstream(t, sim.Config{Key: "sk-target"})
	p := startProxy(t, provider("gpt", other, "api openai", "key sk-target", "translate anthropic"))
	c := anthropicClient(p, "sk-client")
	params := anthropicParams("claude-sonnet-4-5")
	params.Tools = []anthropic.ToolUnionParam{{OfWebSearchTool20250305: &anthropic.WebSearchTool20250305Param{}}}
	_, err := c.Messages.New(ctxTimeout(t, 10e9), params)
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.Error(), "web_search") {
		t.Fatalf("err %v, want a 400 naming web_search", err)
	}
	if n := len(other.Requests()); n != 0 {
		t.Fatalf("the translating provider received %d requests, want 0", n)
	}
	// Without the server tool the same pool serves it.
	if _, err := c.Messages.New(ctxTimeout(t, 10e9), anthropicParams("claude-sonnet-4-5")); err != nil {
		t.Fatalf("plain request: %v", err)
	}
}

// OpenAI Responses clients served by translation by an Anthropic provider:
// the Responses provider is overloaded; openai-go reads the function call
// (its call id, name and arguments) and the answer's exact text,
// stream and non-stream.
func TestTranslateResponsesClient(t *testing.T) {
	native := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 529}}})
	claude := newUpstream(t, sim.Config{ToolCalls: xlCalls, ToolAnswer: xlAnswer, Key: "sk-claude"})
	block := provider("gpt", native, "api responses") +
		provider("claude", claude, "api anthropic", "key sk-claude", "translate responses", "priority 1", "model * claude-sonnet-4-5") +
		"\t\thedge {\n\t\t\toff\n\t\t}\n"
	p := startProxy(t, block)
	c := openaiClient(p, "sk-client")
	tool := responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{Name: "get_weather",
		Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}}
	for _, stream := range []bool{false, true} {
		input := responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage("Weather in Paris and Oslo?", responses.EasyInputMessageRoleUser)}
		params := responses.ResponseNewParams{Model: "gpt-5", Tools: []responses.ToolUnionParam{tool},
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input}}
		resp := xlResponses(t, c.Responses, params, stream)
		var calls []responses.ResponseFunctionToolCall
		for _, item := range resp.Output {
			if item.Type == "function_call" {
				calls = append(calls, item.AsFunctionCall())
			}
		}
		if len(calls) != 1 || calls[0].CallID == "" || calls[0].Name != "get_weather" {
			t.Fatalf("stream=%v: calls %+v", stream, calls)
		}
		if compactJSON(t, json.RawMessage(calls[0].Arguments)) != `{"city":"Paris","unit":"c"}` {
			t.Fatalf("stream=%v: arguments %s", stream, calls[0].Arguments)
		}
		for _, call := range calls {
			input = append(input, responses.ResponseInputItemParamOfFunctionCall(call.Arguments, call.CallID, call.Name),
				xlCallOutput(call.CallID, "sunny"))
		}
		params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: input}
		answer := xlResponses(t, c.Responses, params, stream)
		if got := answer.OutputText(); got != "The tool returned: sunny" || answer.Status != "completed" {
			t.Fatalf("stream=%v: answer %q status %q", stream, got, answer.Status)
		}
	}
}

func xlResponses(t *testing.T, s responses.ResponseService, params responses.ResponseNewParams, stream bool) *responses.Response {
	t.Helper()
	ctx := ctxTimeout(t, 20e9)
	if !stream {
		r, err := s.New(ctx, params)
		if err != nil {
			t.Fatalf("non-stream: %v", err)
		}
		return r
	}
	st := s.NewStreaming(ctx, params)
	var done *responses.Response
	for st.Next() {
		if ev := st.Current(); ev.Type == "response.completed" {
			r := ev.AsResponseCompleted().Response
			done = &r
		}
	}
	if err := st.Err(); err != nil || done == nil {
		t.Fatalf("stream: %v (completed %v)", err, done != nil)
	}
	return done
}

func xlCallOutput(callID, output string) responses.ResponseInputItemUnionParam {
	item := responses.ResponseInputItemParamOfFunctionCallOutput(output)
	item.OfFunctionCallOutput.CallID = param.NewOpt(callID)
	return item
}
