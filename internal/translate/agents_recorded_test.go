package translate

import (
	"strings"
	"testing"
)

// What the pinned real agents send (Claude Code 2.1.332, Codex 0.171,
// recorded from their requests to a loopback server, trimmed) and the
// first translations refused: a "system" message in Claude Code's
// conversation, its output_config effort, Codex's client_metadata. Each
// is carried or dropped with notice; what changes the request stays
// material.

const claudeCodeSystemMessage = `{"model":"claude-opus-5-5","max_tokens":128000,"stream":true,` +
	`"thinking":{"type":"adaptive"},"context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"}]},` +
	`"output_config":{"effort":"medium"},"metadata":{"user_id":"{\"session_id\":\"s\"}"},` +
	`"system":[{"type":"text","text":"You are a Claude agent."}],` +
	`"messages":[{"role":"user","content":[{"type":"text","text":"What does notes.txt say?"}]},` +
	`{"role":"system","content":[{"type":"text","text":"# Environment\nPrimary working directory: /w","cache_control":{"type":"ephemeral"}}]}],` +
	`"tools":[{"name":"Read","description":"Reads a file","input_schema":{"type":"object","properties":{"file_path":{"type":"string"}},"required":["file_path"]}}]}`

func TestAnthropicSystemMessageJoinsSystemPrompt(t *testing.T) {
	for _, target := range []string{OpenAI, Responses, Gemini} {
		t.Run(target, func(t *testing.T) {
			p, _ := For(Anthropic, target)
			tr, err := p.Translate([]byte(claudeCodeSystemMessage), "m")
			if err != nil {
				t.Fatal(err)
			}
			if Material(tr.Losses) {
				t.Fatalf("refused: %s", Describe(tr.Losses, true))
			}
			notice := Describe(tr.Losses, false)
			for _, want := range []string{"system message after the conversation began", "output_config.effort"} {
				if !strings.Contains(notice, want) {
					t.Errorf("notice %q does not name %q", notice, want)
				}
			}
			switch target {
			case OpenAI:
				c := chatParams(t, tr.Body)
				if len(c.Messages) != 2 || c.Messages[0].OfSystem == nil || c.Messages[1].OfUser == nil {
					t.Fatalf("want the system prompt then the user turn: %s", tr.Body)
				}
			case Responses:
				responsesParams(t, tr.Body)
			case Gemini:
				geminiParams(t, tr.Body)
			}
			// The environment is in the system prompt, after the first part,
			// and the user turn is the only conversation turn.
			if i, j := strings.Index(string(tr.Body), "You are a Claude agent."), strings.Index(string(tr.Body), "Primary working directory: /w"); i < 0 || j < i {
				t.Fatalf("the system message is not in the system prompt after the top-level system: %s", tr.Body)
			}
		})
	}
}

func TestAnthropicOutputConfigFormatRefused(t *testing.T) {
	body := strings.Replace(claudeCodeSystemMessage, `"output_config":{"effort":"medium"}`,
		`"output_config":{"effort":"low","format":{"type":"json_schema","schema":{"type":"object"}}}`, 1)
	p, _ := For(Anthropic, OpenAI)
	tr, err := p.Translate([]byte(body), "m")
	if err != nil {
		t.Fatal(err)
	}
	if !Material(tr.Losses) || !strings.Contains(Describe(tr.Losses, true), "output_config.format") {
		t.Fatalf("a structured output format must be refused, losses %s", lossNames(tr.Losses))
	}
}

// A first system message (nothing before it) is the system prompt as is:
// no notice.
func TestAnthropicLeadingSystemMessage(t *testing.T) {
	body := `{"model":"c","max_tokens":10,"messages":[{"role":"system","content":"Be terse."},{"role":"user","content":"hi"}]}`
	p, _ := For(Anthropic, OpenAI)
	tr, err := p.Translate([]byte(body), "m")
	if err != nil || len(tr.Losses) != 0 {
		t.Fatalf("err %v losses %s", err, lossNames(tr.Losses))
	}
	c := chatParams(t, tr.Body)
	if len(c.Messages) != 2 || c.Messages[0].OfSystem == nil {
		t.Fatalf("%s", tr.Body)
	}
}

func TestResponsesClientMetadataAdvisory(t *testing.T) {
	body := `{"model":"gpt-test","stream":true,"store":false,"input":"hi","client_metadata":{"x-codex-installation-id":"i","turn_id":"t"}}`
	p, _ := For(Responses, Anthropic)
	tr, err := p.Translate([]byte(body), "claude")
	if err != nil || Material(tr.Losses) || !strings.Contains(Describe(tr.Losses, false), "client_metadata") {
		t.Fatalf("err %v losses %s", err, lossNames(tr.Losses))
	}
	if strings.Contains(string(tr.Body), "installation") {
		t.Fatalf("client_metadata reached the target: %s", tr.Body)
	}
	messageParams(t, tr.Body)
}
