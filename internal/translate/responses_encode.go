package translate

import (
	"encoding/json"
	"fmt"
	"strings"
)

// OpenAI Responses requests, encoded from the intermediate form. The
// request is sent with store false: nothing of a translated conversation
// is kept at the provider, and no item refers to stored state.

type responsesInItem struct {
	Type      string `json:"type"`
	Role      string `json:"role,omitempty"`
	Content   any    `json:"content,omitempty"`
	CallID    string `json:"call_id,omitempty"`
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
	Output    any    `json:"output,omitempty"`
}

type responsesInPart struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	ImageURL string `json:"image_url,omitempty"`
	Detail   string `json:"detail,omitempty"`
	FileData string `json:"file_data,omitempty"`
	Filename string `json:"filename,omitempty"`
}

type responsesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      bool            `json:"strict"`
}

type responsesRequest struct {
	Model             string            `json:"model"`
	Instructions      string            `json:"instructions,omitempty"`
	Input             []responsesInItem `json:"input"`
	Tools             []responsesTool   `json:"tools,omitempty"`
	ToolChoice        any               `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool             `json:"parallel_tool_calls,omitempty"`
	MaxOutputTokens   int               `json:"max_output_tokens,omitempty"`
	Temperature       *float64          `json:"temperature,omitempty"`
	TopP              *float64          `json:"top_p,omitempty"`
	Stream            bool              `json:"stream,omitempty"`
	Store             bool              `json:"store"`
	Text              *responsesText    `json:"text,omitempty"`
}

// responsesText carries structured output (text.format).
type responsesText struct {
	Format map[string]any `json:"format"`
}

// responsesMinOutput is the least max_output_tokens the Responses API
// accepts.
const responsesMinOutput = 16

func encodeResponsesRequest(r *Request, model string) ([]byte, []Loss, error) {
	var losses []Loss
	out := responsesRequest{Model: model, Input: []responsesInItem{}, MaxOutputTokens: r.MaxTokens,
		Temperature: r.Temperature, TopP: r.TopP, Stream: r.Stream}
	if r.TopK != nil {
		losses = addLoss(losses, "top_k", false)
	}
	if r.MaxTokens > 0 && r.MaxTokens < responsesMinOutput {
		// Raised, the answer could be longer than asked; sent, a 400.
		losses = addLoss(losses, fmt.Sprintf("max_tokens below %d (the Responses minimum)", responsesMinOutput), true)
	}
	if len(r.Stop) > 0 {
		losses = addLoss(losses, "stop_sequences", true)
	}
	if rf := r.ResponseFormat; rf != nil {
		// text.format: Chat's response_format with json_schema's fields
		// at its top level.
		format := map[string]any{"type": rf.Type}
		if rf.Type == "json_schema" {
			format = rf.jsonSchema(format)
		}
		out.Text = &responsesText{Format: format}
	}
	losses = samplingLosses(r, losses)
	var sys []string
	for _, b := range r.System {
		losses = cacheLoss(losses, b.Cache)
		if b.Kind != KindText {
			losses = addLoss(losses, "non-text system content", true)
			continue
		}
		sys = append(sys, b.Text)
	}
	out.Instructions = strings.Join(sys, "\n\n")
	for _, m := range r.Messages {
		var items []responsesInItem
		items, losses = responsesItemsFor(m, losses)
		out.Input = append(out.Input, items...)
	}
	for _, t := range r.Tools {
		losses = cacheLoss(losses, t.Cache)
		losses = toolNameLoss(losses, t.Name)
		params := t.Schema
		if isNullish(params) {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		out.Tools = append(out.Tools, responsesTool{Type: "function", Name: t.Name, Description: t.Description, Parameters: params})
	}
	var err error
	out.ToolChoice, err = openAIToolChoice(r.ToolChoice, len(out.Tools), "Responses", func(name string) any {
		return map[string]string{"type": "function", "name": name}
	})
	if err != nil {
		return nil, nil, err
	}
	out.ParallelToolCalls = openAIParallelToolCalls(r.ToolChoice, len(out.Tools))
	body, err := json.Marshal(out)
	return body, losses, err
}

// responsesItemsFor turns one turn into input items, in the turn's order
// (Responses items are ordered, so text and calls keep their places).
func responsesItemsFor(m Message, losses []Loss) ([]responsesInItem, []Loss) {
	var items []responsesInItem
	var parts []responsesInPart
	flush := func() {
		if len(parts) > 0 {
			items = append(items, responsesInItem{Type: "message", Role: m.Role, Content: parts})
			parts = nil
		}
	}
	textType := "input_text"
	if m.Role == "assistant" {
		textType = "output_text"
	}
	for _, b := range m.Blocks {
		losses = cacheLoss(losses, b.Cache)
		switch b.Kind {
		case KindText:
			parts = append(parts, responsesInPart{Type: textType, Text: b.Text})
		case KindImage, KindDocument:
			part, ok := responsesMedia(b)
			if !ok || m.Role != "user" {
				losses = addLoss(losses, mediaLoss(b, m.Role), true)
				continue
			}
			parts = append(parts, part)
		case KindToolCall:
			flush()
			items = append(items, responsesInItem{Type: "function_call", CallID: b.ToolID, Name: b.ToolName, Arguments: string(b.Args)})
		case KindToolResult:
			flush()
			var out []responsesInPart
			onlyText := true
			for _, rb := range b.Result {
				losses = cacheLoss(losses, rb.Cache)
				if rb.Kind == KindText {
					out = append(out, responsesInPart{Type: "input_text", Text: rb.Text})
					continue
				}
				part, ok := responsesMedia(rb)
				if !ok {
					losses = addLoss(losses, "document other than an inline PDF in a tool result", true)
					continue
				}
				onlyText = false
				out = append(out, part)
			}
			if b.IsError {
				losses = addLoss(losses, "tool_result is_error flag", false)
			}
			item := responsesInItem{Type: "function_call_output", CallID: b.ToolID, Output: out}
			if onlyText {
				texts := make([]string, 0, len(out))
				for _, p := range out {
					if p.Text != "" {
						texts = append(texts, p.Text)
					}
				}
				item.Output = strings.Join(texts, toolResultSep)
			}
			items = append(items, item)
		case KindReasoning:
			losses = reasoningLoss(losses, b, Responses)
		}
	}
	flush()
	return items, losses
}

// responsesMedia is an image or a PDF as a Responses input part.
func responsesMedia(b Block) (responsesInPart, bool) {
	url := b.URL
	if url == "" {
		url = "data:" + b.MediaType + ";base64," + b.Data
	}
	switch {
	case b.Kind == KindImage:
		return responsesInPart{Type: "input_image", ImageURL: url, Detail: "auto"}, true
	case b.MediaType == "application/pdf" && b.URL == "":
		name := b.Text
		if name == "" {
			name = "document.pdf"
		}
		return responsesInPart{Type: "input_file", FileData: url, Filename: name}, true
	}
	return responsesInPart{}, false
}

func mediaLoss(b Block, role string) string {
	if role != "user" {
		return "image or document in an assistant turn"
	}
	return "document other than an inline PDF"
}
