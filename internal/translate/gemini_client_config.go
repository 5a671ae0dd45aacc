package translate

// A Gemini client's generationConfig, tools and toolConfig, as the decoder reads them.

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// geminiFunctionCalling maps functionCallingConfig to a tool choice.
func geminiFunctionCalling(mode string, allowed []string, losses []Loss) (ToolChoice, []Loss, error) {
	switch mode {
	case "", "MODE_UNSPECIFIED", "AUTO":
		if len(allowed) > 0 {
			return ToolChoice{}, addLoss(losses, "allowedFunctionNames in mode AUTO", true), nil
		}
		if mode == "AUTO" {
			return ToolChoice{Mode: ChoiceAuto}, losses, nil
		}
		return ToolChoice{}, losses, nil
	case "VALIDATED":
		if len(allowed) > 0 {
			return ToolChoice{}, addLoss(losses, "allowedFunctionNames in mode VALIDATED", true), nil
		}
		// The calls' arguments are held to their schemas (as strict tools):
		// the target may call or answer, as asked, unconstrained.
		return ToolChoice{Mode: ChoiceAuto}, addLoss(losses, "functionCallingConfig mode VALIDATED (schemas not enforced)", false), nil
	case "NONE":
		return ToolChoice{Mode: ChoiceNone}, losses, nil
	case "ANY":
		switch len(allowed) {
		case 0:
			return ToolChoice{Mode: ChoiceAny}, losses, nil
		case 1:
			return ToolChoice{Mode: ChoiceTool, Name: allowed[0]}, losses, nil
		}
		// Some of the tools, not one: Messages and Chat name one or all.
		return ToolChoice{}, addLoss(losses, "allowedFunctionNames of more than one function", true), nil
	}
	return ToolChoice{}, losses, fmt.Errorf("gemini request: functionCallingConfig mode %q", mode)
}

// geminiGeneration reads generationConfig.
func geminiGeneration(r *Request, gen map[string]json.RawMessage, losses []Loss) ([]Loss, error) {
	for _, k := range slices.Sorted(maps.Keys(gen)) {
		v := gen[k]
		if isNullish(v) {
			continue
		}
		bad := func(err error) error { return fmt.Errorf("gemini request: generationConfig.%s: %w", k, err) }
		switch k {
		case "temperature", "topP":
			var f float64
			if err := json.Unmarshal(v, &f); err != nil {
				return losses, bad(err)
			}
			if k == "temperature" {
				r.Temperature = &f
			} else {
				r.TopP = &f
			}
		case "topK":
			var f float64 // the REST API takes a number; genai sends one
			if err := json.Unmarshal(v, &f); err != nil {
				return losses, bad(err)
			}
			n := int(f)
			r.TopK = &n
		case "maxOutputTokens":
			if err := json.Unmarshal(v, &r.MaxTokens); err != nil {
				return losses, bad(err)
			}
		case "stopSequences":
			if err := json.Unmarshal(v, &r.Stop); err != nil {
				return losses, bad(err)
			}
		case "candidateCount":
			var n int
			if err := json.Unmarshal(v, &n); err != nil {
				return losses, bad(err)
			}
			if n > 1 {
				losses = addLoss(losses, "candidateCount "+strconv.Itoa(n), true)
			}
		case "responseLogprobs", "logprobs":
			if !unsetValue(v) && string(v) != "0" {
				losses = addLoss(losses, k, true)
			}
		case "responseMimeType":
			var mt string
			if err := json.Unmarshal(v, &mt); err != nil {
				return losses, bad(err)
			}
			// application/json with a schema is structured output (below);
			// without one, JSON mode, and any other type, is not carried.
			schema := !isNullish(gen["responseSchema"]) || !isNullish(gen["responseJsonSchema"])
			if mt != "" && mt != "text/plain" && !(mt == "application/json" && schema) {
				losses = addLoss(losses, "responseMimeType "+mt, true)
			}
		case "seed":
			var n int64
			if err := json.Unmarshal(v, &n); err != nil {
				return losses, bad(err)
			}
			r.Seed = &n
		case "presencePenalty", "frequencyPenalty":
			var f float64
			if err := json.Unmarshal(v, &f); err != nil {
				return losses, bad(err)
			}
			if k == "presencePenalty" {
				r.PresencePenalty = &f
			} else {
				r.FrequencyPenalty = &f
			}
		case "responseJsonSchema":
			r.ResponseFormat = geminiResponseFormat(compactJSON(v))
		case "responseSchema":
			if isNullish(gen["responseJsonSchema"]) {
				r.ResponseFormat = geminiResponseFormat(openAPISchema(v)) // Gemini's OpenAPI words, as JSON Schema
			}
		case "responseModalities":
			var mods []string
			if err := json.Unmarshal(v, &mods); err != nil {
				return losses, bad(err)
			}
			for _, m := range mods {
				if m != "TEXT" {
					losses = addLoss(losses, "responseModalities "+m, true)
				}
			}
		default:
			switch geminiGenerationFields[k] {
			case "advisory":
				if !unsetValue(v) {
					losses = addLoss(losses, "generationConfig."+k, false)
				}
			default:
				if !unsetValue(v) {
					losses = addLoss(losses, "generationConfig."+k, true)
				}
			}
		}
	}
	return losses, nil
}

// geminiClientTool reads one Tool: its function declarations are carried;
// Google's own tools (search, code execution, URL context...) are not.
func geminiClientTool(r *Request, raw json.RawMessage, losses []Loss) ([]Loss, error) {
	var tool map[string]json.RawMessage
	if err := json.Unmarshal(raw, &tool); err != nil {
		return losses, fmt.Errorf("gemini request: tool: %w", err)
	}
	for _, k := range slices.Sorted(maps.Keys(tool)) {
		if k != "functionDeclarations" {
			// Enabled by an empty object ({"googleSearch":{}}).
			if !isNullish(tool[k]) {
				losses = addLoss(losses, "hosted tool "+k, true)
			}
			continue
		}
		var fns []json.RawMessage
		if err := json.Unmarshal(tool[k], &fns); err != nil {
			return losses, fmt.Errorf("gemini request: functionDeclarations: %w", err)
		}
		for _, rawFn := range fns {
			var fn struct {
				Name                 string          `json:"name"`
				Description          string          `json:"description"`
				Parameters           json.RawMessage `json:"parameters"`
				ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
			}
			if err := json.Unmarshal(rawFn, &fn); err != nil {
				return losses, fmt.Errorf("gemini request: function declaration: %w", err)
			}
			if fn.Name == "" {
				return losses, fmt.Errorf("gemini request: function declaration without a name")
			}
			losses = unreadFieldLosses(rawFn, "function declaration", geminiFunctionFields, losses)
			schema := fn.ParametersJSONSchema
			if isNullish(schema) {
				schema = openAPISchema(fn.Parameters)
			}
			if isNullish(schema) {
				schema = json.RawMessage(`{"type":"object","properties":{}}`)
			}
			r.Tools = append(r.Tools, Tool{Name: fn.Name, Description: fn.Description, Schema: schema})
		}
	}
	return losses, nil
}

// geminiResponseFormat is a Gemini client's response schema (JSON
// Schema) as the intermediate form's structured output: Gemini holds the
// answer to it; a json_schema needs a name (Chat's), which Gemini has not.
func geminiResponseFormat(schema json.RawMessage) *ResponseFormat {
	return &ResponseFormat{Type: "json_schema", Name: "response", Schema: schema}
}

// openAPISchema turns Gemini's Schema (OpenAPI 3.0 words: upper-case
// types, nullable) into the JSON Schema the other formats read, exactly:
// "STRING" is "string", nullable adds "null" to the type.
func openAPISchema(raw json.RawMessage) json.RawMessage {
	if isNullish(raw) {
		return nil
	}
	var s any
	if json.Unmarshal(raw, &s) != nil {
		return raw
	}
	out, _ := json.Marshal(jsonSchemaNode(s))
	return out
}

func jsonSchemaNode(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := make(map[string]any, len(m))
	for k, val := range m {
		switch k {
		case "type":
			if t, ok := val.(string); ok {
				val = strings.ToLower(t)
			}
		case "properties":
			if props, ok := val.(map[string]any); ok {
				o := make(map[string]any, len(props))
				for name, p := range props {
					o[name] = jsonSchemaNode(p)
				}
				val = o
			}
		case "items":
			val = jsonSchemaNode(val)
		case "anyOf":
			if list, ok := val.([]any); ok {
				alts := make([]any, len(list))
				for i, a := range list {
					alts[i] = jsonSchemaNode(a)
				}
				val = alts
			}
		case "nullable":
			continue
		}
		out[k] = val
	}
	if m["nullable"] == true {
		if t, ok := out["type"].(string); ok {
			out["type"] = []any{t, "null"}
		}
	}
	return out
}
