package translate

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/genai"
)

// What Gemini CLI sends (hand-made after google-gemini/gemini-cli at
// 5411f113ca, packages/core: the chat-base-2.5 generation config, tools
// declared with parametersJsonSchema, call ids it sends back in the call
// and its functionResponse with {"output": ...}, thought signatures on
// Gemini's calls), not recorded from the CLI.
const geminiCLIRequest = `{"contents":[` +
	`{"role":"user","parts":[{"text":"<session_context>This is the Gemini CLI.</session_context>"}]},` +
	`{"role":"user","parts":[{"text":"What does notes.txt say?"}]},` +
	`{"role":"model","parts":[{"functionCall":{"id":"read_file_1733000000_0","name":"read_file","args":{"absolute_path":"/w/notes.txt"}},"thoughtSignature":"CiQBcsjafE1"}]},` +
	`{"role":"user","parts":[{"functionResponse":{"id":"read_file_1733000000_0","name":"read_file","response":{"output":"hello"}}}]}],` +
	`"systemInstruction":{"role":"user","parts":[{"text":"You are an interactive CLI agent."}]},` +
	`"tools":[{"functionDeclarations":[{"name":"read_file","description":"Reads a file","parametersJsonSchema":{"type":"object","properties":{"absolute_path":{"type":"string"}},"required":["absolute_path"]}},` +
	`{"name":"run_shell_command","description":"Runs a command","parametersJsonSchema":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}}]}],` +
	`"generationConfig":{"temperature":1,"topP":0.95,"topK":64,"thinkingConfig":{"includeThoughts":true,"thinkingBudget":8192}}}`

func TestAgentRequestsCarryPhase2(t *testing.T) {
	cases := []struct{ client, target, body, wantNotice string }{
		{Gemini, Anthropic, geminiCLIRequest, "generationConfig.thinkingConfig"},
		{Gemini, OpenAI, geminiCLIRequest, "top_k"},
		{Responses, Gemini, codexRequest, "parallel_tool_calls false"},
		{Responses, OpenAI, codexRequest, "reasoning"},
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
			if notice := Describe(tr.Losses, false); !strings.Contains(notice, c.wantNotice) {
				t.Errorf("notice %q does not name %q", notice, c.wantNotice)
			}
			targetParams(t, c.target, tr.Body)
			if bytes.Contains(tr.Body, []byte("CiQBcsjafE1")) || bytes.Contains(tr.Body, []byte("gAAAAB")) {
				t.Errorf("provider state reached another vendor: %s", tr.Body)
			}
		})
	}
}

// Gemini CLI's call ids travel as the calls' and results' ids.
func TestGeminiClientIDs(t *testing.T) {
	p, _ := For(Gemini, Anthropic)
	tr, err := p.Translate([]byte(geminiCLIRequest), "claude")
	if err != nil {
		t.Fatal(err)
	}
	m := messageParams(t, tr.Body)
	if len(m.Messages) != 3 || m.Messages[1].Content[0].OfToolUse.ID != "read_file_1733000000_0" ||
		m.Messages[2].Content[0].OfToolResult.ToolUseID != "read_file_1733000000_0" {
		t.Fatalf("%s", tr.Body)
	}
	if len(m.System) != 1 || m.System[0].Text != "You are an interactive CLI agent." {
		t.Errorf("system %s", tr.Body)
	}
}

// Parallel calls to one function, without ids (older API versions) or
// with ids and results in another order: each result answers its own
// call, and each call keeps its own arguments.
func TestGeminiClientParallelCalls(t *testing.T) {
	calls := `{"role":"model","parts":[{"functionCall":{%sname":"get_weather","args":{"city":"Paris"}}},{"functionCall":{%sname":"get_weather","args":{"city":"Tokyo"}}}]}`
	results := `{"role":"user","parts":[{"functionResponse":{%sname":"get_weather","response":{"result":"%s"}}},{"functionResponse":{%sname":"get_weather","response":{"result":"%s"}}}]}`
	for _, c := range []struct {
		name, calls, results string
	}{
		{"no ids", fmt3(calls, `"`, `"`), fmt3(results, `"`, "sunny", `"`, "rainy")},
		{"ids, results reversed", fmt3(calls, `"id":"a1","`, `"id":"b2","`), fmt3(results, `"id":"b2","`, "rainy", `"id":"a1","`, "sunny")},
	} {
		for _, target := range []string{Anthropic, OpenAI} {
			t.Run(c.name+"/"+target, func(t *testing.T) {
				body := `{"contents":[{"role":"user","parts":[{"text":"weather?"}]},` + c.calls + `,` + c.results + `],` +
					`"tools":[{"functionDeclarations":[{"name":"get_weather","parameters":{"type":"OBJECT","properties":{"city":{"type":"STRING"}}}}]}]}`
				p, _ := For(Gemini, target)
				tr, err := p.Translate([]byte(body), "m")
				if err != nil || Material(tr.Losses) {
					t.Fatalf("err %v losses %s", err, lossNames(tr.Losses))
				}
				targetParams(t, target, tr.Body)
				var r *Request
				if target == Anthropic {
					r, _, err = decodeAnthropicRequest(tr.Body)
					if err != nil {
						t.Fatal(err)
					}
				} else {
					r = decodeChatRequest(t, tr.Body)
				}
				byID := map[string]string{}
				for _, m := range r.Messages {
					for _, b := range m.Blocks {
						switch b.Kind {
						case KindToolCall:
							byID[b.ToolID] = string(b.Args)
						case KindToolResult:
							want := map[string]string{"sunny": `{"city":"Paris"}`, "rainy": `{"city":"Tokyo"}`}[b.Result[0].Text]
							if byID[b.ToolID] != want {
								t.Errorf("result %q answers %s, want %s (%s)", b.Result[0].Text, byID[b.ToolID], want, tr.Body)
							}
						}
					}
				}
				if len(byID) != 2 {
					t.Errorf("calls %v", byID)
				}
				if !strings.Contains(string(tr.Body), `"city":{"type":"string"}`) {
					t.Errorf("the OpenAPI schema is not JSON Schema: %s", tr.Body)
				}
			})
		}
	}
}

func fmt3(format string, args ...any) string {
	s := format
	for _, a := range args {
		s = strings.Replace(s, "%s", a.(string), 1)
	}
	return s
}

// Every field of a Gemini client's request the targets cannot carry is
// named: material or advisory, never dropped unseen.
func TestGeminiClientLosses(t *testing.T) {
	base := `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]`
	cases := []struct {
		extra, loss string
		material    bool
	}{
		{`"safetySettings":[{"category":"HARM_CATEGORY_HARASSMENT","threshold":"BLOCK_NONE"}]`, "safetySettings", true},
		{`"cachedContent":"cachedContents/abc"`, "cachedContent (the cache lives at Google)", true},
		{`"generationConfig":{"thinkingConfig":{"thinkingBudget":1024}}`, "generationConfig.thinkingConfig", false},
		{`"generationConfig":{"responseMimeType":"application/json"}`, "responseMimeType application/json", true},
		{`"generationConfig":{"candidateCount":2}`, "candidateCount 2", true},
		{`"generationConfig":{"responseLogprobs":true}`, "responseLogprobs", true},
		{`"generationConfig":{"logprobs":3}`, "logprobs", true},
		{`"generationConfig":{"responseModalities":["TEXT","IMAGE"]}`, "responseModalities IMAGE", true},
		{`"generationConfig":{"speechConfig":{"voiceConfig":{}}}`, "generationConfig.speechConfig", true},
		{`"generationConfig":{"brandNewKnob":1}`, "generationConfig.brandNewKnob", true},
		{`"labels":{"team":"a"}`, "labels", false},
		{`"tools":[{"googleSearch":{}}]`, "hosted tool googleSearch", true},
		{`"tools":[{"codeExecution":{}}]`, "hosted tool codeExecution", true},
		{`"tools":[{"functionDeclarations":[{"name":"f","behavior":"NON_BLOCKING"}]}]`, "function declaration field behavior", true},
		{`"toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["a","b"]}}`, "allowedFunctionNames of more than one function", true},
		{`"toolConfig":{"functionCallingConfig":{"mode":"VALIDATED"}}`, "functionCallingConfig mode VALIDATED (schemas not enforced)", false},
		{`"surprise":1`, "field surprise", true},
	}
	parts := []struct{ contents, loss string }{
		{`{"role":"user","parts":[{"fileData":{"mimeType":"image/png","fileUri":"https://generativelanguage.googleapis.com/v1beta/files/x"}}]}`, "content part fileData"},
		{`{"role":"user","parts":[{"inlineData":{"mimeType":"audio/wav","data":"AAAA"}}]}`, "inlineData audio/wav"},
		{`{"role":"model","parts":[{"executableCode":{"language":"PYTHON","code":"1"}}]}`, "content part executableCode"},
		{`{"role":"user","parts":[{"functionResponse":{"name":"nobody","response":{"result":"x"}}}]}`, "functionResponse for a call not in the conversation"},
	}
	for _, target := range []string{Anthropic, OpenAI} {
		p, _ := For(Gemini, target)
		for _, c := range cases {
			tr, err := p.Translate([]byte(base+","+c.extra+"}"), "m")
			if err != nil {
				t.Fatalf("%s: %v", c.extra, err)
			}
			found := false
			for _, l := range tr.Losses {
				found = found || l.What == c.loss && l.Material == c.material
			}
			if !found {
				t.Errorf("%s on %s: losses %s, want %q material %v", c.extra, target, lossNames(tr.Losses), c.loss, c.material)
			}
		}
		for _, c := range parts {
			body := `{"contents":[{"role":"user","parts":[{"text":"hi"}]},` + c.contents + `,{"role":"user","parts":[{"text":"go on"}]}]}`
			tr, err := p.Translate([]byte(body), "m")
			if err != nil {
				t.Fatalf("%s: %v", c.contents, err)
			}
			if !Material(tr.Losses) || !strings.Contains(Describe(tr.Losses, true), c.loss) {
				t.Errorf("%s on %s: losses %s, want %q material", c.contents, target, lossNames(tr.Losses), c.loss)
			}
		}
	}
}

// Images, PDFs and text documents: each target holds what it can.
func TestGeminiClientContent(t *testing.T) {
	body := `{"contents":[{"role":"user","parts":[{"text":"look"},{"inlineData":{"mimeType":"image/png","data":"iVBORw0KGgo="}},` +
		`{"inlineData":{"mimeType":"application/pdf","data":"JVBERi0="}},{"inlineData":{"mimeType":"text/plain","data":"aGVsbG8="}}]}],` +
		`"systemInstruction":{"parts":[{"text":"Be brief."}]},"generationConfig":{"maxOutputTokens":100,"stopSequences":["END"],"temperature":0.2},` +
		`"toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["f"]}},"tools":[{"functionDeclarations":[{"name":"f","parametersJsonSchema":{"type":"object","properties":{"a":{"type":"string"}}}}]}]}`
	p, _ := For(Gemini, Anthropic)
	tr, err := p.Translate([]byte(body), "claude")
	if err != nil || len(tr.Losses) != 0 {
		t.Fatalf("err %v losses %s", err, lossNames(tr.Losses))
	}
	m := messageParams(t, tr.Body)
	c := m.Messages[0].Content
	if len(c) != 4 || c[1].OfImage == nil || c[2].OfDocument == nil || c[3].OfDocument == nil || c[3].OfDocument.Source.OfText.Data != "hello" {
		t.Fatalf("%s", tr.Body)
	}
	if m.MaxTokens != 100 || m.StopSequences[0] != "END" || m.ToolChoice.OfTool.Name != "f" {
		t.Errorf("%s", tr.Body)
	}
	p, _ = For(Gemini, OpenAI)
	tr, err = p.Translate([]byte(body), "gpt")
	if err != nil || Describe(tr.Losses, true) != "document" {
		t.Fatalf("err %v losses %s", err, lossNames(tr.Losses))
	}
	chatParams(t, tr.Body)
}

func TestGeminiClientErrors(t *testing.T) {
	cases := []struct {
		target     string
		status     int
		body       string
		wantStatus int
		wantName   string
		wantMsg    string
	}{
		{Anthropic, 529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, 503, "UNAVAILABLE", "Overloaded"},
		{Anthropic, 429, `{"type":"error","error":{"type":"rate_limit_error","message":"slow"}}`, 429, "RESOURCE_EXHAUSTED", "slow"},
		{Anthropic, 400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}`, 400, "INVALID_ARGUMENT", geminiContextOverflow},
		{OpenAI, 429, `{"error":{"message":"Rate limit","type":"requests","code":"rate_limit_exceeded"}}`, 429, "RESOURCE_EXHAUSTED", "Rate limit"},
		{OpenAI, 503, `{"error":{"message":"busy","type":"server_error","code":"server_is_overloaded"}}`, 503, "UNAVAILABLE", "busy"},
		{OpenAI, 400, `{"error":{"message":"This model's maximum context length is 128000 tokens","type":"invalid_request_error","code":"context_length_exceeded"}}`, 400, "INVALID_ARGUMENT", geminiContextOverflow},
	}
	for _, c := range cases {
		p, _ := For(Gemini, c.target)
		status, body := p.Error(c.status, []byte(c.body))
		var e genai.APIError
		var wrap struct {
			Error *genai.APIError `json:"error"`
		}
		if err := json.Unmarshal(body, &wrap); err != nil || wrap.Error == nil {
			t.Fatalf("%s: %s", c.body, body)
		}
		e = *wrap.Error
		if status != c.wantStatus || e.Code != c.wantStatus || e.Status != c.wantName || !strings.Contains(e.Message, c.wantMsg) {
			t.Errorf("%s -> %d %s", c.body, status, body)
		}
	}
}

func TestResponsesOnGeminiAndChatErrors(t *testing.T) {
	cases := []struct {
		target     string
		status     int
		body       string
		wantStatus int
		wantCode   string
	}{
		{Gemini, 503, `{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}`, 503, "server_is_overloaded"},
		{Gemini, 429, `{"error":{"code":429,"message":"Resource has been exhausted","status":"RESOURCE_EXHAUSTED"}}`, 429, "rate_limit_exceeded"},
		{Gemini, 400, `{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}`, 400, "context_length_exceeded"},
		{OpenAI, 503, `{"error":{"message":"busy","type":"server_error","code":"server_is_overloaded"}}`, 503, "server_is_overloaded"},
		{OpenAI, 429, `{"error":{"message":"Rate limit","type":"requests","code":"rate_limit_exceeded"}}`, 429, "rate_limit_exceeded"},
		{OpenAI, 400, `{"error":{"message":"This model's maximum context length is 128000 tokens","type":"invalid_request_error","code":"context_length_exceeded"}}`, 400, "context_length_exceeded"},
	}
	for _, c := range cases {
		p, _ := For(Responses, c.target)
		status, body := p.Error(c.status, []byte(c.body))
		var got struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(body, &got); err != nil || status != c.wantStatus || got.Error.Code != c.wantCode || got.Error.Message == "" {
			t.Errorf("%s -> %d %s", c.body, status, body)
		}
	}
}

// Codex's apply_patch (a custom tool) reaches Gemini and Chat as a
// function whose one string argument is the free text, and comes back as a
// custom_tool_call, stream and non-stream.
func TestResponsesCustomToolOnGeminiAndChat(t *testing.T) {
	answers := map[string]struct{ body, stream string }{
		Gemini: {`{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"apply_patch","args":{"input":"*** Begin Patch\n*** End Patch"}}}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":2},"modelVersion":"g","responseId":"r1"}`,
			"data: " + `{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"apply_patch","args":{"input":"*** Begin Patch\n*** End Patch"}}}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":2},"modelVersion":"g","responseId":"r1"}` + "\n\n"},
		OpenAI: {`{"id":"c1","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"apply_patch","arguments":"{\"input\":\"*** Begin Patch\\n*** End Patch\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}`,
			"data: " + `{"id":"c1","model":"m","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"apply_patch","arguments":"{\"input\":\"*** Begin Patch\\n*** End Patch\"}"}}]},"finish_reason":null}]}` + "\n\n" +
				"data: " + `{"id":"c1","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\n" +
				"data: " + `{"id":"c1","model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}` + "\n\ndata: [DONE]\n\n"},
	}
	for target, a := range answers {
		t.Run(target, func(t *testing.T) {
			p, _ := For(Responses, target)
			tr, err := p.Translate([]byte(codexRequest), "m")
			if err != nil || Material(tr.Losses) {
				t.Fatalf("err %v losses %s", err, lossNames(tr.Losses))
			}
			body, err := tr.Response([]byte(a.body))
			if err != nil || !strings.Contains(string(body), `"type":"custom_tool_call"`) || !strings.Contains(string(body), `"input":"*** Begin Patch\n*** End Patch"`) {
				t.Fatalf("err %v: %s", err, body)
			}
			out, err := runTranslation(tr, []byte(a.stream), nil)
			final, gerr := checkResponsesStream(t, out)
			if err != nil || gerr != nil || final == nil || final.Output[0].Type != "custom_tool_call" || final.Output[0].Input != "*** Begin Patch\n*** End Patch" {
				t.Fatalf("err %v grammar %v\n%s", err, gerr, out)
			}
			if _, losses, _ := p.Request([]byte(codexRequest), "m"); !Material(losses) {
				t.Errorf("Pair.Request carries custom tools it cannot give back")
			}
		})
	}
}

// The translated requests, as goldens: the Gemini CLI turn on both
// targets, the Codex turn on both.
func TestRequestGoldensPhase2(t *testing.T) {
	for _, c := range []struct{ client, target, body string }{
		{Gemini, Anthropic, geminiCLIRequest}, {Gemini, OpenAI, geminiCLIRequest},
		{Responses, Gemini, codexRequest}, {Responses, OpenAI, codexRequest},
	} {
		p, _ := For(c.client, c.target)
		tr, err := p.Translate(WithGeminiStreamIf(c.client, []byte(c.body)), "target-model")
		if err != nil {
			t.Fatal(err)
		}
		var pretty bytes.Buffer
		_ = json.Indent(&pretty, tr.Body, "", "  ")
		golden(t, "request_"+c.client+"_to_"+c.target+".txt", []byte("// losses: "+lossNames(tr.Losses)+"\n"+pretty.String()+"\n"))
	}
}

// WithGeminiStreamIf marks a Gemini client's body as streamed.
func WithGeminiStreamIf(client string, body []byte) []byte {
	if client == Gemini {
		return WithGeminiStream(body)
	}
	return body
}

func TestWithGeminiStream(t *testing.T) {
	for _, target := range []string{Anthropic, OpenAI} {
		p, _ := For(Gemini, target)
		tr, err := p.Translate(WithGeminiStream([]byte(geminiCLIRequest)), "m")
		if err != nil || !strings.Contains(string(tr.Body), `"stream":true`) {
			t.Fatalf("err %v: %s", err, tr.Body)
		}
		tr, err = p.Translate([]byte(geminiCLIRequest), "m")
		if err != nil || strings.Contains(string(tr.Body), `"stream":true`) {
			t.Fatalf("err %v: %s", err, tr.Body)
		}
	}
}

// A response schema (Gemini CLI's JSON calls) is structured output: Chat
// enforces it (response_format json_schema), Messages cannot and refuses.
func TestGeminiClientResponseSchema(t *testing.T) {
	for _, gen := range []string{
		`{"responseMimeType":"application/json","responseJsonSchema":{"type":"object","properties":{"next_speaker":{"type":"string","enum":["user","model"]}},"required":["next_speaker"]}}`,
		`{"responseMimeType":"application/json","responseSchema":{"type":"OBJECT","properties":{"next_speaker":{"type":"STRING","enum":["user","model"]}},"required":["next_speaker"]}}`,
	} {
		body := `{"contents":[{"role":"user","parts":[{"text":"who speaks next?"}]}],"generationConfig":` + gen + `}`
		p, _ := For(Gemini, OpenAI)
		tr, err := p.Translate([]byte(body), "gpt")
		if err != nil || len(tr.Losses) != 0 {
			t.Fatalf("err %v losses %s", err, lossNames(tr.Losses))
		}
		c := chatParams(t, tr.Body)
		js := c.ResponseFormat.OfJSONSchema
		if js == nil || js.JSONSchema.Name != "response" {
			t.Fatalf("no json_schema response_format: %s", tr.Body)
		}
		schema, _ := json.Marshal(js.JSONSchema.Schema)
		if !jsonEqual(t, schema, []byte(`{"type":"object","properties":{"next_speaker":{"type":"string","enum":["user","model"]}},"required":["next_speaker"]}`)) {
			t.Errorf("schema %s", schema)
		}
		p, _ = For(Gemini, Anthropic)
		tr, err = p.Translate([]byte(body), "claude")
		if err != nil || Describe(tr.Losses, true) != "structured output (a response JSON schema the target cannot enforce)" {
			t.Fatalf("err %v losses %s", err, lossNames(tr.Losses))
		}
	}
	// JSON mode without a schema is not carried.
	p, _ := For(Gemini, OpenAI)
	tr, _ := p.Translate([]byte(`{"contents":[{"role":"user","parts":[{"text":"x"}]}],"generationConfig":{"responseMimeType":"application/json"}}`), "gpt")
	if Describe(tr.Losses, true) != "responseMimeType application/json" {
		t.Errorf("losses %s", lossNames(tr.Losses))
	}
}

// Structured output is one notion whichever client asked (a Chat
// response_format, a Gemini response schema): the encoders of targets
// that enforce it carry it, Anthropic's refuses it by name.
func TestEncodersStructuredOutput(t *testing.T) {
	r := &Request{MaxTokens: 100, ResponseFormat: geminiResponseFormat(json.RawMessage(`{"type":"object"}`)),
		Messages: []Message{{Role: "user", Blocks: []Block{{Kind: KindText, Text: "x"}}}}}
	if _, losses, err := encodeAnthropicRequest(r, "m"); err != nil ||
		Describe(losses, true) != "structured output (a response JSON schema the target cannot enforce)" {
		t.Errorf("anthropic: err %v losses %s", err, lossNames(losses))
	}
	for name, enc := range map[string]func() ([]byte, []Loss, error){
		"chat":      func() ([]byte, []Loss, error) { return encodeChatRequest(r, "m") },
		"gemini":    func() ([]byte, []Loss, error) { return encodeGeminiRequest(r) },
		"responses": func() ([]byte, []Loss, error) { return encodeResponsesRequest(r, "m") },
	} {
		body, losses, err := enc()
		if err != nil || len(losses) != 0 || !bytes.Contains(body, []byte(`{"type":"object"}`)) {
			t.Errorf("%s: err %v losses %s: %s", name, err, lossNames(losses), body)
		}
	}
}

// seed and the penalties: carried to Chat, named (advisory) on Messages.
func TestGeminiClientSampling(t *testing.T) {
	body := `{"contents":[{"role":"user","parts":[{"text":"x"}]}],"generationConfig":{"seed":7,"presencePenalty":0.5,"frequencyPenalty":0.25,"maxOutputTokens":50}}`
	p, _ := For(Gemini, OpenAI)
	tr, err := p.Translate([]byte(body), "gpt")
	if err != nil || len(tr.Losses) != 0 {
		t.Fatalf("err %v losses %s", err, lossNames(tr.Losses))
	}
	c := chatParams(t, tr.Body)
	if c.Seed.Value != 7 || c.PresencePenalty.Value != 0.5 || c.FrequencyPenalty.Value != 0.25 {
		t.Errorf("%s", tr.Body)
	}
	p, _ = For(Gemini, Anthropic)
	tr, err = p.Translate([]byte(body), "claude")
	if err != nil || Material(tr.Losses) || Describe(tr.Losses, false) != "seed, frequency_penalty, presence_penalty" {
		t.Fatalf("err %v losses %s", err, lossNames(tr.Losses))
	}
}
