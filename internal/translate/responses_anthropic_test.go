package translate

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
)

// messageParams unmarshals a translated body into anthropic-sdk-go's
// request type and checks that its messages and system survive the SDK's
// types unchanged.
func messageParams(t *testing.T, body []byte) anthropic.MessageNewParams {
	t.Helper()
	var p anthropic.MessageNewParams
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("translated body does not unmarshal into anthropic.MessageNewParams: %v\n%s", err, body)
	}
	var ours struct {
		Messages json.RawMessage `json:"messages"`
		System   json.RawMessage `json:"system"`
	}
	_ = json.Unmarshal(body, &ours)
	theirs, _ := json.Marshal(p.Messages)
	if !jsonEqual(t, ours.Messages, theirs) {
		t.Errorf("messages change through the SDK's types:\nours:   %s\ntheirs: %s", ours.Messages, theirs)
	}
	if len(ours.System) > 0 {
		sys, _ := json.Marshal(p.System)
		if !jsonEqual(t, ours.System, sys) {
			t.Errorf("system changes through the SDK's types:\nours:   %s\ntheirs: %s", ours.System, sys)
		}
	}
	return p
}

func TestResponsesToAnthropicRequest(t *testing.T) {
	p, _ := For(Responses, Anthropic)
	cases := []struct {
		name, body, want, losses string
	}{
		{
			name:   "string input, instructions, sampling",
			body:   `{"model":"gpt-5","instructions":"Be brief.","input":"Hi","max_output_tokens":300,"temperature":0.5,"top_p":0.8,"stream":true,"store":false}`,
			want:   `{"model":"claude-sonnet-4-5","max_tokens":300,"system":[{"type":"text","text":"Be brief."}],"messages":[{"role":"user","content":[{"type":"text","text":"Hi"}]}],"temperature":0.5,"top_p":0.8,"stream":true}`,
			losses: "",
		},
		{
			name: "Codex-like tool loop: developer message, function calls and outputs, parallel off",
			body: `{"model":"gpt-5","store":false,"max_output_tokens":1000,"parallel_tool_calls":false,"tool_choice":"auto","input":[` +
				`{"type":"message","role":"developer","content":[{"type":"input_text","text":"You are Codex."}]},` +
				`{"type":"message","role":"user","content":[{"type":"input_text","text":"list files"},{"type":"input_image","image_url":"data:image/png;base64,iVBOR","detail":"auto"}]},` +
				`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Running ls."}]},` +
				`{"type":"function_call","call_id":"call_1","name":"shell","arguments":"{\"command\":[\"ls\"]}"},` +
				`{"type":"function_call","call_id":"call_2","name":"shell","arguments":"{\"command\":[\"pwd\"]}"},` +
				`{"type":"function_call_output","call_id":"call_1","output":"a.txt"},` +
				`{"type":"function_call_output","call_id":"call_2","output":[{"type":"input_text","text":"/w"}]}],` +
				`"tools":[{"type":"function","name":"shell","description":"Run","parameters":{"type":"object","properties":{"command":{"type":"array","items":{"type":"string"}}},"required":["command"]},"strict":false}]}`,
			want: `{"model":"claude-sonnet-4-5","max_tokens":1000,"system":[{"type":"text","text":"You are Codex."}],"messages":[` +
				`{"role":"user","content":[{"type":"text","text":"list files"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBOR"}}]},` +
				`{"role":"assistant","content":[{"type":"text","text":"Running ls."},{"type":"tool_use","id":"call_1","name":"shell","input":{"command":["ls"]}},{"type":"tool_use","id":"call_2","name":"shell","input":{"command":["pwd"]}}]},` +
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1","content":[{"type":"text","text":"a.txt"}]},{"type":"tool_result","tool_use_id":"call_2","content":[{"type":"text","text":"/w"}]}]}],` +
				`"tools":[{"name":"shell","description":"Run","input_schema":{"type":"object","properties":{"command":{"type":"array","items":{"type":"string"}}},"required":["command"]}}],` +
				`"tool_choice":{"type":"auto","disable_parallel_tool_use":true}}`,
		},
		{
			name:   "no max_output_tokens, stored, reasoning, include, encrypted reasoning in history",
			body:   `{"model":"gpt-5","reasoning":{"effort":"high"},"include":["reasoning.encrypted_content"],"input":[{"role":"user","content":"x"},{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"gAAAA"},{"role":"assistant","content":"y"},{"role":"user","content":"z"}],"tool_choice":"required","tools":[{"type":"function","name":"f","parameters":{"type":"object"}}]}`,
			want:   `{"model":"claude-sonnet-4-5","max_tokens":32000,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]},{"role":"assistant","content":[{"type":"text","text":"y"}]},{"role":"user","content":[{"type":"text","text":"z"}]}],"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"any"}}`,
			losses: "reasoning (dropped); store (the response is not kept for later retrieval) (dropped); include reasoning.encrypted_content (dropped); unlimited output (max_tokens 32000) (dropped); responses reasoning state (kept for responses only) (dropped)",
		},
		{
			name: "tool_choice function, none",
			body: `{"model":"gpt-5","store":false,"max_output_tokens":5,"input":"x","tool_choice":{"type":"function","name":"f"},"tools":[{"type":"function","name":"f","parameters":{"type":"object"}}]}`,
			want: `{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"f"}}`,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := checkRequest(t, p, c.body, "claude-sonnet-4-5", c.want, c.losses)
			messageParams(t, out)
		})
	}
}

func TestResponsesToAnthropicRefusals(t *testing.T) {
	p, _ := For(Responses, Anthropic)
	cases := []struct{ name, body, want string }{
		{"previous_response_id", `{"model":"m","store":false,"input":"x","previous_response_id":"resp_1"}`, "previous_response_id"},
		{"web_search", `{"model":"m","store":false,"input":"x","tools":[{"type":"web_search"}]}`, "hosted tool web_search"},
		{"file_search and code_interpreter", `{"model":"m","store":false,"input":"x","tools":[{"type":"file_search","vector_store_ids":["v"]},{"type":"code_interpreter","container":{"type":"auto"}}]}`,
			"hosted tool file_search, hosted tool code_interpreter"},
		{"item_reference", `{"model":"m","store":false,"input":[{"type":"item_reference","id":"msg_1"}]}`, "item_reference (items stored at OpenAI)"},
		{"structured output", `{"model":"m","store":false,"input":"x","text":{"format":{"type":"json_schema","name":"n","schema":{}}}}`, "text.format json_schema"},
		{"custom tool of an unknown format", `{"model":"m","store":false,"input":"x","tools":[{"type":"custom","name":"apply_patch","format":{"type":"regex"}}]}`, "custom tool format regex"},
		{"local shell", `{"model":"m","store":false,"input":"x","tools":[{"type":"local_shell"}]}`, "hosted tool local_shell"},
		{"hosted tool_choice", `{"model":"m","store":false,"input":"x","tool_choice":{"type":"web_search_preview"}}`, "tool_choice web_search_preview"},
		{"input file", `{"model":"m","store":false,"input":[{"role":"user","content":[{"type":"input_file","file_id":"f"}]}]}`, "content part input_file"},
		{"unknown field", `{"model":"m","store":false,"input":"x","conversation":"conv_1"}`, "field conversation"},
		// Content the target cannot produce, asked for: not an empty list in a 200.
		{"logprobs included", `{"model":"m","store":false,"input":"x","include":["reasoning.encrypted_content","message.output_text.logprobs"]}`, "include message.output_text.logprobs"},
		{"unknown include", `{"model":"m","store":false,"input":"x","include":["message.output_text.sources"]}`, "include message.output_text.sources"},
		// Anthropic refuses empty text, so the encoder leaves the turn out:
		// the conversation it would send ends in the old answer, which
		// Anthropic continues.
		{"empty last user message", `{"model":"m","store":false,"input":[{"role":"user","content":"Say it."},{"role":"assistant","content":"The quick"},{"role":"user","content":""}]}`, emptyLastUserLoss},
		{"empty last user parts", `{"model":"m","store":false,"input":[{"role":"user","content":"Say it."},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"The quick"}]},{"type":"message","role":"user","content":[{"type":"input_text","text":""}]}]}`, emptyLastUserLoss},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkRefusal(t, p, c.body, "claude", c.want)
		})
	}
}

func TestResponsesToAnthropicError(t *testing.T) {
	p, _ := For(Responses, Anthropic)
	cases := []struct {
		status     int
		body       string
		wantStatus int
		wantCode   string
	}{
		{529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, 503, "server_is_overloaded"},
		{429, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`, 429, "rate_limit_exceeded"},
		{400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}`, 400, "context_length_exceeded"},
		{401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`, 401, "invalid_api_key"},
		{502, `<html>bad gateway</html>`, 502, ""},
	}
	for _, c := range cases {
		status, body := p.Error(c.status, []byte(c.body))
		var got struct {
			Error struct {
				Message string
				Type    string
				Code    *string
			}
		}
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		code := ""
		if got.Error.Code != nil {
			code = *got.Error.Code
		}
		if status != c.wantStatus || code != c.wantCode || got.Error.Message == "" || got.Error.Type == "" {
			t.Errorf("%d %s -> %d %s", c.status, c.body, status, body)
		}
	}
}

func TestResponsesToAnthropicRequestErrors(t *testing.T) {
	p, _ := For(Responses, Anthropic)
	for _, body := range []string{
		`[]`,
		`{"model":"m","input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{\"a\":"}]}`,
		`{"model":"m","input":[{"role":"tool","content":"x"}]}`,
		`{"model":"m","input":"x","tool_choice":"sometimes"}`,
	} {
		if _, _, err := request(p, []byte(body), "claude"); err == nil {
			t.Errorf("%s: no error", body)
		} else if strings.Contains(err.Error(), "panic") {
			t.Error(err)
		}
	}
}
