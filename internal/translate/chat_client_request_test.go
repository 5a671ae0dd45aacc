package translate

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// A Chat conversation hand-made in OpenAI's documented request shape:
// system and developer prompts, an image and an inline PDF, parallel
// calls to one function with their results, tool_choice, stop sequences,
// max_completion_tokens, streamed with usage.
const chatToolConversation = `{"model":"gpt-5","stream":true,"stream_options":{"include_usage":true},"max_completion_tokens":2048,` +
	`"temperature":0.2,"top_p":0.9,"stop":["END"],"tool_choice":"auto",` +
	`"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather of a city","parameters":{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}}}],` +
	`"messages":[{"role":"system","content":"You are terse."},{"role":"developer","content":[{"type":"text","text":"Answer in English."}]},` +
	`{"role":"user","content":[{"type":"text","text":"Weather in Paris and Tokyo? See the map and the report."},` +
	`{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}},` +
	`{"type":"file","file":{"filename":"report.pdf","file_data":"data:application/pdf;base64,JVBERi0="}}]},` +
	`{"role":"assistant","content":null,"tool_calls":[{"id":"call_A","type":"function","function":{"name":"get_weather","arguments":"{\"location\":\"Paris\"}"}},` +
	`{"id":"call_B","type":"function","function":{"name":"get_weather","arguments":"{\"location\":\"Tokyo\"}"}}]},` +
	`{"role":"tool","tool_call_id":"call_A","content":"18C"},{"role":"tool","tool_call_id":"call_B","content":[{"type":"text","text":"22C"},{"type":"text","text":"humid"}]}]}`

// opencodeRequest is what opencode (@ai-sdk/openai-compatible) sends, after
// packages/openai-compatible/src/chat (getArgs, convertToOpenAICompatibleChatMessages,
// prepareTools): max_tokens, temperature, top_p, stream_options
// include_usage, tools with strict, a system message, an assistant turn
// with text and a tool call (content null without text), a tool result.
const opencodeRequest = `{"model":"gpt-4.1","max_tokens":32000,"temperature":0,"top_p":1,"stream":true,"stream_options":{"include_usage":true},` +
	`"messages":[{"role":"system","content":"You are opencode, an interactive CLI tool."},{"role":"system","content":"<env>Working directory: /w</env>"},` +
	`{"role":"user","content":"read a.txt"},` +
	`{"role":"assistant","content":"Reading it.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"read","arguments":"{\"filePath\":\"/w/a.txt\"}"}}]},` +
	`{"role":"tool","tool_call_id":"call_1","content":"<file>\n00001| hello\n</file>"},` +
	`{"role":"user","content":[{"type":"text","text":"and b.txt"},{"type":"text","text":"<system-reminder>todo</system-reminder>"}]}],` +
	`"tools":[{"type":"function","function":{"name":"read","description":"Reads a file","parameters":{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",` +
	`"properties":{"filePath":{"type":"string","description":"The path"},"offset":{"type":"number"},"limit":{"type":"number"}},"required":["filePath"],"additionalProperties":false},"strict":false}},` +
	`{"type":"function","function":{"name":"bash","description":"Runs a command","parameters":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"],"additionalProperties":false}}}],` +
	`"tool_choice":"auto"}`

func TestChatClientRequestGoldens(t *testing.T) {
	for _, target := range []string{Anthropic, Gemini, Responses} {
		p, _ := For(OpenAI, target)
		tr, err := p.Translate([]byte(chatToolConversation), "target-model")
		if err != nil {
			t.Fatal(err)
		}
		var pretty bytes.Buffer
		_ = json.Indent(&pretty, tr.Body, "", "  ")
		golden(t, "request_openai_to_"+target+".txt", []byte("// losses: "+lossNames(tr.Losses)+"\n"+pretty.String()+"\n"))
		targetParams(t, target, tr.Body)
		// Responses has no stop sequences: the only material loss.
		if Material(tr.Losses) != (target == Responses) || target == Responses && Describe(tr.Losses, true) != "stop_sequences" {
			t.Errorf("%s: losses %s", target, lossNames(tr.Losses))
		}
		for _, id := range []string{"call_A", "call_B"} {
			if target != Gemini && !bytes.Contains(tr.Body, []byte(id)) {
				t.Errorf("%s: tool call id %s lost", target, id)
			}
		}
	}
}

// A normal opencode turn is carried by every target with advisory losses
// only, and the body is one the target's SDK reads.
func TestOpencodeRequestCarries(t *testing.T) {
	for _, target := range []string{Anthropic, Gemini, Responses} {
		p, _ := For(OpenAI, target)
		tr, err := p.Translate([]byte(opencodeRequest), "target-model")
		if err != nil {
			t.Fatal(err)
		}
		if Material(tr.Losses) {
			t.Fatalf("%s: an ordinary opencode turn is refused: %s", target, Describe(tr.Losses, true))
		}
		t.Logf("%s: dropped with notice: %s", target, Describe(tr.Losses, false))
		targetParams(t, target, tr.Body)
		if !strings.Contains(string(tr.Body), "32000") {
			t.Errorf("%s: max_tokens lost: %s", target, tr.Body)
		}
	}
}

// Every Chat field named in issue 56, by target: refused (material),
// dropped with notice (advisory) or carried (no loss).
func TestChatClientLosses(t *testing.T) {
	const (
		carried  = ""
		advisory = "advisory"
		material = "material"
	)
	cases := []struct {
		field, value, loss string
		want               [3]string // anthropic, gemini, responses
	}{
		{"n", `2`, "n > 1 (several choices)", [3]string{material, material, material}},
		{"n", `1`, "", [3]string{carried, carried, carried}},
		{"logprobs", `true`, "logprobs", [3]string{material, material, material}},
		{"top_logprobs", `3`, "top_logprobs", [3]string{material, material, material}},
		{"response_format", `{"type":"json_schema","json_schema":{"name":"r","schema":{"type":"object"},"strict":true}}`,
			"structured output (a response JSON schema the target cannot enforce)", [3]string{material, carried, carried}},
		{"response_format", `{"type":"json_object"}`, "structured output (JSON mode, which the target cannot enforce)", [3]string{material, carried, carried}},
		{"response_format", `{"type":"text"}`, "", [3]string{carried, carried, carried}},
		{"audio", `{"voice":"alloy","format":"wav"}`, "field audio", [3]string{material, material, material}},
		{"modalities", `["text","audio"]`, "modality audio", [3]string{material, material, material}},
		{"modalities", `["text"]`, "", [3]string{carried, carried, carried}},
		{"prediction", `{"type":"content","content":"x"}`, "field prediction", [3]string{material, material, material}},
		{"web_search_options", `{}`, "", [3]string{carried, carried, carried}},
		{"web_search_options", `{"search_context_size":"low"}`, "field web_search_options", [3]string{material, material, material}},
		{"logit_bias", `{"50256":-100}`, "field logit_bias", [3]string{material, material, material}},
		{"functions", `[{"name":"f"}]`, "field functions", [3]string{material, material, material}},
		{"x_unknown", `1`, "field x_unknown", [3]string{material, material, material}},
		{"seed", `7`, "seed", [3]string{advisory, carried, advisory}},
		{"frequency_penalty", `0.5`, "frequency_penalty", [3]string{advisory, carried, advisory}},
		{"presence_penalty", `0.5`, "presence_penalty", [3]string{advisory, carried, advisory}},
		{"user", `"u1"`, "user", [3]string{advisory, advisory, advisory}},
		{"store", `true`, "store", [3]string{advisory, advisory, advisory}},
		{"store", `false`, "", [3]string{carried, carried, carried}},
		{"metadata", `{"k":"v"}`, "metadata", [3]string{advisory, advisory, advisory}},
		{"service_tier", `"flex"`, "service_tier", [3]string{advisory, advisory, advisory}},
		{"prompt_cache_key", `"k"`, "prompt_cache_key", [3]string{advisory, advisory, advisory}},
		{"safety_identifier", `"s"`, "safety_identifier", [3]string{advisory, advisory, advisory}},
		{"reasoning_effort", `"low"`, "reasoning_effort", [3]string{advisory, advisory, advisory}},
		{"verbosity", `"low"`, "verbosity", [3]string{advisory, advisory, advisory}},
		{"parallel_tool_calls", `true`, "", [3]string{carried, carried, carried}},
		// Gemini cannot be asked for one call at most: a tool_choice it
		// cannot honour (phase 1's rule, anthropic_gemini_test.go).
		{"parallel_tool_calls", `false`, "disable_parallel_tool_use", [3]string{carried, material, carried}},
		{"stop", `["a","b"]`, "stop_sequences", [3]string{carried, carried, material}},
		{"max_tokens", `8`, "max_tokens below 16 (the Responses minimum)", [3]string{carried, carried, material}},
		{"stream_options", `{"include_usage":true,"include_obfuscation":true}`, "stream_options.include_obfuscation", [3]string{advisory, advisory, advisory}},
		{"stream_options", `{"x":1}`, "stream_options.x", [3]string{material, material, material}},
		{"tool_choice", `{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[]}}`, "tool_choice allowed_tools", [3]string{material, material, material}},
	}
	tools := `"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"string"}}}}}]`
	for _, c := range cases {
		body := `{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"x"}],` + tools + `,"` + c.field + `":` + c.value + `}`
		if c.field == "max_tokens" {
			body = strings.Replace(body, `"max_tokens":64,`, "", 1)
		}
		for i, target := range []string{Anthropic, Gemini, Responses} {
			p, _ := For(OpenAI, target)
			out, losses, err := request(p, []byte(body), "m")
			if err != nil {
				t.Fatalf("%s %s: %v", c.field, c.value, err)
			}
			got := carried
			for _, l := range losses {
				if l.What == c.loss {
					got = advisory
					if l.Material {
						got = material
					}
				}
			}
			if other := Describe(losses, true) + Describe(losses, false); got == carried && other != "" {
				t.Errorf("%s=%s to %s: unexpected losses %s", c.field, c.value, target, lossNames(losses))
			}
			if got != c.want[i] {
				t.Errorf("%s=%s to %s: %q, want %q (losses %s)", c.field, c.value, target, got, c.want[i], lossNames(losses))
			}
			if !Material(losses) {
				targetParams(t, target, out)
			}
		}
	}
}

// What the targets hold of a carried response_format, seed and penalties.
func TestChatClientCarriedFields(t *testing.T) {
	body := `{"model":"m","max_tokens":64,"seed":7,"frequency_penalty":0.5,"presence_penalty":0.25,"messages":[{"role":"user","content":"x"}],` +
		`"response_format":{"type":"json_schema","json_schema":{"name":"r","description":"d","schema":{"type":"object","properties":{"a":{"type":"string"}}},"strict":true}}}`
	p, _ := For(OpenAI, Gemini)
	checkRequest(t, p, body, "m", `{"contents":[{"role":"user","parts":[{"text":"x"}]}],"generationConfig":{"maxOutputTokens":64,`+
		`"responseMimeType":"application/json","responseJsonSchema":{"type":"object","properties":{"a":{"type":"string"}}},"seed":7,"frequencyPenalty":0.5,"presencePenalty":0.25}}`, "")
	p, _ = For(OpenAI, Responses)
	checkRequest(t, p, body, "gpt-5", `{"model":"gpt-5","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"x"}]}],"max_output_tokens":64,"store":false,`+
		`"text":{"format":{"type":"json_schema","name":"r","description":"d","schema":{"type":"object","properties":{"a":{"type":"string"}}},"strict":true}}}`,
		"seed (dropped); frequency_penalty (dropped); presence_penalty (dropped)")
}

// Message-level fields: a participant's name is advisory, an unknown
// field or content part material, reasoning sent back advisory, a Gemini
// thought signature carried to Gemini only.
func TestChatClientMessageFields(t *testing.T) {
	cases := []struct {
		msgs, loss string
		material   bool
	}{
		{`{"role":"user","name":"ann","content":"x"}`, "message name (participant names)", false},
		{`{"role":"user","content":"x","x_extra":1}`, "user message field x_extra", true},
		{`{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AA==","format":"wav"}}]}`, "content part input_audio", true},
		{`{"role":"user","content":[{"type":"file","file":{"file_id":"file-1"}}]}`, "file part other than inline data (file_id)", true},
		{`{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png","detail":"high"}}]}`, "image_url detail", false},
		{`{"role":"user","content":"x"},{"role":"assistant","content":"a","audio":{"id":"au_1"}},{"role":"user","content":"y"}`, "assistant message field audio", true},
		{`{"role":"user","content":"x"},{"role":"assistant","content":"a","reasoning_content":"think"},{"role":"user","content":"y"}`, "reasoning in history", false},
		{`{"role":"user","content":"x"},{"role":"function","name":"f","content":"r"}`, "message role function (deprecated functions)", true},
	}
	for _, c := range cases {
		body := `{"model":"m","max_tokens":64,"messages":[` + c.msgs + `]}`
		for _, target := range []string{Anthropic, Responses} {
			p, _ := For(OpenAI, target)
			_, losses, err := request(p, []byte(body), "m")
			if err != nil {
				t.Fatalf("%s: %v", c.msgs, err)
			}
			found := false
			for _, l := range losses {
				found = found || l.What == c.loss && l.Material == c.material
			}
			if !found {
				t.Errorf("%s to %s: losses %s, want %q material %v", c.msgs, target, lossNames(losses), c.loss, c.material)
			}
		}
	}
	// Gemini's OpenAI endpoint's thought signature goes back to Gemini.
	body := `{"model":"m","max_tokens":64,"tools":[{"type":"function","function":{"name":"f"}}],"messages":[{"role":"user","content":"x"},` +
		`{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"},"extra_content":{"google":{"thought_signature":"c2ln"}}}]},` +
		`{"role":"tool","tool_call_id":"c1","content":"r"}]}`
	p, _ := For(OpenAI, Gemini)
	out, losses, _ := request(p, []byte(body), "m")
	if !bytes.Contains(out, []byte(`"thoughtSignature":"c2ln"`)) || strings.Contains(lossNames(losses), "thought signatures (kept") {
		t.Errorf("gemini: %s %s", out, lossNames(losses))
	}
	p, _ = For(OpenAI, Anthropic)
	out, losses, _ = request(p, []byte(body), "m")
	if bytes.Contains(out, []byte("c2ln")) || !strings.Contains(lossNames(losses), "gemini thought signatures (kept for gemini only) (dropped)") {
		t.Errorf("anthropic: %s %s", out, lossNames(losses))
	}
}

// A conversation that ends in an assistant message: Chat answers anew,
// as Gemini and Responses do; Anthropic would continue it.
func TestChatClientAssistantLast(t *testing.T) {
	body := `{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"Sure, "}]}`
	for _, c := range []struct {
		target   string
		material bool
	}{{Anthropic, true}, {Gemini, false}, {Responses, false}} {
		p, _ := For(OpenAI, c.target)
		_, losses, _ := request(p, []byte(body), "m")
		if Material(losses) != c.material {
			t.Errorf("%s: %s", c.target, lossNames(losses))
		}
	}
}

// Tool choices map through the table: the modes, a named function.
func TestChatClientToolChoice(t *testing.T) {
	tools := `"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"string"}}}}}]`
	for _, c := range []struct{ choice, anthropic, gemini, responses string }{
		{`"auto"`, `{"type":"auto"}`, `{"functionCallingConfig":{"mode":"AUTO"}}`, `"auto"`},
		{`"required"`, `{"type":"any"}`, `{"functionCallingConfig":{"mode":"ANY"}}`, `"required"`},
		{`"none"`, `{"type":"none"}`, `{"functionCallingConfig":{"mode":"NONE"}}`, `"none"`},
		{`{"type":"function","function":{"name":"f"}}`, `{"type":"tool","name":"f"}`,
			`{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["f"]}}`, `{"type":"function","name":"f"}`},
	} {
		body := `{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"x"}],` + tools + `,"tool_choice":` + c.choice + `}`
		for _, w := range []struct{ target, key, want string }{{Anthropic, "tool_choice", c.anthropic}, {Gemini, "toolConfig", c.gemini}, {Responses, "tool_choice", c.responses}} {
			p, _ := For(OpenAI, w.target)
			out, losses, err := request(p, []byte(body), "m")
			var got map[string]json.RawMessage
			_ = json.Unmarshal(out, &got)
			if err != nil || len(losses) > 0 || !jsonEqual(t, got[w.key], []byte(w.want)) {
				t.Errorf("%s to %s: %s %v %s", c.choice, w.target, got[w.key], err, lossNames(losses))
			}
		}
	}
}
