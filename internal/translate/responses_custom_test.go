package translate

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/responses"
)

// Codex sends apply_patch as a custom (free-text, grammar) tool.
const codexCustomRequest = `{"model":"gpt-5-codex","store":false,"stream":true,"max_output_tokens":4000,"input":[` +
	`{"type":"message","role":"user","content":[{"type":"input_text","text":"add hello.txt"}]},` +
	`{"type":"custom_tool_call","call_id":"call_1","name":"apply_patch","input":"*** Begin Patch\n*** End Patch"},` +
	`{"type":"custom_tool_call_output","call_id":"call_1","output":"Done!"}],` +
	`"tools":[{"type":"custom","name":"apply_patch","description":"Use the apply_patch tool to edit files.","format":{"type":"grammar","syntax":"lark","definition":"start: begin_patch hunk+ end_patch"}},` +
	`{"type":"function","name":"shell","parameters":{"type":"object","properties":{"command":{"type":"array","items":{"type":"string"}}}}}],"tool_choice":"auto"}`

func TestResponsesCustomToolRequest(t *testing.T) {
	p, _ := For(Responses, Anthropic)
	tr, err := p.Translate([]byte(codexCustomRequest), "claude-sonnet-4-5")
	if err != nil {
		t.Fatal(err)
	}
	if Material(tr.Losses) || Describe(tr.Losses, false) != "grammar of custom tool apply_patch (told, not enforced)" {
		t.Fatalf("losses %q", lossNames(tr.Losses))
	}
	want := `{"model":"claude-sonnet-4-5","max_tokens":4000,"stream":true,"messages":[{"role":"user","content":[{"type":"text","text":"add hello.txt"}]},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"call_1","name":"apply_patch","input":{"input":"*** Begin Patch\n*** End Patch"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1","content":[{"type":"text","text":"Done!"}]}]}],` +
		`"tools":[{"name":"apply_patch","description":"Use the apply_patch tool to edit files.\n\nThe input follows this lark grammar:\nstart: begin_patch hunk+ end_patch","input_schema":` + string(customToolSchema) + `},` +
		`{"name":"shell","input_schema":{"type":"object","properties":{"command":{"type":"array","items":{"type":"string"}}}}}],"tool_choice":{"type":"auto"}}`
	if !jsonEqual(t, tr.Body, []byte(want)) {
		t.Errorf("body:\n got %s\nwant %s", tr.Body, want)
	}
	messageParams(t, tr.Body)
}

func TestResponsesCustomToolAnswer(t *testing.T) {
	p, _ := For(Responses, Anthropic)
	tr, err := p.Translate([]byte(codexCustomRequest), "claude-sonnet-4-5")
	if err != nil {
		t.Fatal(err)
	}
	target := readFile(t, filepath.Join("testdata", "anthropic", "custom_tool.sse"))
	out, err := runTranslation(tr, target, nil)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "responses_from_anthropic_custom_tool.sse", out)
	final, gerr := checkResponsesStream(t, out)
	if gerr != nil || final == nil {
		t.Fatalf("grammar %v, clean %v\n%s", gerr, final != nil, out)
	}
	const patch = "*** Begin Patch\n*** Add File: hello.txt\n+hi \"there\"\n*** End Patch"
	var done responses.ResponseCustomToolCallInputDoneEvent
	for _, ev := range sseEvents(t, out) {
		if string(ev.Name) == "response.custom_tool_call_input.done" {
			_ = json.Unmarshal(ev.Data, &done)
		}
	}
	item := final.Output[0]
	if item.Type != "custom_tool_call" || item.Input != patch || item.CallID != "toolu_01P" || item.Name != "apply_patch" || done.Input != patch {
		t.Errorf("custom call %s, done %q", item.RawJSON(), done.Input)
	}
	body, err := tr.Response(readFile(t, filepath.Join("testdata", "anthropic", "custom_tool.json")))
	if err != nil {
		t.Fatal(err)
	}
	var want responses.Response
	if err := json.Unmarshal(body, &want); err != nil {
		t.Fatal(err)
	}
	if w := want.Output[0]; w.Type != "custom_tool_call" || w.Input != patch || w.ID != item.ID || w.CallID != item.CallID {
		t.Errorf("non-stream %s, stream %s", w.RawJSON(), item.RawJSON())
	}
	// Every re-chunking gives the same bytes.
	for _, cuts := range cutSets(len(target)) {
		again, err := runTranslation(tr, target, cuts)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("cut at %v: output differs", cuts)
		}
	}
	// A custom call whose arguments lack the input is an error, never an empty patch.
	bad := bytes.Replace(target, []byte(`{\"input\": `), []byte(`{\"text\": `), 1)
	if _, err := runTranslation(tr, bad, nil); err == nil || !strings.Contains(err.Error(), "without a string input") {
		t.Errorf("err %v", err)
	}
}
