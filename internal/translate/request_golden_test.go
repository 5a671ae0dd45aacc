package translate

import (
	"bytes"
	"encoding/json"
	"testing"
)

// A conversation with parallel calls to one function, signed thinking
// before them, and an image in a tool result, hand-made in Anthropic's
// documented request shape: each target's body and losses are goldens.
const toolImageConversation = `{"model":"claude-sonnet-4-5","max_tokens":4096,"stream":true,` +
	`"thinking":{"type":"enabled","budget_tokens":2048},"tools":[{"name":"screenshot","description":"Capture a window","input_schema":{"type":"object","properties":{"window":{"type":"string"}},"required":["window"]}}],` +
	`"messages":[{"role":"user","content":"Compare the two windows."},` +
	`{"role":"assistant","content":[{"type":"thinking","thinking":"Capture both.","signature":"EqQBCgIYAhIM"},` +
	`{"type":"tool_use","id":"toolu_01A","name":"screenshot","input":{"window":"left"}},{"type":"tool_use","id":"toolu_01B","name":"screenshot","input":{"window":"right"}}]},` +
	`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01A","content":[{"type":"text","text":"left:"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]},` +
	`{"type":"tool_result","tool_use_id":"toolu_01B","content":"right window closed","is_error":true}]}]}`

func TestRequestGoldens(t *testing.T) {
	for _, target := range []string{OpenAI, Responses, Gemini} {
		p, _ := For(Anthropic, target)
		tr, err := p.Translate([]byte(toolImageConversation), "target-model")
		if err != nil {
			t.Fatal(err)
		}
		var pretty bytes.Buffer
		_ = json.Indent(&pretty, tr.Body, "", "  ")
		out := "// losses: " + lossNames(tr.Losses) + "\n" + pretty.String() + "\n"
		golden(t, "request_anthropic_to_"+target+".txt", []byte(out))
		// Only the Responses target holds an image in a tool result.
		if Material(tr.Losses) != (target != Responses) {
			t.Errorf("%s: losses %s", target, lossNames(tr.Losses))
		}
		if bytes.Contains(tr.Body, []byte("EqQBCgIYAhIM")) {
			t.Errorf("%s: an Anthropic signature reached another vendor", target)
		}
	}
}
