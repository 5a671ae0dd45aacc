package translate

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
)

// chatParams unmarshals a translated body into openai-go's request type
// and checks that its messages survive the SDK's types unchanged.
func chatParams(t *testing.T, body []byte) openai.ChatCompletionNewParams {
	t.Helper()
	var p openai.ChatCompletionNewParams
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("translated body does not unmarshal into openai.ChatCompletionNewParams: %v\n%s", err, body)
	}
	var ours struct {
		Messages json.RawMessage `json:"messages"`
	}
	_ = json.Unmarshal(body, &ours)
	theirs, _ := json.Marshal(p.Messages)
	if !jsonEqual(t, ours.Messages, theirs) {
		t.Errorf("messages change through the SDK's types:\nours:   %s\ntheirs: %s", ours.Messages, theirs)
	}
	return p
}

func lossNames(losses []Loss) string {
	var s []string
	for _, l := range losses {
		s = append(s, l.String())
	}
	return strings.Join(s, "; ")
}

func TestAnthropicToChatRequest(t *testing.T) {
	p, _ := For(Anthropic, OpenAI)
	cases := []struct {
		name, body string
		want       string // the expected Chat body
		losses     string
	}{
		{
			name: "system, text, sampling, stop, stream",
			body: `{"model":"claude-sonnet-4-5","max_tokens":512,"system":"Be brief.","temperature":0.2,"top_p":0.9,` +
				`"stop_sequences":["END"],"stream":true,"messages":[{"role":"user","content":"Hi"}]}`,
			want: `{"model":"gpt-5","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}],` +
				`"max_completion_tokens":512,"temperature":0.2,"top_p":0.9,"stop":["END"],"stream":true,"stream_options":{"include_usage":true}}`,
			losses: "stop_sequence stop reason (reported as end_turn) (dropped)",
		},
		{
			name: "system blocks with cache_control, top_k, metadata",
			body: `{"model":"c","max_tokens":10,"top_k":5,"metadata":{"user_id":"u"},"system":[{"type":"text","text":"A","cache_control":{"type":"ephemeral"}},{"type":"text","text":"B"}],` +
				`"messages":[{"role":"user","content":[{"type":"text","text":"Q"}]}]}`,
			want:   `{"model":"gpt-5","messages":[{"role":"system","content":"A\n\nB"},{"role":"user","content":"Q"}],"max_completion_tokens":10}`,
			losses: "metadata (dropped); top_k (dropped); cache_control breakpoints (dropped)",
		},
		{
			name: "images base64 and url",
			body: `{"model":"c","max_tokens":10,"messages":[{"role":"user","content":[{"type":"text","text":"what?"},` +
				`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBOR"}},` +
				`{"type":"image","source":{"type":"url","url":"https://example.com/a.jpg"}}]}]}`,
			want: `{"model":"gpt-5","messages":[{"role":"user","content":[{"type":"text","text":"what?"},` +
				`{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBOR"}},{"type":"image_url","image_url":{"url":"https://example.com/a.jpg"}}]}],"max_completion_tokens":10}`,
		},
		{
			name: "tool loop: parallel calls, results first, tools, tool_choice any, no parallel",
			body: `{"model":"c","max_tokens":100,"tools":[{"name":"get_weather","description":"Weather","input_schema":{"type":"object","properties":{"location":{"type":"string"}}}}],` +
				`"tool_choice":{"type":"any","disable_parallel_tool_use":true},"messages":[` +
				`{"role":"user","content":"Weather in Paris and Tokyo?"},` +
				`{"role":"assistant","content":[{"type":"text","text":"Checking."},{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"location":"Paris"}},{"type":"tool_use","id":"toolu_2","name":"get_weather","input":{"location":"Tokyo"}}]},` +
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"18C"},{"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"25C"}],"is_error":false},{"type":"text","text":"Thanks"}]}]}`,
			want: `{"model":"gpt-5","messages":[{"role":"user","content":"Weather in Paris and Tokyo?"},` +
				`{"role":"assistant","content":"Checking.","tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":"{\"location\":\"Paris\"}"}},{"id":"toolu_2","type":"function","function":{"name":"get_weather","arguments":"{\"location\":\"Tokyo\"}"}}]},` +
				`{"role":"tool","tool_call_id":"toolu_1","content":"18C"},{"role":"tool","tool_call_id":"toolu_2","content":"25C"},{"role":"user","content":"Thanks"}],` +
				`"max_completion_tokens":100,"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather","parameters":{"type":"object","properties":{"location":{"type":"string"}}}}}],"tool_choice":"required","parallel_tool_calls":false}`,
		},
		{
			name: "tool_choice tool",
			body: `{"model":"c","max_tokens":1,"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"f"},"messages":[{"role":"user","content":"x"}]}`,
			want: `{"model":"gpt-5","messages":[{"role":"user","content":"x"}],"max_completion_tokens":1,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":{"type":"function","function":{"name":"f"}}}`,
		},
		{
			name: "tool_choice none and auto",
			body: `{"model":"c","max_tokens":1,"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"none"},"messages":[{"role":"user","content":"x"}]}`,
			want: `{"model":"gpt-5","messages":[{"role":"user","content":"x"}],"max_completion_tokens":1,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":"none"}`,
		},
		{
			name: "thinking history with signatures is dropped, never forwarded",
			body: `{"model":"c","max_tokens":2000,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"x"},` +
				`{"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"c2lnbmF0dXJl"},{"type":"redacted_thinking","data":"ZW5j"},{"type":"text","text":"y"}]},{"role":"user","content":"z"}]}`,
			want:   `{"model":"gpt-5","messages":[{"role":"user","content":"x"},{"role":"assistant","content":"y"},{"role":"user","content":"z"}],"max_completion_tokens":2000}`,
			losses: "extended thinking (dropped); anthropic reasoning state (kept for anthropic only) (dropped)",
		},
		{
			name:   "error flag on a tool result",
			body:   `{"model":"c","max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"boom","is_error":true}]}]}`,
			want:   `{"model":"gpt-5","messages":[{"role":"assistant","tool_calls":[{"id":"t","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"t","content":"boom"}],"max_completion_tokens":1}`,
			losses: "tool_result is_error flag (dropped)",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := checkRequest(t, p, c.body, "gpt-5", c.want, c.losses)
			chatParams(t, out)
		})
	}
}

// Material losses: the candidate is skipped, and the refusal names them.
func TestAnthropicToChatRefusals(t *testing.T) {
	p, _ := For(Anthropic, OpenAI)
	cases := []struct{ name, body, want string }{
		{"server tool", `{"model":"c","max_tokens":1,"tools":[{"type":"web_search_20250305","name":"web_search"},{"name":"f","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"x"}]}`,
			"server tool web_search_20250305"},
		{"code execution", `{"model":"c","max_tokens":1,"tools":[{"type":"code_execution_20250825","name":"code_execution"}],"messages":[{"role":"user","content":"x"}]}`,
			"server tool code_execution_20250825"},
		{"pdf document", `{"model":"c","max_tokens":1,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBER"}}]}]}`,
			"document"},
		{"image in a tool result", `{"model":"c","max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"screenshot","input":{}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"see"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBOR"}}]}]}]}`,
			"image or document in a tool result"},
		{"unknown field", `{"model":"c","max_tokens":1,"mcp_servers":[{"type":"url","url":"https://x","name":"x"}],"messages":[{"role":"user","content":"x"}]}`,
			"field mcp_servers"},
		{"server tool result in history", `{"model":"c","max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"q"}}]}]}`,
			"content block server_tool_use"},
		{"too many stop sequences", `{"model":"c","max_tokens":1,"stop_sequences":["a","b","c","d","e"],"messages":[{"role":"user","content":"x"}]}`,
			"more than 4 stop sequences"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkRefusal(t, p, c.body, "gpt-5", c.want)
		})
	}
}

func TestAnthropicToChatRequestErrors(t *testing.T) {
	p, _ := For(Anthropic, OpenAI)
	for _, body := range []string{
		`not json`,
		`{"model":"c","messages":[{"role":"tool","content":"x"}]}`,
		`{"model":"c","messages":[{"role":"user","content":[{"type":"tool_use","name":"f"}]}]}`,
		`{"model":"c","messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"sometimes"}}`,
		`{"model":"c","messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":[1]}]}]}`,
	} {
		if _, _, err := request(p, []byte(body), "gpt-5"); err == nil {
			t.Errorf("%s: no error", body)
		}
	}
}

func TestAnthropicToChatError(t *testing.T) {
	p, _ := For(Anthropic, OpenAI)
	cases := []struct {
		status     int
		body       string
		wantStatus int
		wantType   string
		wantPrefix string
	}{
		{429, `{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`, 429, "rate_limit_error", "Rate limit"},
		{503, `{"error":{"message":"The engine is currently overloaded","type":"server_error","param":null,"code":null}}`, 503, "overloaded_error", "The engine"},
		{400, `{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, 400, "invalid_request_error", "prompt is too long: "},
		{401, `{"error":{"message":"Incorrect API key","type":"invalid_request_error","code":"invalid_api_key"}}`, 401, "authentication_error", "Incorrect"},
		{500, `upstream exploded`, 500, "api_error", "upstream exploded"},
		{418, `{"error":{"message":"teapot"}}`, 418, "invalid_request_error", "teapot"},
	}
	for _, c := range cases {
		status, body := p.Error(c.status, []byte(c.body))
		var got struct {
			Type  string `json:"type"`
			Error struct{ Type, Message string }
		}
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		if status != c.wantStatus || got.Type != "error" || got.Error.Type != c.wantType || !strings.HasPrefix(got.Error.Message, c.wantPrefix) {
			t.Errorf("%d %s -> %d %s", c.status, c.body, status, body)
		}
	}
}
