package translate

import (
	"encoding/json"
	"testing"
)

// decodeGeminiRequest reads a generateContent request back into the
// intermediate form (the tests' inverse of encodeGeminiRequest). Gemini
// has no call ids: calls and results are read with none, results with
// the function name they answer.
func decodeGeminiRequest(t *testing.T, body []byte) *Request {
	var in struct {
		Contents []struct {
			Role  string       `json:"role"`
			Parts []geminiPart `json:"parts"`
		} `json:"contents"`
		SystemInstruction *struct {
			Parts []geminiPart `json:"parts"`
		} `json:"systemInstruction"`
		Tools []struct {
			FunctionDeclarations []struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
			} `json:"functionDeclarations"`
		} `json:"tools"`
		ToolConfig *struct {
			FunctionCallingConfig struct {
				Mode                 string   `json:"mode"`
				AllowedFunctionNames []string `json:"allowedFunctionNames"`
			} `json:"functionCallingConfig"`
		} `json:"toolConfig"`
		GenerationConfig struct {
			MaxOutputTokens int      `json:"maxOutputTokens"`
			Temperature     *float64 `json:"temperature"`
			TopP            *float64 `json:"topP"`
			TopK            *int     `json:"topK"`
			StopSequences   []string `json:"stopSequences"`
		} `json:"generationConfig"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		t.Fatal(err)
	}
	g := in.GenerationConfig
	r := &Request{MaxTokens: g.MaxOutputTokens, Temperature: g.Temperature, TopP: g.TopP, TopK: g.TopK, Stop: g.StopSequences}
	if in.SystemInstruction != nil {
		for _, p := range in.SystemInstruction.Parts {
			r.System = append(r.System, Block{Kind: KindText, Text: *p.Text})
		}
	}
	for _, c := range in.Contents {
		m := Message{Role: map[string]string{"user": "user", "model": "assistant"}[c.Role]}
		for _, p := range c.Parts {
			switch {
			case p.Text != nil:
				m.Blocks = append(m.Blocks, Block{Kind: KindText, Text: *p.Text})
			case p.InlineData != nil:
				m.Blocks = append(m.Blocks, Block{Kind: KindImage, MediaType: p.InlineData.MimeType, Data: p.InlineData.Data})
			case p.FunctionCall != nil:
				if p.ThoughtSignature != geminiSkipSignature {
					t.Errorf("a call without its Gemini signature carries %q", p.ThoughtSignature)
				}
				m.Blocks = append(m.Blocks, Block{Kind: KindToolCall, ToolName: p.FunctionCall.Name, Args: p.FunctionCall.Args})
			case p.FunctionResponse != nil:
				res := Block{Kind: KindToolResult, ToolName: p.FunctionResponse.Name}
				text, ok := p.FunctionResponse.Response["result"].(string)
				if !ok {
					text, _ = p.FunctionResponse.Response["error"].(string)
					res.IsError = true
				}
				res.Result = []Block{{Kind: KindText, Text: text}}
				m.Blocks = append(m.Blocks, res)
			}
		}
		r.Messages = append(r.Messages, m)
	}
	for _, tl := range in.Tools {
		for _, f := range tl.FunctionDeclarations {
			r.Tools = append(r.Tools, Tool{Name: f.Name, Description: f.Description, Schema: f.Parameters})
		}
	}
	if in.ToolConfig != nil {
		fc := in.ToolConfig.FunctionCallingConfig
		r.ToolChoice.Mode = map[string]string{"AUTO": ChoiceAuto, "ANY": ChoiceAny, "NONE": ChoiceNone}[fc.Mode]
		if fc.Mode == "ANY" && len(fc.AllowedFunctionNames) == 1 {
			r.ToolChoice = ToolChoice{Mode: ChoiceTool, Name: fc.AllowedFunctionNames[0]}
		}
	}
	return r
}

// geminiProjection is what a Gemini target holds of r: calls without ids
// (Gemini matches results by name and order), results as one text with
// their error flag, turns of one role merged, no stream flag or model in
// the body (the path has them).
func geminiProjection(r *Request) (*Request, []string) {
	var lost expectedLosses
	note := lost.note
	out := *r
	out.Model, out.Stream = "", false
	out.System = nil
	for _, b := range r.System {
		if b.Cache {
			note("cache_control breakpoints")
		}
		out.System = append(out.System, Block{Kind: KindText, Text: b.Text})
	}
	names := map[string]string{}
	out.Messages = nil
	for _, m := range r.Messages {
		var blocks []Block
		for _, b := range m.Blocks {
			b, kept := unmarkedBlock(b, note)
			if !kept {
				continue
			}
			switch b.Kind {
			case KindToolCall:
				names[b.ToolID] = b.ToolName
				note("Gemini thought signatures of earlier calls (Google's documented validator skip sent)")
				b.ToolID = ""
			case KindToolResult:
				b = Block{Kind: KindToolResult, ToolName: names[b.ToolID], IsError: b.IsError, Result: []Block{{Kind: KindText, Text: resultText(b.Result, note)}}}
			}
			blocks = append(blocks, b)
		}
		out.Messages = appendTurn(out.Messages, m.Role, blocks)
	}
	if r.ToolChoice.DisableParallel {
		note("disable_parallel_tool_use")
		out.ToolChoice.DisableParallel = false
		if r.ToolChoice.Mode == ChoiceDefault {
			out.ToolChoice.Mode = ChoiceAuto // Anthropic states it with tool_choice auto
		}
	}
	return &out, lost
}

func TestPropertyAnthropicToGeminiRoundTrip(t *testing.T) {
	p, _ := For(Anthropic, Gemini)
	eachAnthropicTranslation(t, p, "gemini-2.5-pro", 4, func(i int, conv *Request, client, out []byte, losses []Loss) {
		want, lost := geminiProjection(conv)
		checkRoundTrip(t, i, client, decodeGeminiRequest(t, out), want, losses, prefillLost(conv, anthropicPrefill, lost))
	})
}
