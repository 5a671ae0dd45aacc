package translate

import (
	"encoding/json"
	"fmt"
	"strings"
)

// OpenAI Responses requests, decoded into the intermediate form.

// DefaultMaxTokens is the max_tokens sent to a target that requires one
// (Anthropic) when the client stated none (Codex never does); named as an
// advisory loss. 32000 is the output limit of Claude Opus 4.x, and below
// Sonnet's and Haiku 4.5's.
var DefaultMaxTokens = 32000

// responsesFields classifies the request fields: carried, advisory (how
// it is served) or material (what it asks for). A field not listed is
// material: never dropped unseen.
var responsesFields = map[string]string{
	"model": "carried", "input": "carried", "instructions": "carried", "tools": "carried",
	"tool_choice": "carried", "max_output_tokens": "carried", "temperature": "carried",
	"top_p": "carried", "stream": "carried", "parallel_tool_calls": "carried", "store": "carried",
	"previous_response_id": "carried", "text": "carried", "include": "carried", "top_logprobs": "carried",
	"background": "carried", "stream_options": "carried",
	"metadata": "advisory", "user": "advisory", "safety_identifier": "advisory",
	"prompt_cache_key": "advisory", "prompt_cache_retention": "advisory", "service_tier": "advisory",
	"reasoning": "advisory", "truncation": "advisory",
	"client_metadata": "advisory", // Codex's ids of its installation, session and turn
	"conversation":    "material", "prompt": "material", "max_tool_calls": "material",
}

// responsesIncludeAdvisory are the `include` values a translated answer
// may go without: outputs of hosted tools (refused themselves), input
// echoed back, the reasoning state that stays with OpenAI. The answer's
// logprobs are content the client asks for and Anthropic cannot produce
// (the client got "logprobs":[] in a 200): material, as top_logprobs is,
// and so is a value not listed.
var responsesIncludeAdvisory = map[string]bool{
	"file_search_call.results": true, "web_search_call.results": true,
	"web_search_call.action.sources": true, "code_interpreter_call.outputs": true,
	"computer_call_output.output.image_url": true, "message.input_image.image_url": true,
	"reasoning.encrypted_content": true,
}

type responsesPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL string `json:"image_url"`
	FileID   string `json:"file_id"`
	FileData string `json:"file_data"`
	Filename string `json:"filename"`
	Refusal  string `json:"refusal"`
}

type responsesItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments *string         `json:"arguments"`
	Output    json.RawMessage `json:"output"`
	Encrypted string          `json:"encrypted_content"`
	Input     *string         `json:"input"`
	Summary   []responsesPart `json:"summary"`
}

func decodeResponsesRequest(body []byte) (*Request, []Loss, error) {
	var buf [16]member
	top, err := objectMembers(body, buf[:0])
	if err != nil {
		return nil, nil, fmt.Errorf("responses request: %w", err)
	}
	losses := fieldLosses(nil, top, responsesFields, isNullish)
	var in struct {
		Model              string            `json:"model"`
		Input              json.RawMessage   `json:"input"`
		Instructions       *string           `json:"instructions"`
		Tools              []json.RawMessage `json:"tools"`
		ToolChoice         json.RawMessage   `json:"tool_choice"`
		MaxOutputTokens    *int              `json:"max_output_tokens"`
		Temperature        *float64          `json:"temperature"`
		TopP               *float64          `json:"top_p"`
		Stream             bool              `json:"stream"`
		ParallelToolCalls  *bool             `json:"parallel_tool_calls"`
		Store              *bool             `json:"store"`
		PreviousResponseID *string           `json:"previous_response_id"`
		Text               *struct {
			Format *struct {
				Type string `json:"type"`
			} `json:"format"`
			Verbosity *string `json:"verbosity"`
		} `json:"text"`
		Include     []string `json:"include"`
		TopLogprobs *int     `json:"top_logprobs"`
		Background  *bool    `json:"background"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, nil, fmt.Errorf("responses request: %w", err)
	}
	if in.PreviousResponseID != nil && *in.PreviousResponseID != "" {
		losses = addLoss(losses, "previous_response_id", true)
	}
	if in.Store == nil || *in.Store {
		losses = addLoss(losses, "store (the response is not kept for later retrieval)", false)
	}
	if in.Text != nil && in.Text.Format != nil && in.Text.Format.Type != "text" {
		losses = addLoss(losses, "text.format "+in.Text.Format.Type, true)
	}
	if in.Text != nil && in.Text.Verbosity != nil {
		losses = addLoss(losses, "text.verbosity", false)
	}
	for _, inc := range in.Include {
		losses = addLoss(losses, "include "+inc, !responsesIncludeAdvisory[inc])
	}
	if in.TopLogprobs != nil && *in.TopLogprobs > 0 {
		losses = addLoss(losses, "top_logprobs", true)
	}
	if in.Background != nil && *in.Background {
		losses = addLoss(losses, "background", true)
	}
	r := &Request{Model: in.Model, Temperature: in.Temperature, TopP: in.TopP, Stream: in.Stream}
	if in.MaxOutputTokens != nil {
		r.MaxTokens = *in.MaxOutputTokens
	}
	if in.Instructions != nil && *in.Instructions != "" {
		r.System = append(r.System, Block{Kind: KindText, Text: *in.Instructions})
	}
	if losses, err = responsesInput(r, in.Input, losses); err != nil {
		return nil, nil, err
	}
	losses = prefillLoss(r, assistantLastLoss, losses)
	for _, raw := range in.Tools {
		var t struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
			Strict      *bool           `json:"strict"`
			Format      *struct {
				Type       string `json:"type"`
				Syntax     string `json:"syntax"`
				Definition string `json:"definition"`
			} `json:"format"`
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, nil, fmt.Errorf("responses request: tool: %w", err)
		}
		if t.Type == "custom" {
			tool := Tool{Name: t.Name, Description: t.Description, Schema: customToolSchema, Custom: true}
			if f := t.Format; f != nil && f.Type == "grammar" {
				// The target cannot constrain the input: it is told the grammar.
				tool.Description += "\n\nThe input follows this " + f.Syntax + " grammar:\n" + f.Definition
				losses = addLoss(losses, "grammar of custom tool "+t.Name+" (told, not enforced)", false)
			} else if f != nil && f.Type != "text" {
				losses = addLoss(losses, "custom tool format "+f.Type, true)
			}
			r.Tools = append(r.Tools, tool)
			continue
		}
		if t.Type != "function" {
			losses = addLoss(losses, "hosted tool "+t.Type, true)
			continue
		}
		losses = unreadFieldLosses(raw, "function tool", responsesToolFields, losses)
		if t.Strict != nil && *t.Strict {
			losses = addLoss(losses, "strict function schemas", false)
		}
		schema := t.Parameters
		if isNullish(schema) {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		r.Tools = append(r.Tools, Tool{Name: t.Name, Description: t.Description, Schema: schema})
	}
	if r.ToolChoice, losses, err = responsesToolChoice(in.ToolChoice, losses); err != nil {
		return nil, nil, err
	}
	if in.ParallelToolCalls != nil && !*in.ParallelToolCalls {
		r.ToolChoice.DisableParallel = true
	}
	return r, losses, nil
}

func responsesToolChoice(raw json.RawMessage, losses []Loss) (ToolChoice, []Loss, error) {
	if tc, done, err := openAIChoiceString(raw, "responses"); done {
		return tc, losses, err
	}
	var tc struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if err := json.Unmarshal(raw, &tc); err != nil {
		return ToolChoice{}, losses, fmt.Errorf("responses request: tool_choice: %w", err)
	}
	if (tc.Type == "function" || tc.Type == "custom") && tc.Name != "" {
		return ToolChoice{Mode: ChoiceTool, Name: tc.Name}, losses, nil
	}
	return ToolChoice{}, addLoss(losses, "tool_choice "+tc.Type, true), nil
}

// responsesInput turns the input items into turns: consecutive items of
// one role share a turn, as Anthropic wants tool results in the user turn
// right after the calls.
func responsesInput(r *Request, raw json.RawMessage, losses []Loss) ([]Loss, error) {
	if isNullish(raw) {
		return losses, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return losses, fmt.Errorf("responses request: input: %w", err)
		}
		r.Messages = append(r.Messages, Message{Role: "user", Blocks: []Block{{Kind: KindText, Text: s}}})
		return losses, nil
	}
	var items []responsesItem
	if err := json.Unmarshal(raw, &items); err != nil {
		return losses, fmt.Errorf("responses request: input: %w", err)
	}
	add := func(role string, b ...Block) {
		if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == role {
			r.Messages[n-1].Blocks = append(r.Messages[n-1].Blocks, b...)
			return
		}
		r.Messages = append(r.Messages, Message{Role: role, Blocks: b})
	}
	for i, it := range items {
		typ := it.Type
		if typ == "" && it.Role != "" {
			typ = "message"
		}
		switch typ {
		case "message":
			blocks, more, err := responsesContent(it.Content, losses)
			if err != nil {
				return losses, fmt.Errorf("responses request: input %d: %w", i, err)
			}
			losses = more
			switch it.Role {
			case "user", "assistant":
				add(it.Role, blocks...)
			case "system", "developer":
				if len(r.Messages) > 0 {
					losses = addLoss(losses, it.Role+" message after the conversation began (moved to the system prompt)", false)
				}
				r.System = append(r.System, blocks...)
			default:
				return losses, fmt.Errorf("responses request: input %d: role %q", i, it.Role)
			}
		case "function_call":
			args := "{}"
			if it.Arguments != nil && strings.TrimSpace(*it.Arguments) != "" {
				args = *it.Arguments
			}
			if err := checkArgs([]byte(args)); err != nil {
				return losses, fmt.Errorf("responses request: input %d: function_call %s: %w", i, it.CallID, err)
			}
			if it.CallID == "" || it.Name == "" {
				return losses, fmt.Errorf("responses request: input %d: function_call without call_id or name", i)
			}
			add("assistant", Block{Kind: KindToolCall, ToolID: it.CallID, ToolName: it.Name, Args: compactJSON(json.RawMessage(args))})
		case "custom_tool_call":
			if it.CallID == "" || it.Name == "" || it.Input == nil {
				return losses, fmt.Errorf("responses request: input %d: custom_tool_call without call_id, name or input", i)
			}
			args, _ := json.Marshal(map[string]string{"input": *it.Input})
			add("assistant", Block{Kind: KindToolCall, ToolID: it.CallID, ToolName: it.Name, Args: args})
		case "function_call_output", "custom_tool_call_output":
			if it.CallID == "" {
				return losses, fmt.Errorf("responses request: input %d: function_call_output without call_id", i)
			}
			result, more, err := responsesContent(it.Output, losses)
			if err != nil {
				return losses, fmt.Errorf("responses request: input %d: %w", i, err)
			}
			losses = more
			add("user", Block{Kind: KindToolResult, ToolID: it.CallID, Result: result})
		case "reasoning":
			var text strings.Builder
			for _, s := range it.Summary {
				text.WriteString(s.Text)
			}
			b := Block{Kind: KindReasoning, Text: text.String()}
			if it.Encrypted != "" {
				b.Opaque = &Opaque{Origin: Responses, Kind: "encrypted_content", Value: it.Encrypted}
			}
			add("assistant", b)
		case "item_reference":
			losses = addLoss(losses, "item_reference (items stored at OpenAI)", true)
		default:
			losses = addLoss(losses, "input item "+typ, true)
		}
	}
	return losses, nil
}

// responsesContent reads a message's content or a call's output: a
// string, or an array of parts.
func responsesContent(raw json.RawMessage, losses []Loss) ([]Block, []Loss, error) {
	if blocks, isString, err := stringContent(raw); isString {
		return blocks, losses, err
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(raw, &raws); err != nil {
		return nil, losses, err
	}
	var out []Block
	for _, rawPart := range raws {
		var p responsesPart
		if err := json.Unmarshal(rawPart, &p); err != nil {
			return nil, losses, err
		}
		if known := responsesPartFields[p.Type]; known != nil {
			losses = unreadFieldLosses(rawPart, p.Type+" part", known, losses)
		}
		switch p.Type {
		case "input_text", "output_text", "text":
			out = append(out, Block{Kind: KindText, Text: p.Text})
		case "refusal":
			out = append(out, Block{Kind: KindText, Text: p.Refusal})
		case "input_image":
			if p.ImageURL == "" {
				losses = addLoss(losses, "input_image by file_id", true)
				continue
			}
			out = append(out, imageFromURL(p.ImageURL))
		case "input_file":
			// An inline PDF is an Anthropic document; a file stored at
			// OpenAI (file_id), by URL or of another type is not carried.
			doc := imageFromURL(p.FileData)
			if p.FileData == "" || doc.MediaType != "application/pdf" || p.FileID != "" {
				losses = addLoss(losses, "content part input_file", true)
				continue
			}
			doc.Kind, doc.Text = KindDocument, p.Filename
			out = append(out, doc)
		default:
			losses = addLoss(losses, "content part "+p.Type, true)
		}
	}
	return out, losses, nil
}

// imageFromURL reads a data: URL into base64 data, or keeps a URL.
func imageFromURL(url string) Block {
	if rest, ok := strings.CutPrefix(url, "data:"); ok {
		if meta, data, ok := strings.Cut(rest, ","); ok {
			if mt, ok := strings.CutSuffix(meta, ";base64"); ok {
				return Block{Kind: KindImage, MediaType: mt, Data: data}
			}
		}
	}
	return Block{Kind: KindImage, URL: url}
}
