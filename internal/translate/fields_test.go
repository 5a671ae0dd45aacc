package translate

import (
	"strings"
	"testing"
)

// The fields inside blocks and tools: each one the decoder does not read
// is named, advisory or material; the defaults say nothing.
func TestAnthropicBlockAndToolFields(t *testing.T) {
	const head = `{"model":"m","max_tokens":64,"messages":[`
	for _, c := range []struct{ name, body, want string }{
		{"defaults", head + `{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{},"caller":{"type":"direct"}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"r"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA"},"transformations":{}},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA"},"transformations":{"oversized_image":"downsize"}}]}],` +
			`"tools":[{"name":"f","input_schema":{"type":"object"},"allowed_callers":["direct"],"strict":false,"defer_loading":false}]}`, ""},
		{"claude code deferred tool", head + `{"role":"user","content":"q"}],"tools":[{"name":"f","input_schema":{"type":"object"},"defer_loading":true,"eager_input_streaming":true}]}`,
			"defer_loading (deferred tools offered at once) (dropped), eager_input_streaming (dropped)"},
		{"programmatic caller", head + `{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{},"caller":{"type":"code_execution_20250825","tool_id":"s1"}}]}]}`,
			"tool_use block field caller (refused)"},
		{"document citations and context", head + `{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"AA"},"citations":{"enabled":true},"context":"c"}]}]}`,
			"document citations (dropped), document block field context (refused)"},
		{"unknown tool field", head + `{"role":"user","content":"q"}],"tools":[{"name":"f","input_schema":{"type":"object"},"input_examples":[{"a":1}],"allowed_callers":["code_execution_20250825"]}]}`,
			"tool field allowed_callers (refused), tool input_examples (dropped)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr, err := anthropicToResponses{}.Translate([]byte(c.body), "m")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, l := range tr.Losses {
				if !strings.HasPrefix(l.What, "Gemini") {
					got = append(got, l.String())
				}
			}
			if strings.Join(got, ", ") != c.want {
				t.Fatalf("losses %q, want %q", strings.Join(got, ", "), c.want)
			}
		})
	}
}

// The Responses side: an image's detail, annotations in history and a
// deferred function tool are named; Codex's defaults say nothing.
func TestResponsesPartAndToolFields(t *testing.T) {
	for _, c := range []struct{ name, body, want string }{
		{"defaults", `{"model":"m","store":false,"max_output_tokens":9,"input":[{"role":"user","content":[{"type":"input_image","image_url":"https://x/y.png","detail":"auto"}]},` +
			`{"role":"assistant","content":[{"type":"output_text","text":"x","annotations":[],"logprobs":[]}]},{"role":"user","content":"y"}],"tools":[{"type":"function","name":"f","parameters":{"type":"object"},"strict":false}]}`, ""},
		{"named", `{"model":"m","store":false,"max_output_tokens":9,"input":[{"role":"user","content":[{"type":"input_image","image_url":"https://x/y.png","detail":"low"}]},` +
			`{"role":"assistant","content":[{"type":"output_text","text":"x","annotations":[{"type":"url_citation","url":"u"}]}]},{"role":"user","content":"y"}],"tools":[{"type":"function","name":"f","parameters":{"type":"object"},"defer_loading":true,"output_schema":{"type":"object"}}]}`,
			"input_image detail (dropped), annotations in history (dropped), defer_loading (deferred tools offered at once) (dropped), function tool field output_schema (refused)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr, err := responsesToAnthropic{}.Translate([]byte(c.body), "m")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, l := range tr.Losses {
				got = append(got, l.String())
			}
			if strings.Join(got, ", ") != c.want {
				t.Fatalf("losses %q, want %q", strings.Join(got, ", "), c.want)
			}
		})
	}
}

// A Responses client's inline PDF reaches Anthropic as a document with its
// file name as the title (docs/translation.md: documents carried); a file
// stored at OpenAI or of another type is refused.
func TestResponsesInputFileToAnthropic(t *testing.T) {
	p, _ := For(Responses, Anthropic)
	body := `{"model":"m","store":false,"max_output_tokens":9,"input":[{"role":"user","content":[{"type":"input_file","file_data":"data:application/pdf;base64,JVBERi0=","filename":"spec.pdf"},{"type":"input_text","text":"Summarize."}]}]}`
	checkRequest(t, p, body, "claude",
		`{"model":"claude","max_tokens":9,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0="},"title":"spec.pdf"},{"type":"text","text":"Summarize."}]}]}`, "")
	for _, part := range []string{`{"type":"input_file","file_id":"file-1"}`, `{"type":"input_file","file_data":"data:text/csv;base64,YQ==","filename":"a.csv"}`,
		`{"type":"input_file","file_url":"https://x/a.pdf"}`} {
		checkRefusal(t, p, `{"model":"m","store":false,"input":[{"role":"user","content":[`+part+`]}]}`, "claude", "content part input_file")
	}
}

// Gemini's inlineData has no name: a document's title is named as dropped.
func TestGeminiDocumentTitle(t *testing.T) {
	tr, err := anthropicToGemini{}.Translate([]byte(`{"model":"m","max_tokens":9,"messages":[{"role":"user","content":[`+
		`{"type":"document","title":"2019 contract","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0="}}]}]}`), "g")
	if err != nil {
		t.Fatal(err)
	}
	if got := Describe(tr.Losses, false); got != "document title" {
		t.Fatalf("dropped %q, want the document title", got)
	}
}

// Schema forms Gemini's Schema cannot hold are named, never dropped
// unseen: tuple items, boolean property schemas.
func TestGeminiSchemaForms(t *testing.T) {
	tr, err := anthropicToGemini{}.Translate([]byte(`{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"q"}],"tools":[{"name":"f","input_schema":`+
		`{"type":"object","properties":{"pair":{"type":"array","items":[{"type":"string"},{"type":"integer"}]},"any":true,"s":{"type":"string"}}}}]}`), "g")
	if err != nil {
		t.Fatal(err)
	}
	if got := Describe(tr.Losses, false); got != "tool schema keyword boolean property schema, tool schema keyword items other than one schema" {
		t.Fatalf("dropped %q", got)
	}
}

// Gemini pairs function responses with the calls by name and order: the
// results of parallel calls to one function, given in another order, are
// put in the calls' order, so each answers its own call.
func TestGeminiResponsesInCallOrder(t *testing.T) {
	checkRequest(t, anthropicToGemini{}, `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"q"},`+
		`{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{"q":1}},{"type":"tool_use","id":"t2","name":"f","input":{"q":2}},{"type":"tool_use","id":"t3","name":"g","input":{}}]},`+
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t3","content":"r3"},{"type":"tool_result","tool_use_id":"t2","content":"r2"},{"type":"text","text":"note"},{"type":"tool_result","tool_use_id":"t1","content":"r1"}]}]}`, "g",
		`{"contents":[{"role":"user","parts":[{"text":"q"}]},{"role":"model","parts":[`+
			`{"functionCall":{"name":"f","args":{"q":1}},"thoughtSignature":"skip/thought/signature/validator"},`+
			`{"functionCall":{"name":"f","args":{"q":2}},"thoughtSignature":"skip/thought/signature/validator"},`+
			`{"functionCall":{"name":"g","args":{}},"thoughtSignature":"skip/thought/signature/validator"}]},`+
			`{"role":"user","parts":[{"functionResponse":{"name":"f","response":{"result":"r1"}}},{"functionResponse":{"name":"f","response":{"result":"r2"}}},`+
			`{"text":"note"},{"functionResponse":{"name":"g","response":{"result":"r3"}}}]}],"generationConfig":{"maxOutputTokens":9}}`,
		"Gemini thought signatures of earlier calls (Google's documented validator skip sent) (dropped)")
}

// A tool_choice of auto or none without tools says nothing, and the
// OpenAI APIs refuse one there ("only allowed when tools are specified"):
// it is left out.
func TestOpenAIToolChoiceWithoutTools(t *testing.T) {
	for _, p := range []Pair{anthropicToChat{}, anthropicToResponses{}} {
		for _, mode := range []string{"auto", "none"} {
			tr, err := p.Translate([]byte(`{"model":"m","max_tokens":99,"messages":[{"role":"user","content":"q"}],"tool_choice":{"type":"`+mode+`"}}`), "g")
			if err != nil || strings.Contains(string(tr.Body), "tool_choice") {
				t.Fatalf("%s %s: %v %s", p.Target(), mode, err, tr.Body)
			}
		}
	}
}

// The Responses API refuses max_output_tokens below 16 (a client's probe
// may ask for 1): refused before sending, so another candidate may serve
// it, never raised behind the client's back.
func TestResponsesMinOutputTokens(t *testing.T) {
	checkRefusal(t, anthropicToResponses{}, `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"quota"}]}`, "g", "max_tokens below 16 (the Responses minimum)")
	if tr, err := (anthropicToResponses{}).Translate([]byte(`{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"q"}]}`), "g"); err != nil || Material(tr.Losses) {
		t.Fatalf("16: %v %v", err, tr.Losses)
	}
}

// OpenAI and Gemini refuse function names over 64 characters with a 400
// that would stop the other candidates: such a tool is refused before
// sending.
func TestToolNameLength(t *testing.T) {
	long := strings.Repeat("n", 65)
	body := `{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"q"}],"tools":[{"name":"` + long + `","input_schema":{"type":"object"}}]}`
	for _, p := range []Pair{anthropicToChat{}, anthropicToResponses{}, anthropicToGemini{}} {
		checkRefusal(t, p, body, "g", "tool name longer than 64 characters")
	}
}
