package translate

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
)

// Gemini generateContent requests, encoded from the intermediate form.
// The model and the stream mode are in the path (TargetPath), not the body.

type geminiPart struct {
	Text             *string       `json:"text,omitempty"`
	InlineData       *geminiBlob   `json:"inlineData,omitempty"`
	FunctionCall     *geminiCall   `json:"functionCall,omitempty"`
	FunctionResponse *geminiResult `json:"functionResponse,omitempty"`
	ThoughtSignature string        `json:"thoughtSignature,omitempty"`
	Thought          bool          `json:"thought,omitempty"`
}

type geminiBlob struct {
	MimeType string `json:"mimeType"`
	Data     string `json:"data"`
}

type geminiCall struct {
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

type geminiResult struct {
	Name     string         `json:"name"`
	Response map[string]any `json:"response"`
}

type geminiContent struct {
	Role  string       `json:"role,omitempty"`
	Parts []geminiPart `json:"parts"`
}

type geminiFunction struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Parameters  any    `json:"parameters,omitempty"`
}

type geminiRequest struct {
	Contents          []geminiContent  `json:"contents"`
	SystemInstruction *geminiContent   `json:"systemInstruction,omitempty"`
	Tools             []map[string]any `json:"tools,omitempty"`
	ToolConfig        map[string]any   `json:"toolConfig,omitempty"`
	GenerationConfig  map[string]any   `json:"generationConfig,omitempty"`
}

// geminiSkipSignature is the thoughtSignature Google documents for
// function calls whose signature is not at hand (a conversation carried
// over from another model): "skip_thought_signature_validator", here in
// standard base64 (the same bytes), as the proto JSON of a bytes field
// and the genai SDK read it. It is no signature and claims to be none.
const geminiSkipSignature = "skip/thought/signature/validator"

// geminiMaxStop is how many stop sequences Gemini accepts.
const geminiMaxStop = 5

func encodeGeminiRequest(r *Request) ([]byte, []Loss, error) {
	var losses []Loss
	out := geminiRequest{Contents: []geminiContent{}}
	if len(r.System) > 0 {
		sys := &geminiContent{}
		for _, b := range r.System {
			losses = cacheLoss(losses, b.Cache)
			if b.Kind != KindText {
				losses = addLoss(losses, "non-text system content", true)
				continue
			}
			t := b.Text
			sys.Parts = append(sys.Parts, geminiPart{Text: &t})
		}
		out.SystemInstruction = sys
	}
	names := map[string]string{} // tool call id -> function name, for the results
	calls := map[string]int{}    // tool call id -> its place among the calls
	for _, m := range r.Messages {
		c := geminiContent{Role: "user"}
		if m.Role == "assistant" {
			c.Role = "model"
		}
		var answers []int // per part: the place of the call it answers, -1 for others
		for _, b := range m.Blocks {
			var p []geminiPart
			p, losses = geminiParts(b, names, losses)
			c.Parts = append(c.Parts, p...)
			place, ok := calls[b.ToolID]
			switch {
			case b.Kind == KindToolCall:
				calls[b.ToolID] = len(calls)
			case b.Kind != KindToolResult || !ok:
				place = -1
			}
			for range p {
				answers = append(answers, place)
			}
		}
		inCallOrder(c.Parts, answers)
		if len(c.Parts) == 0 {
			continue
		}
		if n := len(out.Contents); n > 0 && out.Contents[n-1].Role == c.Role {
			out.Contents[n-1].Parts = append(out.Contents[n-1].Parts, c.Parts...)
		} else {
			out.Contents = append(out.Contents, c)
		}
	}
	if len(r.Tools) > 0 {
		var fns []geminiFunction
		for _, t := range r.Tools {
			losses = cacheLoss(losses, t.Cache)
			losses = toolNameLoss(losses, t.Name)
			params, dropped, err := geminiSchema(t.Schema)
			if err != nil {
				return nil, nil, fmt.Errorf("tool %s: %w", t.Name, err)
			}
			for _, d := range dropped {
				losses = addLoss(losses, "tool schema keyword "+d, d == "$ref")
			}
			fns = append(fns, geminiFunction{Name: t.Name, Description: t.Description, Parameters: params})
		}
		out.Tools = []map[string]any{{"functionDeclarations": fns}}
	}
	var mode string
	switch r.ToolChoice.Mode {
	case ChoiceDefault:
	case ChoiceAuto:
		mode = "AUTO"
	case ChoiceAny, ChoiceTool:
		mode = "ANY"
	case ChoiceNone:
		mode = "NONE"
	default:
		return nil, nil, fmt.Errorf("tool_choice %q has no Gemini equivalent", r.ToolChoice.Mode)
	}
	if mode != "" {
		cfg := map[string]any{"mode": mode}
		if r.ToolChoice.Mode == ChoiceTool {
			cfg["allowedFunctionNames"] = []string{r.ToolChoice.Name}
		}
		out.ToolConfig = map[string]any{"functionCallingConfig": cfg}
	}
	if r.ToolChoice.DisableParallel && len(r.Tools) > 0 && r.ToolChoice.Mode != ChoiceNone {
		// Gemini has no way to ask for one call at most: a tool_choice it
		// cannot honour (SPEC 19). A client that asked may read only the
		// first of two calls, and its next turn then lacks a result.
		losses = addLoss(losses, "disable_parallel_tool_use", true)
	}
	gen := map[string]any{}
	if r.MaxTokens > 0 {
		gen["maxOutputTokens"] = r.MaxTokens
	}
	if r.Temperature != nil {
		gen["temperature"] = *r.Temperature
	}
	if r.TopP != nil {
		gen["topP"] = *r.TopP
	}
	if r.TopK != nil {
		gen["topK"] = *r.TopK
	}
	if len(r.Stop) > 0 {
		gen["stopSequences"] = r.Stop
		losses = addLoss(losses, stopSequenceLoss, false)
		if len(r.Stop) > geminiMaxStop {
			losses = addLoss(losses, fmt.Sprintf("more than %d stop sequences", geminiMaxStop), true)
		}
	}
	if rf := r.ResponseFormat; rf != nil {
		// Gemini's structured output: JSON, held to the schema when there
		// is one (responseJsonSchema takes JSON Schema as it is).
		gen["responseMimeType"] = "application/json"
		if rf.Type == "json_schema" {
			gen["responseJsonSchema"] = rf.Schema
		}
	}
	if r.Seed != nil {
		if s := *r.Seed; s == int64(int32(s)) {
			gen["seed"] = s
		} else {
			losses = addLoss(losses, "seed (beyond Gemini's 32 bits)", false)
		}
	}
	if r.FrequencyPenalty != nil {
		gen["frequencyPenalty"] = *r.FrequencyPenalty
	}
	if r.PresencePenalty != nil {
		gen["presencePenalty"] = *r.PresencePenalty
	}
	if len(gen) > 0 {
		out.GenerationConfig = gen
	}
	body, err := json.Marshal(out)
	return body, losses, err
}

// inCallOrder puts a turn's function responses in the order of the calls
// they answer, in the places responses hold: Gemini pairs them with the
// calls by name and order, not by id, so results of parallel calls to one
// function given in another order would answer the wrong calls.
func inCallOrder(parts []geminiPart, answers []int) {
	var slots []int
	for i, a := range answers {
		if a >= 0 {
			slots = append(slots, i)
		}
	}
	sorted := slices.Clone(slots)
	slices.SortStableFunc(sorted, func(a, b int) int { return answers[a] - answers[b] })
	moved := make([]geminiPart, len(slots))
	for i, from := range sorted {
		moved[i] = parts[from]
	}
	for i, to := range slots {
		parts[to] = moved[i]
	}
}

// geminiParts turns one block into Gemini parts.
func geminiParts(b Block, names map[string]string, losses []Loss) ([]geminiPart, []Loss) {
	losses = cacheLoss(losses, b.Cache)
	switch b.Kind {
	case KindText:
		if b.Text == "" {
			return nil, losses
		}
		t := b.Text
		return []geminiPart{{Text: &t}}, losses
	case KindImage, KindDocument:
		if b.URL != "" {
			return nil, addLoss(losses, "image or document by URL", true)
		}
		if b.MediaType == "text/plain" && b.Kind == KindDocument {
			return nil, addLoss(losses, "plain-text document", true)
		}
		if b.Kind == KindDocument && b.Text != "" {
			losses = addLoss(losses, "document title", false) // inlineData has no name
		}
		return []geminiPart{{InlineData: &geminiBlob{MimeType: b.MediaType, Data: b.Data}}}, losses
	case KindToolCall:
		names[b.ToolID] = b.ToolName
		p := geminiPart{FunctionCall: &geminiCall{Name: b.ToolName, Args: b.Args}}
		if b.Opaque != nil && b.Opaque.Origin == Gemini {
			p.ThoughtSignature = b.Opaque.Value
		} else {
			p.ThoughtSignature = geminiSkipSignature
			losses = addLoss(losses, "Gemini thought signatures of earlier calls (Google's documented validator skip sent)", false)
		}
		return []geminiPart{p}, losses
	case KindToolResult:
		name, ok := names[b.ToolID]
		if !ok {
			return nil, addLoss(losses, "tool_result for a call not in the conversation", true)
		}
		var text string
		text, losses = toolResultText(b.Result, losses)
		key := "result"
		if b.IsError {
			key = "error"
		}
		return []geminiPart{{FunctionResponse: &geminiResult{Name: name, Response: map[string]any{key: text}}}}, losses
	case KindReasoning:
		return nil, reasoningLoss(losses, b, Gemini)
	}
	return nil, addLoss(losses, fmt.Sprintf("block kind %d", b.Kind), true)
}

// geminiSchemaKeys are the JSON Schema keywords Gemini's Schema (an
// OpenAPI 3.0 subset) reads; others are dropped and named.
var geminiSchemaKeys = map[string]bool{
	"type": true, "format": true, "title": true, "description": true, "nullable": true, "enum": true,
	"properties": true, "required": true, "items": true, "minItems": true, "maxItems": true,
	"minimum": true, "maximum": true, "minLength": true, "maxLength": true, "pattern": true,
	"anyOf": true, "propertyOrdering": true, "default": true, "minProperties": true, "maxProperties": true,
}

// geminiSchema rewrites a JSON Schema into what Gemini accepts, naming
// what it dropped. nil for an object without properties (Gemini refuses
// an empty properties map; a function without parameters has none).
func geminiSchema(raw json.RawMessage) (any, []string, error) {
	if isNullish(raw) {
		return nil, nil, nil
	}
	var s map[string]any
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, nil, fmt.Errorf("input schema: %w", err)
	}
	var dropped []string
	out := geminiSchemaNode(s, &dropped)
	if props, _ := out["properties"].(map[string]any); out["type"] == "object" && len(props) == 0 {
		return nil, dropped, nil
	}
	sort.Strings(dropped)
	return out, dropped, nil
}

func geminiSchemaNode(s map[string]any, dropped *[]string) map[string]any {
	note := func(k string) {
		for _, d := range *dropped {
			if d == k {
				return
			}
		}
		*dropped = append(*dropped, k)
	}
	out := map[string]any{}
	for k, v := range s {
		switch {
		case k == "const":
			if _, ok := v.(string); ok {
				out["enum"] = []any{v} // the same constraint, in Gemini's words
				continue
			}
			note(k)
		case k == "type":
			if list, ok := v.([]any); ok { // ["string","null"]: nullable string
				var types []any
				for _, t := range list {
					if t == "null" {
						out["nullable"] = true
					} else {
						types = append(types, t)
					}
				}
				if len(types) == 1 {
					out["type"] = types[0]
				} else {
					out["anyOf"] = typeAlternatives(types)
				}
				continue
			}
			out[k] = v
		case k == "format":
			if f, _ := v.(string); s["type"] != "string" || f == "enum" || f == "date-time" {
				out[k] = v
			} else {
				note("format " + f)
			}
		case !geminiSchemaKeys[k]:
			note(k)
		case k == "properties":
			props, _ := v.(map[string]any)
			o := map[string]any{}
			for name, p := range props {
				if pm, ok := p.(map[string]any); ok {
					o[name] = geminiSchemaNode(pm, dropped)
				} else {
					note("boolean property schema") // true / false: Gemini's Schema is an object
				}
			}
			if len(o) > 0 {
				out[k] = o
			}
		case k == "items":
			if im, ok := v.(map[string]any); ok {
				out[k] = geminiSchemaNode(im, dropped)
			} else {
				note("items other than one schema") // a tuple (draft 4-2019's array form)
			}
		case k == "anyOf":
			list, _ := v.([]any)
			var alts []any
			for _, a := range list {
				if am, ok := a.(map[string]any); ok {
					alts = append(alts, geminiSchemaNode(am, dropped))
				}
			}
			out[k] = alts
		default:
			out[k] = v
		}
	}
	return out
}

func typeAlternatives(types []any) []any {
	alts := make([]any, 0, len(types))
	for _, t := range types {
		alts = append(alts, map[string]any{"type": t})
	}
	return alts
}
