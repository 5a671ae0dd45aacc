package translate

import (
	"encoding/json"
	"strings"
	"testing"
)

// The request shapes of the agents this serves, hand-made after what
// Claude Code and Codex CLI send (not recorded): every pair carries them
// with advisory losses only, so a translating candidate is never skipped
// for an ordinary agent turn.
const claudeCodeRequest = `{"model":"claude-sonnet-4-5-20250929","max_tokens":32000,"stream":true,"temperature":1,` +
	`"metadata":{"user_id":"user_abc_account__session_123"},` +
	`"system":[{"type":"text","text":"You are Claude Code, Anthropic's official CLI for Claude."},{"type":"text","text":"Environment: /work","cache_control":{"type":"ephemeral"}}],` +
	`"tools":[{"name":"Read","description":"Reads a file","input_schema":{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","additionalProperties":false,` +
	`"properties":{"file_path":{"type":"string","description":"The absolute path"},"offset":{"type":"number"},"limit":{"type":"number"}},"required":["file_path"]}},` +
	`{"name":"Bash","description":"Runs a command","input_schema":{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","additionalProperties":false,` +
	`"properties":{"command":{"type":"string"},"timeout":{"type":"number"}},"required":["command"]},"cache_control":{"type":"ephemeral"}}],` +
	`"messages":[{"role":"user","content":[{"type":"text","text":"<system-reminder>context</system-reminder>"},{"type":"text","text":"read /tmp/a.txt","cache_control":{"type":"ephemeral"}}]},` +
	`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_01A","name":"Read","input":{"file_path":"/tmp/a.txt"}}]},` +
	`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01A","content":"     1\thello\n"}]}]}`

const codexRequest = `{"model":"gpt-5-codex","instructions":"You are Codex, based on GPT-5.","store":false,"stream":true,` +
	`"reasoning":{"effort":"medium","summary":"auto"},"include":["reasoning.encrypted_content"],"prompt_cache_key":"0199-session",` +
	`"tool_choice":"auto","parallel_tool_calls":false,"text":{"verbosity":"medium"},"input":[` +
	`{"type":"message","role":"developer","content":[{"type":"input_text","text":"<permissions instructions>"}]},` +
	`{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>"}]},` +
	`{"type":"message","role":"user","content":[{"type":"input_text","text":"list files"}]},` +
	`{"type":"reasoning","summary":[],"encrypted_content":"gAAAAB"},` +
	`{"type":"function_call","name":"shell","arguments":"{\"command\":[\"ls\"],\"workdir\":\"/w\"}","call_id":"call_A"},` +
	`{"type":"function_call_output","call_id":"call_A","output":"a.txt\n"}],` +
	`"tools":[{"type":"function","name":"shell","description":"Runs a shell command","strict":false,"parameters":{"type":"object","properties":{"command":{"type":"array","items":{"type":"string"}},"workdir":{"type":"string"}},"required":["command"],"additionalProperties":false}},` +
	`{"type":"custom","name":"apply_patch","description":"Edit files","format":{"type":"grammar","syntax":"lark","definition":"start: begin_patch hunk+ end_patch"}},` +
	`{"type":"function","name":"update_plan","description":"Plan","strict":false,"parameters":{"type":"object","properties":{"plan":{"type":"array","items":{"type":"object","properties":{"step":{"type":"string"},"status":{"type":"string"}},"required":["step","status"],"additionalProperties":false}}},"required":["plan"],"additionalProperties":false}}]}`

func TestAgentRequestsCarry(t *testing.T) {
	cases := []struct {
		client, target, body string
	}{
		{Anthropic, OpenAI, claudeCodeRequest},
		{Anthropic, Responses, claudeCodeRequest},
		{Anthropic, Gemini, claudeCodeRequest},
		{Responses, Anthropic, codexRequest},
	}
	for _, c := range cases {
		t.Run(c.client+"->"+c.target, func(t *testing.T) {
			p, _ := For(c.client, c.target)
			tr, err := p.Translate([]byte(c.body), "target-model")
			if err != nil {
				t.Fatal(err)
			}
			if Material(tr.Losses) {
				t.Fatalf("an ordinary agent turn is refused: %s", Describe(tr.Losses, true))
			}
			t.Logf("dropped with notice: %s", Describe(tr.Losses, false))
			switch c.target {
			case OpenAI:
				chatParams(t, tr.Body)
			case Responses:
				responsesParams(t, tr.Body)
			case Gemini:
				geminiParams(t, tr.Body)
			case Anthropic:
				messageParams(t, tr.Body)
			}
		})
	}
}

// A tool_result of several text parts (Claude Code relays an MCP tool's
// content items as such a list) keeps its parts apart on every target that
// holds a tool result as one string: one per line, never glued together.
func TestToolResultPartsKeepApart(t *testing.T) {
	body := strings.Replace(claudeCodeRequest, `"content":"     1\thello\n"`,
		`"content":[{"type":"text","text":"line one"},{"type":"text","text":"line two"}]`, 1)
	want := "line one\nline two"
	for _, c := range []struct {
		target string
		result func(t *testing.T, body []byte) string
	}{
		{OpenAI, func(t *testing.T, body []byte) string {
			var r struct {
				Messages []struct{ Role, Content string } `json:"messages"`
			}
			_ = json.Unmarshal(body, &r) // the user turns' content is an array: only the tool message's string matters
			for _, m := range r.Messages {
				if m.Role == "tool" {
					return m.Content
				}
			}
			return ""
		}},
		{Responses, func(t *testing.T, body []byte) string {
			var r struct {
				Input []struct {
					Type   string          `json:"type"`
					Output json.RawMessage `json:"output"`
				} `json:"input"`
			}
			if err := json.Unmarshal(body, &r); err != nil {
				t.Fatal(err)
			}
			for _, it := range r.Input {
				if it.Type == "function_call_output" {
					var s string
					_ = json.Unmarshal(it.Output, &s)
					return s
				}
			}
			return ""
		}},
		{Gemini, func(t *testing.T, body []byte) string {
			var r struct {
				Contents []struct {
					Parts []struct {
						FunctionResponse *struct {
							Response struct{ Result string } `json:"response"`
						} `json:"functionResponse"`
					} `json:"parts"`
				} `json:"contents"`
			}
			if err := json.Unmarshal(body, &r); err != nil {
				t.Fatal(err)
			}
			for _, c := range r.Contents {
				for _, p := range c.Parts {
					if p.FunctionResponse != nil {
						return p.FunctionResponse.Response.Result
					}
				}
			}
			return ""
		}},
	} {
		t.Run(c.target, func(t *testing.T) {
			p, _ := For(Anthropic, c.target)
			tr, err := p.Translate([]byte(body), "target-model")
			if err != nil {
				t.Fatal(err)
			}
			if Material(tr.Losses) {
				t.Fatalf("refused: %s", Describe(tr.Losses, true))
			}
			if got := c.result(t, tr.Body); got != want {
				t.Errorf("tool result %q, want %q\n%s", got, want, tr.Body)
			}
		})
	}
}
