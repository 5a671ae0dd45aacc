package translate

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
)

// Failback: turn 1 served by translation with thinking on, turn 2 by the
// recovered Anthropic provider. The client replays turn 1's answer as it
// got it; Anthropic then needs no signature the translation never had.
func TestAnthropicFailbackAfterTranslatedToolCall(t *testing.T) {
	p, _ := For(Anthropic, OpenAI)
	// Turn 1, served by a Chat provider: the client's message as the SDK accumulated it.
	out, err := runStream(p, readFile(t, filepath.Join("testdata", "chat", "text_then_tool.sse")), nil)
	if err != nil {
		t.Fatal(err)
	}
	msg, _, _ := accumulateAnthropic(t, out)
	if strings.Contains(msg.RawJSON(), `"thinking"`) {
		t.Fatalf("a translated answer carries thinking: %s", msg.RawJSON())
	}
	turn1, _ := json.Marshal(msg.ToParam())
	turn2 := `{"model":"claude-sonnet-4-5","max_tokens":2048,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[` +
		`{"role":"user","content":"read /tmp/a.txt"},` + string(turn1) + `,` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_R1","content":"hello"}]}]}`
	body, losses, err := AnthropicFailback([]byte(turn2))
	if err != nil {
		t.Fatal(err)
	}
	if len(losses) != 1 || losses[0].Material || strings.Contains(string(body), `"thinking":{`) {
		t.Fatalf("losses %v, body %s", losses, body)
	}
	var p2 anthropic.MessageNewParams
	if err := json.Unmarshal(body, &p2); err != nil {
		t.Fatalf("the failback body is not an Anthropic request: %v", err)
	}
	if len(p2.Messages) != 3 || p2.Messages[1].Content[1].OfToolUse == nil || p2.Messages[1].Content[1].OfToolUse.ID != "call_R1" {
		t.Errorf("the history changed: %s", body)
	}
	var want, got map[string]any
	_ = json.Unmarshal([]byte(turn2), &want)
	_ = json.Unmarshal(body, &got)
	delete(want, "thinking")
	if !jsonEqual(t, mustJSON(want), mustJSON(got)) {
		t.Errorf("more than thinking changed:\n got %s", body)
	}
}

func TestAnthropicFailbackLeavesOthersAlone(t *testing.T) {
	for _, body := range []string{
		// No thinking.
		`{"model":"c","max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"x"}]}]}`,
		// Anthropic's own signed cycle.
		`{"thinking":{"type":"enabled","budget_tokens":1024},"model":"c","max_tokens":2048,"messages":[{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"tool_use","id":"t","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"x"}]}]}`,
		// A new user turn: no cycle to continue.
		`{"thinking":{"type":"enabled","budget_tokens":1024},"model":"c","max_tokens":2048,"messages":[{"role":"assistant","content":[{"type":"text","text":"hi"}]},{"role":"user","content":"next"}]}`,
	} {
		out, losses, err := AnthropicFailback([]byte(body))
		if err != nil || len(losses) != 0 || string(out) != body {
			t.Errorf("%s changed: %v %v %s", body, err, losses, out)
		}
	}
	// thinking as the first member goes with its comma.
	first := `{"thinking":{"type":"enabled","budget_tokens":1024},"model":"c","max_tokens":2048,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"x"}]}]}`
	out, losses, err := AnthropicFailback([]byte(first))
	if err != nil || len(losses) != 1 || !strings.HasPrefix(string(out), `{"model":"c"`) {
		t.Errorf("%v %v %s", err, losses, out)
	}
	// A reminder beside the tool result (Claude Code's): still the cycle.
	mixed := strings.Replace(first, `"content":"x"}]`, `"content":"x"},{"type":"text","text":"<system-reminder>r</system-reminder>"}]`, 1)
	if out, losses, err := AnthropicFailback([]byte(mixed)); err != nil || len(losses) != 1 || strings.Contains(string(out), `"thinking":{`) {
		t.Errorf("a tool result with text beside it: %v %v %s", err, losses, out)
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
