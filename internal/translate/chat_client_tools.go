package translate

// A Chat client's tools, tool calls, tool_choice, stop sequences and response_format, as the decoder reads them.

import (
	"encoding/json"
	"fmt"
	"strings"
)

// chatStopSequences reads stop: a string or an array of strings.
func chatStopSequences(raw json.RawMessage) ([]string, error) {
	if isNullish(raw) {
		return nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		if one == "" {
			return nil, nil
		}
		return []string{one}, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("chat request: stop: %w", err)
	}
	return list, nil
}

// chatResponseFormat reads response_format; text is the default and says
// nothing. Whether a target can enforce the rest is its encoder's call.
func chatResponseFormat(raw json.RawMessage) (*ResponseFormat, error) {
	if isNullish(raw) {
		return nil, nil
	}
	var rf struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Schema      json.RawMessage `json:"schema"`
			Strict      *bool           `json:"strict"`
		} `json:"json_schema"`
	}
	if err := json.Unmarshal(raw, &rf); err != nil {
		return nil, fmt.Errorf("chat request: response_format: %w", err)
	}
	switch rf.Type {
	case "text":
		return nil, nil
	case "json_object":
		return &ResponseFormat{Type: rf.Type}, nil
	case "json_schema":
		if rf.JSONSchema == nil || rf.JSONSchema.Name == "" {
			return nil, fmt.Errorf("chat request: response_format json_schema without a name")
		}
		js := rf.JSONSchema
		out := &ResponseFormat{Type: rf.Type, Name: js.Name, Description: js.Description, Schema: compactJSON(js.Schema)}
		out.Strict = js.Strict != nil && *js.Strict
		return out, nil
	}
	return nil, fmt.Errorf("chat request: response_format type %q", rf.Type)
}

func chatClientToolCallBlock(raw json.RawMessage, losses []Loss) (Block, []Loss, error) {
	var c chatClientToolCall
	if err := json.Unmarshal(raw, &c); err != nil {
		return Block{}, losses, err
	}
	losses = chatUnreadFields(raw, "tool call", chatClientToolCallFields, losses)
	if c.Type != "" && c.Type != "function" {
		return Block{}, addLoss(losses, "tool call type "+c.Type, true), nil
	}
	if c.ID == "" || c.Function.Name == "" {
		return Block{}, losses, fmt.Errorf("tool call without id or name")
	}
	args := c.Function.Arguments
	if strings.TrimSpace(args) == "" {
		args = "{}"
	}
	if err := checkArgs([]byte(args)); err != nil {
		return Block{}, losses, fmt.Errorf("tool call %s: %w", c.ID, err)
	}
	b := Block{Kind: KindToolCall, ToolID: c.ID, ToolName: c.Function.Name, Args: compactJSON(json.RawMessage(args))}
	if sig := c.ExtraContent.Google.ThoughtSignature; sig != "" {
		// Gemini's OpenAI endpoint hands its thought signature out so.
		b.Opaque = &Opaque{Origin: Gemini, Kind: "thought_signature", Value: sig}
	}
	return b, losses, nil
}

func chatClientTool(r *Request, raw json.RawMessage, losses []Loss) ([]Loss, error) {
	var t struct {
		Type     string          `json:"type"`
		Function json.RawMessage `json:"function"`
	}
	if err := json.Unmarshal(raw, &t); err != nil {
		return losses, fmt.Errorf("chat request: tool: %w", err)
	}
	if t.Type != "function" {
		return addLoss(losses, "tool type "+t.Type, true), nil
	}
	losses = chatUnreadFields(raw, "tool", map[string]bool{"function": true}, losses)
	var f struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      *bool           `json:"strict"`
	}
	if err := json.Unmarshal(t.Function, &f); err != nil || f.Name == "" {
		return losses, fmt.Errorf("chat request: tool function without a name")
	}
	losses = chatUnreadFields(t.Function, "tool function", chatClientFunctionFields, losses)
	if f.Strict != nil && *f.Strict {
		losses = addLoss(losses, "strict tool schemas", false)
	}
	schema := f.Parameters
	if isNullish(schema) {
		schema = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	r.Tools = append(r.Tools, Tool{Name: f.Name, Description: f.Description, Schema: schema})
	return losses, nil
}

func chatClientToolChoice(raw json.RawMessage, losses []Loss) (ToolChoice, []Loss, error) {
	if tc, done, err := openAIChoiceString(raw, "chat"); done {
		return tc, losses, err
	}
	var tc struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &tc); err != nil {
		return ToolChoice{}, losses, fmt.Errorf("chat request: tool_choice: %w", err)
	}
	if tc.Type == "function" && tc.Function.Name != "" {
		return ToolChoice{Mode: ChoiceTool, Name: tc.Function.Name}, losses, nil
	}
	// allowed_tools, custom: a choice no other format states.
	return ToolChoice{}, addLoss(losses, "tool_choice "+tc.Type, true), nil
}
