package translate

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3/responses"
)

// responsesParams unmarshals a translated body into openai-go's request
// type and checks that its input items survive the SDK's types unchanged.
func responsesParams(t *testing.T, body []byte) responses.ResponseNewParams {
	t.Helper()
	var p responses.ResponseNewParams
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("translated body does not unmarshal into responses.ResponseNewParams: %v\n%s", err, body)
	}
	var ours struct {
		Input json.RawMessage `json:"input"`
	}
	_ = json.Unmarshal(body, &ours)
	theirs, _ := json.Marshal(p.Input)
	if !jsonEqual(t, ours.Input, theirs) {
		t.Errorf("input changes through the SDK's types:\nours:   %s\ntheirs: %s", ours.Input, theirs)
	}
	return p
}

func TestAnthropicToResponsesRequest(t *testing.T) {
	p, _ := For(Anthropic, Responses)
	cases := []struct{ name, body, want, losses string }{
		{
			name: "system, text, image, pdf, sampling, stream",
			body: `{"model":"c","max_tokens":100,"system":[{"type":"text","text":"A"},{"type":"text","text":"B"}],"temperature":0.3,"stream":true,"messages":[{"role":"user","content":[{"type":"text","text":"what?"},` +
				`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},{"type":"document","title":"spec.pdf","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0="}}]}]}`,
			want: `{"model":"gpt-5","instructions":"A\n\nB","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"what?"},{"type":"input_image","image_url":"data:image/png;base64,iVBORw0KGgo=","detail":"auto"},` +
				`{"type":"input_file","file_data":"data:application/pdf;base64,JVBERi0=","filename":"spec.pdf"}]}],"max_output_tokens":100,"temperature":0.3,"stream":true,"store":false}`,
		},
		{
			name: "tool loop in order, image in a tool result, tool_choice tool, no parallel",
			body: `{"model":"c","max_tokens":50,"tool_choice":{"type":"tool","name":"shot","disable_parallel_tool_use":true},"tools":[{"name":"shot","input_schema":{"type":"object","properties":{}}}],"messages":[{"role":"user","content":"look"},` +
				`{"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"c2ln"},{"type":"text","text":"Taking it."},{"type":"tool_use","id":"toolu_1","name":"shot","input":{}},{"type":"text","text":"And more."}]},` +
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"here"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]},{"type":"text","text":"well?"}]}]}`,
			want: `{"model":"gpt-5","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"look"}]},` +
				`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Taking it."}]},{"type":"function_call","call_id":"toolu_1","name":"shot","arguments":"{}"},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"And more."}]},` +
				`{"type":"function_call_output","call_id":"toolu_1","output":[{"type":"input_text","text":"here"},{"type":"input_image","image_url":"data:image/png;base64,iVBORw0KGgo=","detail":"auto"}]},{"type":"message","role":"user","content":[{"type":"input_text","text":"well?"}]}],` +
				`"tools":[{"type":"function","name":"shot","parameters":{"type":"object","properties":{}},"strict":false}],"tool_choice":{"type":"function","name":"shot"},"parallel_tool_calls":false,"max_output_tokens":50,"store":false}`,
			losses: "anthropic reasoning state (kept for anthropic only) (dropped)",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := checkRequest(t, p, c.body, "gpt-5", c.want, c.losses)
			responsesParams(t, out)
		})
	}
}

func TestAnthropicToResponsesRefusals(t *testing.T) {
	p, _ := For(Anthropic, Responses)
	cases := []struct{ name, body, want string }{
		{"server tool", `{"model":"c","max_tokens":64,"tools":[{"type":"web_search_20250305","name":"web_search"}],"messages":[{"role":"user","content":"x"}]}`, "server tool web_search_20250305"},
		{"stop sequences", `{"model":"c","max_tokens":64,"stop_sequences":["END"],"messages":[{"role":"user","content":"x"}]}`, "stop_sequences"},
		{"text document", `{"model":"c","max_tokens":64,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"hello"}}]}]}`, "document other than an inline PDF"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkRefusal(t, p, c.body, "gpt-5", c.want)
		})
	}
}

func TestAnthropicFromResponsesStream(t *testing.T) {
	p, _ := For(Anthropic, Responses)
	cases := []struct {
		name, wantErr string
		check         func(t *testing.T, m anthropic.Message)
	}{
		{name: "text", check: func(t *testing.T, m anthropic.Message) {
			if m.ID != "msg_T1" || m.Content[0].Text != "Hello, \"world\" é\n" || m.StopReason != "end_turn" || m.Usage.InputTokens != 15 || m.Usage.CacheReadInputTokens != 4 {
				t.Errorf("got %s", m.RawJSON())
			}
		}},
		{name: "parallel_tools", check: func(t *testing.T, m anthropic.Message) {
			if len(m.Content) != 3 || m.Content[1].ID != "call_Wx1" || m.Content[2].ID != "call_Wx2" || m.StopReason != "tool_use" || strings.Contains(m.RawJSON(), "gAAAA") || strings.Contains(m.RawJSON(), "Two cities") {
				t.Errorf("got %s", m.RawJSON())
			}
		}},
		{name: "max_tokens", check: func(t *testing.T, m anthropic.Message) {
			if m.StopReason != "max_tokens" {
				t.Errorf("stop_reason %s", m.StopReason)
			}
		}},
		{name: "max_tokens_mid_args", wantErr: "tool arguments are not valid JSON"},
		{name: "failed", wantErr: "server had an error"},
		{name: "truncated", wantErr: "ended before response.completed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if msg, ok := anthropicStreamCase(t, p, "responses", c.name, c.wantErr); ok {
				c.check(t, msg)
			}
		})
	}
}

func TestAnthropicFromResponsesStreamRechunked(t *testing.T) {
	p, _ := For(Anthropic, Responses)
	checkRechunked(t, p, "responses")
}
