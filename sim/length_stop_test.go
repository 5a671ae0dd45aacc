package sim

import (
	"io"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// Config.LengthStop: every text answer ends with its dialect's length
// stop, streamed and not, with the same text; a scripted tool call still
// ends as a call.
func TestLengthStop(t *testing.T) {
	_, srv := serve(t, Config{LengthStop: true, Text: "one two three", Tokens: 3,
		ToolCalls: []ToolCall{{Name: "get_weather"}}})
	tools := map[string]string{
		"anthropic": `,"tools":[{"name":"get_weather","input_schema":{"type":"object"}}]`,
		"chat":      `,"tools":[{"type":"function","function":{"name":"get_weather"}}]`,
		"responses": `,"tools":[{"type":"function","name":"get_weather"}]`,
		"gemini":    `,"tools":[{"functionDeclarations":[{"name":"get_weather"}]}]`,
	}
	cases := []struct {
		dialect, path, streamPath, body string
		stop, toolStop                  []string // in the body, streamed or not
	}{
		{"anthropic", "/v1/messages", "/v1/messages", `{"model":"m","max_tokens":3,"messages":[{"role":"user","content":"hi"}]%s%s}`,
			[]string{`"stop_reason":"max_tokens"`}, []string{`"stop_reason":"tool_use"`}},
		{"chat", "/v1/chat/completions", "/v1/chat/completions", `{"model":"m","max_tokens":3,"messages":[{"role":"user","content":"hi"}]%s%s}`,
			[]string{`"finish_reason":"length"`}, []string{`"finish_reason":"tool_calls"`}},
		{"responses", "/v1/responses", "/v1/responses", `{"model":"m","max_output_tokens":3,"input":"hi"%s%s}`,
			[]string{`"status":"incomplete"`, `"incomplete_details":{"reason":"max_output_tokens"}`, `one two three`}, []string{`"status":"completed"`, `"function_call"`}},
		{"gemini", "/v1beta/models/m:generateContent", "/v1beta/models/m:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]%s%s}`,
			[]string{`"finishReason":"MAX_TOKENS"`}, []string{`"finishReason":"STOP"`, `"functionCall"`}},
	}
	for _, c := range cases {
		for _, stream := range []bool{false, true} {
			for _, tool := range []bool{false, true} {
				path, streamField, toolField := c.path, "", ""
				if stream {
					path = c.streamPath
					if c.dialect != "gemini" {
						streamField = `,"stream":true`
					}
				}
				want := c.stop
				if tool {
					toolField, want = tools[c.dialect], c.toolStop
				}
				body := strings.Replace(strings.Replace(c.body, "%s", streamField, 1), "%s", toolField, 1)
				resp := mustPost(t, srv, path, body)
				b, _ := io.ReadAll(resp.Body)
				for _, w := range want {
					if !strings.Contains(string(b), w) {
						t.Errorf("%s stream=%v tool=%v: no %s in\n%s", c.dialect, stream, tool, w, b)
					}
				}
				if stream && c.dialect == "responses" && !tool && !strings.Contains(string(b), "event: response.incomplete") {
					t.Errorf("responses stream: no response.incomplete event:\n%s", b)
				}
			}
		}
	}
}

func TestLengthStopCaddyfile(t *testing.T) {
	var h Handler
	if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("llm_sim {\n\tlength_stop\n}")); err != nil || !h.LengthStop {
		t.Fatalf("err %v, length_stop %v", err, h.LengthStop)
	}
}
