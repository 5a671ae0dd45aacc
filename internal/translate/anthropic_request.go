package translate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
)

// Anthropic Messages requests: decoding a client's, encoding a target's.

type anthropicSource struct {
	Type      string          `json:"type"`
	MediaType string          `json:"media_type,omitempty"`
	Data      string          `json:"data,omitempty"`
	URL       string          `json:"url,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
}

type anthropicBlock struct {
	Type         string           `json:"type"`
	Text         *string          `json:"text,omitempty"`
	Source       *anthropicSource `json:"source,omitempty"`
	ID           string           `json:"id,omitempty"`
	Name         string           `json:"name,omitempty"`
	Input        json.RawMessage  `json:"input,omitempty"`
	ToolUseID    string           `json:"tool_use_id,omitempty"`
	Content      json.RawMessage  `json:"content,omitempty"`
	IsError      bool             `json:"is_error,omitempty"`
	Thinking     *string          `json:"thinking,omitempty"`
	Signature    string           `json:"signature,omitempty"`
	Data         string           `json:"data,omitempty"`
	CacheControl json.RawMessage  `json:"cache_control,omitempty"`
	Title        string           `json:"title,omitempty"`
	Citations    json.RawMessage  `json:"citations,omitempty"`
}

type anthropicTool struct {
	Type         string          `json:"type,omitempty"`
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

type anthropicToolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name,omitempty"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use,omitempty"`
}

// anthropicKnown are the request fields the decoder reads; any other field
// is a material loss, never dropped unseen.
var anthropicKnown = map[string]bool{
	"model": true, "messages": true, "system": true, "max_tokens": true, "stop_sequences": true,
	"stream": true, "temperature": true, "top_p": true, "top_k": true, "tools": true,
	"tool_choice": true, "metadata": true, "thinking": true, "service_tier": true,
	"context_management": true, "output_config": true,
}

// anthropicAdvisory are the fields no other format carries that change how
// a request is served, not what it asks for.
var anthropicAdvisory = map[string]string{
	"metadata":     "metadata",
	"service_tier": "service_tier",
	"thinking":     "extended thinking",
	// Server-side clearing of old tool results: without it the target sees
	// more context, never other content.
	"context_management": "context_management",
}

// outputConfigLosses classifies output_config: its effort changes how
// much the model thinks, not what is asked (advisory); anything else (a
// structured output format) is material.
func outputConfigLosses(raw json.RawMessage, losses []Loss) []Loss {
	if isNullish(raw) {
		return losses
	}
	var cfg map[string]json.RawMessage
	if json.Unmarshal(raw, &cfg) != nil {
		return addLoss(losses, "field output_config", true)
	}
	for _, k := range slices.Sorted(maps.Keys(cfg)) {
		if !isNullish(cfg[k]) {
			losses = addLoss(losses, "output_config."+k, k != "effort")
		}
	}
	return losses
}

// decodeAnthropicRequest reads a Messages request into the intermediate
// form, with the losses of fields no other format has.
func decodeAnthropicRequest(body []byte) (*Request, []Loss, error) {
	var buf [16]member
	top, err := objectMembers(body, buf[:0])
	if err != nil {
		return nil, nil, fmt.Errorf("anthropic request: %w", err)
	}
	var losses []Loss
	for _, m := range top {
		switch k := string(m.key); {
		case !anthropicKnown[k]:
			losses = addLoss(losses, "field "+k, true)
		case k == "output_config":
			losses = outputConfigLosses(m.val, losses)
		case anthropicAdvisory[k] != "" && !isNullish(m.val):
			if k == "thinking" && bytes.Contains(m.val, []byte(`"disabled"`)) {
				continue
			}
			losses = addLoss(losses, anthropicAdvisory[k], false)
		}
	}
	var in struct {
		Model         string            `json:"model"`
		Messages      []json.RawMessage `json:"messages"`
		System        json.RawMessage   `json:"system"`
		MaxTokens     int               `json:"max_tokens"`
		StopSequences []string          `json:"stop_sequences"`
		Stream        bool              `json:"stream"`
		Temperature   *float64          `json:"temperature"`
		TopP          *float64          `json:"top_p"`
		TopK          *int              `json:"top_k"`
		Tools         []json.RawMessage `json:"tools"`
		ToolChoice    json.RawMessage   `json:"tool_choice"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, nil, fmt.Errorf("anthropic request: %w", err)
	}
	r := &Request{Model: in.Model, MaxTokens: in.MaxTokens, Stop: in.StopSequences,
		Stream: in.Stream, Temperature: in.Temperature, TopP: in.TopP, TopK: in.TopK}
	if r.System, losses, err = anthropicContent(in.System, losses); err != nil {
		return nil, nil, fmt.Errorf("anthropic request: system: %w", err)
	}
	for i, raw := range in.Messages {
		m, err := decodeAnthropicMessage(raw)
		if err != nil {
			return nil, nil, fmt.Errorf("anthropic request: message %d: %w", i, err)
		}
		if m.Role != "user" && m.Role != "assistant" && m.Role != "system" {
			return nil, nil, fmt.Errorf("anthropic request: message %d: role %q", i, m.Role)
		}
		msg := Message{Role: m.Role}
		if msg.Blocks, losses, err = anthropicContent(m.Content, losses); err != nil {
			return nil, nil, fmt.Errorf("anthropic request: message %d: %w", i, err)
		}
		if m.Role == "system" {
			// A system message in the conversation (Claude Code sends its
			// environment so) joins the system prompt, as a Responses
			// client's developer message does.
			if len(r.Messages) > 0 {
				losses = addLoss(losses, "system message after the conversation began (moved to the system prompt)", false)
			}
			r.System = append(r.System, msg.Blocks...)
			continue
		}
		r.Messages = append(r.Messages, msg)
	}
	losses = prefillLoss(r, "assistant prefill (the other formats answer anew, not from it)", losses)
	for _, raw := range in.Tools {
		var t anthropicTool
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, nil, fmt.Errorf("anthropic request: tool: %w", err)
		}
		if t.Type != "" && t.Type != "custom" {
			losses = addLoss(losses, "server tool "+t.Type, true)
			continue
		}
		losses = unreadFieldLosses(raw, "tool", anthropicToolFields, losses)
		r.Tools = append(r.Tools, Tool{Name: t.Name, Description: t.Description,
			Schema: t.InputSchema, Cache: len(t.CacheControl) > 0})
	}
	if len(in.ToolChoice) > 0 && !isNullish(in.ToolChoice) {
		var tc anthropicToolChoice
		if err := json.Unmarshal(in.ToolChoice, &tc); err != nil {
			return nil, nil, fmt.Errorf("anthropic request: tool_choice: %w", err)
		}
		switch tc.Type {
		case "auto", "any", "none", "tool":
			r.ToolChoice = ToolChoice{Mode: tc.Type, Name: tc.Name, DisableParallel: tc.DisableParallelToolUse}
		default:
			return nil, nil, fmt.Errorf("anthropic request: tool_choice type %q", tc.Type)
		}
	}
	return r, losses, nil
}

// anthropicMessageIn is a request message's role and content.
type anthropicMessageIn struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// decodeAnthropicMessage is json.Unmarshal of a message (raw, from the
// decoded body: valid JSON). An object whose role is a plain string is
// walked once (the role's spelling matched as Unmarshal matches a field
// name, the last of each member kept as it keeps it, the content not
// copied); anything else is unmarshalled.
func decodeAnthropicMessage(raw json.RawMessage) (m anthropicMessageIn, err error) {
	it, ok := jsonscan.Open(raw, 0, 0)
	var role []byte
	for ok = ok && it.IsObject(); ok && it.Next(); {
		switch {
		case it.KeyFold("role"):
			role = it.Value()
			ok = plainString(role)
		case it.KeyFold("content"):
			m.Content = it.Value()
		}
	}
	if !ok || !it.End() {
		var u anthropicMessageIn // not m: only this path's message goes to the heap
		err = json.Unmarshal(raw, &u)
		return u, err
	}
	if role == nil {
		return m, nil
	}
	switch r := role[1 : len(role)-1]; string(r) { // the roles read: no copy
	case "user":
		m.Role = "user"
	case "assistant":
		m.Role = "assistant"
	case "system":
		m.Role = "system"
	default:
		m.Role = string(r)
	}
	return m, nil
}

func isNullish(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) == 0 || string(v) == "null"
}

// anthropicContent reads a content value: a string, or an array of blocks.
func anthropicContent(raw json.RawMessage, losses []Loss) ([]Block, []Loss, error) {
	if blocks, isString, err := stringContent(raw); isString {
		return blocks, losses, err
	}
	var in []json.RawMessage
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, losses, err
	}
	out := make([]Block, 0, len(in))
	for _, rawBlock := range in {
		var b anthropicBlock
		if err := json.Unmarshal(rawBlock, &b); err != nil {
			return nil, losses, err
		}
		if known := anthropicBlockFields[b.Type]; known != nil {
			losses = unreadFieldLosses(rawBlock, b.Type+" block", known, losses)
		}
		blk, ok, err := anthropicBlockIn(b, &losses)
		if err != nil {
			return nil, losses, err
		}
		if ok {
			if len(b.CacheControl) > 0 {
				blk.Cache = true
			}
			out = append(out, blk)
		}
	}
	return out, losses, nil
}

func anthropicBlockIn(b anthropicBlock, losses *[]Loss) (Block, bool, error) {
	switch b.Type {
	case "text":
		if b.Text == nil {
			return Block{}, false, fmt.Errorf("text block without text")
		}
		if !isNullish(b.Citations) {
			*losses = addLoss(*losses, "citations", false)
		}
		return Block{Kind: KindText, Text: *b.Text}, true, nil
	case "image", "document":
		kind := KindImage
		if b.Type == "document" {
			kind = KindDocument
		}
		if b.Source == nil {
			return Block{}, false, fmt.Errorf("%s block without source", b.Type)
		}
		blk := Block{Kind: kind, Text: b.Title}
		switch b.Source.Type {
		case "base64":
			blk.MediaType, blk.Data = b.Source.MediaType, b.Source.Data
		case "url":
			blk.URL = b.Source.URL
		case "text":
			blk.MediaType, blk.Data = "text/plain", b.Source.Data
		default:
			*losses = addLoss(*losses, b.Type+" source "+b.Source.Type, true)
			return Block{}, false, nil
		}
		return blk, true, nil
	case "tool_use":
		if b.ID == "" || b.Name == "" {
			return Block{}, false, fmt.Errorf("tool_use block without id or name")
		}
		args := b.Input
		if isNullish(args) {
			args = json.RawMessage(`{}`)
		}
		if args[0] != '{' {
			return Block{}, false, fmt.Errorf("tool_use %s: input is not an object", b.ID)
		}
		return Block{Kind: KindToolCall, ToolID: b.ID, ToolName: b.Name, Args: compactJSON(args)}, true, nil
	case "tool_result":
		if b.ToolUseID == "" {
			return Block{}, false, fmt.Errorf("tool_result block without tool_use_id")
		}
		var result []Block
		var err error
		if result, *losses, err = anthropicContent(b.Content, *losses); err != nil {
			return Block{}, false, fmt.Errorf("tool_result %s: %w", b.ToolUseID, err)
		}
		return Block{Kind: KindToolResult, ToolID: b.ToolUseID, Result: result, IsError: b.IsError}, true, nil
	case "thinking":
		if b.Thinking == nil {
			return Block{}, false, fmt.Errorf("thinking block without thinking")
		}
		blk := Block{Kind: KindReasoning, Text: *b.Thinking}
		if b.Signature != "" {
			blk.Opaque = &Opaque{Origin: Anthropic, Kind: "signature", Value: b.Signature}
		}
		return blk, true, nil
	case "redacted_thinking":
		return Block{Kind: KindReasoning, Opaque: &Opaque{Origin: Anthropic, Kind: "redacted_thinking", Value: b.Data}}, true, nil
	case "":
		return Block{}, false, fmt.Errorf("content block without type")
	}
	// server_tool_use, web_search_tool_result, search_result, container_upload, ...
	*losses = addLoss(*losses, "content block "+b.Type, true)
	return Block{}, false, nil
}

func compactJSON(v json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		return v
	}
	return b.Bytes()
}
