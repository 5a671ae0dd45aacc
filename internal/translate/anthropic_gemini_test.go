package translate

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"google.golang.org/genai"
)

// geminiParams unmarshals a translated body into the genai SDK's types
// (the SDK has no request type: its parts) and checks that the contents
// survive them unchanged.
func geminiParams(t *testing.T, body []byte) (contents []*genai.Content, tools []*genai.Tool, cfg *genai.GenerationConfig, tc *genai.ToolConfig) {
	t.Helper()
	var in struct {
		Contents          json.RawMessage `json:"contents"`
		SystemInstruction json.RawMessage `json:"systemInstruction"`
		Tools             json.RawMessage `json:"tools"`
		ToolConfig        json.RawMessage `json:"toolConfig"`
		GenerationConfig  json.RawMessage `json:"generationConfig"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		t.Fatalf("body has fields a Gemini request has not: %v", err)
	}
	if err := json.Unmarshal(in.Contents, &contents); err != nil {
		t.Fatalf("contents do not unmarshal into []*genai.Content: %v\n%s", err, in.Contents)
	}
	back, _ := json.Marshal(contents)
	if !jsonEqual(t, in.Contents, back) {
		t.Errorf("contents change through the SDK's types:\nours:   %s\ntheirs: %s", in.Contents, back)
	}
	for raw, dst := range map[*json.RawMessage]any{&in.SystemInstruction: &genai.Content{}, &in.Tools: &tools, &in.ToolConfig: &tc, &in.GenerationConfig: &cfg} {
		if len(*raw) > 0 {
			if err := json.Unmarshal(*raw, dst); err != nil {
				t.Fatalf("%s does not unmarshal into the genai type: %v", *raw, err)
			}
		}
	}
	return contents, tools, cfg, tc
}

func TestAnthropicToGeminiRequest(t *testing.T) {
	p, _ := For(Anthropic, Gemini)
	cases := []struct{ name, body, want, losses string }{
		{
			name: "system, text, sampling, images, pdf",
			body: `{"model":"c","max_tokens":100,"system":"Be brief.","temperature":0.3,"top_p":0.9,"top_k":40,"messages":[{"role":"user","content":[{"type":"text","text":"what?"},` +
				`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0="}}]}]}`,
			want: `{"contents":[{"role":"user","parts":[{"text":"what?"},{"inlineData":{"mimeType":"image/png","data":"iVBORw0KGgo="}},{"inlineData":{"mimeType":"application/pdf","data":"JVBERi0="}}]}],` +
				`"systemInstruction":{"parts":[{"text":"Be brief."}]},"generationConfig":{"maxOutputTokens":100,"temperature":0.3,"topP":0.9,"topK":40}}`,
		},
		{
			name: "tool loop: schema cleanup, parallel calls, results by name, error flag, tool_choice tool",
			body: `{"model":"c","max_tokens":50,"tool_choice":{"type":"tool","name":"get_weather"},"tools":[{"name":"get_weather","description":"W","input_schema":{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","additionalProperties":false,` +
				`"properties":{"location":{"type":"string","format":"uri"},"unit":{"type":["string","null"],"enum":["c","f"]},"when":{"type":"string","format":"date-time"},"kind":{"const":"city"}},"required":["location"]}},` +
				`{"name":"now","input_schema":{"type":"object","properties":{}}}],"messages":[{"role":"user","content":"Paris and Tokyo?"},` +
				`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"location":"Paris"}},{"type":"tool_use","id":"toolu_2","name":"get_weather","input":{"location":"Tokyo"}}]},` +
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"18C"},{"type":"tool_result","tool_use_id":"toolu_2","content":"no station","is_error":true}]}]}`,
			want: `{"contents":[{"role":"user","parts":[{"text":"Paris and Tokyo?"}]},` +
				`{"role":"model","parts":[{"functionCall":{"name":"get_weather","args":{"location":"Paris"}},"thoughtSignature":"skip/thought/signature/validator"},{"functionCall":{"name":"get_weather","args":{"location":"Tokyo"}},"thoughtSignature":"skip/thought/signature/validator"}]},` +
				`{"role":"user","parts":[{"functionResponse":{"name":"get_weather","response":{"result":"18C"}}},{"functionResponse":{"name":"get_weather","response":{"error":"no station"}}}]}],` +
				`"tools":[{"functionDeclarations":[{"name":"get_weather","description":"W","parameters":{"type":"object","properties":{"location":{"type":"string"},"unit":{"type":"string","nullable":true,"enum":["c","f"]},"when":{"type":"string","format":"date-time"},"kind":{"enum":["city"]}},"required":["location"]}},{"name":"now"}]}],` +
				`"toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["get_weather"]}},"generationConfig":{"maxOutputTokens":50}}`,
			losses: "Gemini thought signatures of earlier calls (Google's documented validator skip sent) (dropped); tool schema keyword $schema (dropped); tool schema keyword additionalProperties (dropped); tool schema keyword format uri (dropped)",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := checkRequest(t, p, c.body, "gemini-2.5-pro", c.want, c.losses)
			geminiParams(t, out)
		})
	}
}

func TestAnthropicToGeminiRefusals(t *testing.T) {
	p, _ := For(Anthropic, Gemini)
	cases := []struct{ name, body, want string }{
		{"server tool", `{"model":"c","max_tokens":1,"tools":[{"type":"web_search_20250305","name":"web_search"}],"messages":[{"role":"user","content":"x"}]}`, "server tool web_search_20250305"},
		{"image by url", `{"model":"c","max_tokens":1,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://x/a.png"}}]}]}`, "image or document by URL"},
		{"image in a tool result", `{"model":"c","max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"shot","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]}]}]}`, "image or document in a tool result"},
		{"result without its call", `{"model":"c","max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"x"}]}]}`, "tool_result for a call not in the conversation"},
		{"one call at most", `{"model":"c","max_tokens":1,"tool_choice":{"type":"auto","disable_parallel_tool_use":true},"tools":[{"name":"f","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"x"}]}`, "disable_parallel_tool_use"},
		{"schema $ref", `{"model":"c","max_tokens":1,"tools":[{"name":"f","input_schema":{"type":"object","properties":{"a":{"$ref":"#/$defs/A"}},"$defs":{"A":{"type":"string"}}}}],"messages":[{"role":"user","content":"x"}]}`, "tool schema keyword $ref"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkRefusal(t, p, c.body, "g", c.want)
		})
	}
}

func TestAnthropicToGeminiError(t *testing.T) {
	p, _ := For(Anthropic, Gemini)
	cases := []struct {
		status            int
		body, wantType    string
		wantStatus        int
		wantMessagePrefix string
	}{
		{429, `{"error":{"code":429,"message":"Resource has been exhausted","status":"RESOURCE_EXHAUSTED"}}`, "rate_limit_error", 429, "Resource"},
		{503, `{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}`, "overloaded_error", 503, "The model"},
		{400, `{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}`, "invalid_request_error", 400, "prompt is too long: "},
		{403, `{"error":{"code":403,"message":"denied","status":"PERMISSION_DENIED"}}`, "permission_error", 403, "denied"},
	}
	for _, c := range cases {
		status, body := p.Error(c.status, []byte(c.body))
		var got struct {
			Error struct{ Type, Message string }
		}
		_ = json.Unmarshal(body, &got)
		if status != c.wantStatus || got.Error.Type != c.wantType || !strings.HasPrefix(got.Error.Message, c.wantMessagePrefix) {
			t.Errorf("%s -> %d %s", c.body, status, body)
		}
	}
}

func TestAnthropicFromGeminiStream(t *testing.T) {
	p, _ := For(Anthropic, Gemini)
	cases := []struct {
		name, wantErr string
		check         func(t *testing.T, m anthropic.Message)
	}{
		{name: "text", check: func(t *testing.T, m anthropic.Message) {
			if m.Content[0].Text != "Hello, \"world\" é\n" || m.StopReason != "end_turn" || m.Usage.InputTokens != 7 || m.Usage.CacheReadInputTokens != 2 || m.Usage.OutputTokens != 31 {
				t.Errorf("got %s", m.RawJSON())
			}
		}},
		{name: "parallel_tools", check: func(t *testing.T, m anthropic.Message) {
			if len(m.Content) != 3 || m.Content[1].ID == m.Content[2].ID || m.Content[2].Name != "get_weather" || m.StopReason != "tool_use" ||
				!jsonEqual(t, m.Content[2].Input, []byte(`{"location":"Tokyo é"}`)) || strings.Contains(m.RawJSON(), "CiQB") {
				t.Errorf("got %s", m.RawJSON())
			}
		}},
		{name: "thinking_tools", check: func(t *testing.T, m anthropic.Message) {
			if len(m.Content) != 1 || m.Content[0].Type != "tool_use" || string(m.Content[0].Input) != "{}" || strings.Contains(m.RawJSON(), "Planning") {
				t.Errorf("Gemini's thinking reached an Anthropic client, or the call is wrong: %s", m.RawJSON())
			}
		}},
		{name: "max_tokens", check: func(t *testing.T, m anthropic.Message) {
			if m.StopReason != "max_tokens" {
				t.Errorf("stop_reason %s", m.StopReason)
			}
		}},
		{name: "blocked_prompt", check: func(t *testing.T, m anthropic.Message) {
			// The prompt was blocked (no candidates): a refusal, as the
			// non-stream twin says; the stream ended in an error event.
			if m.StopReason != "refusal" || len(m.Content) != 0 || m.Usage.InputTokens != 7 {
				t.Errorf("got %s", m.RawJSON())
			}
		}},
		{name: "malformed_call", wantErr: "MALFORMED_FUNCTION_CALL"},
		{name: "truncated", wantErr: "without a finishReason"},
		{name: "error_chunk", wantErr: "overloaded"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if msg, ok := anthropicStreamCase(t, p, "gemini", c.name, c.wantErr); ok {
				c.check(t, msg)
			}
		})
	}
}

func TestAnthropicFromGeminiStreamRechunked(t *testing.T) {
	p, _ := For(Anthropic, Gemini)
	checkRechunked(t, p, "gemini")
}
