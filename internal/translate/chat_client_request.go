package translate

import (
	"encoding/json"
	"fmt"
	"strings"
)

// OpenAI Chat Completions requests of a Chat client, decoded into the
// intermediate form (chat_request.go encodes a Chat target's).

// chatClientFields classifies the request fields: carried (read below,
// where a value may still be a loss: n > 1, logprobs, modalities other
// than text), advisory (how the request is served) or material (what it
// asks for). A field not listed is material: never dropped unseen.
var chatClientFields = map[string]string{
	"model": "carried", "messages": "carried", "max_completion_tokens": "carried", "max_tokens": "carried",
	"stop": "carried", "stream": "carried", "stream_options": "carried", "temperature": "carried",
	"top_p": "carried", "tools": "carried", "tool_choice": "carried", "parallel_tool_calls": "carried",
	"response_format": "carried", "seed": "carried", "frequency_penalty": "carried", "presence_penalty": "carried",
	"n": "carried", "logprobs": "carried", "top_logprobs": "carried", "modalities": "carried",
	"user": "advisory", "store": "advisory", "metadata": "advisory", "service_tier": "advisory",
	"prompt_cache_key": "advisory", "prompt_cache_retention": "advisory", "safety_identifier": "advisory",
	"reasoning_effort": "advisory", "verbosity": "advisory",
	// Content the target cannot produce or constraints it cannot honour.
	"audio": "material", "prediction": "material", "web_search_options": "material", "logit_bias": "material",
	"functions": "material", "function_call": "material",
}

// chatClientMessageFields are the fields each message role carries (role
// aside). name is read to be named as a loss.
var chatClientMessageFields = map[string]map[string]bool{
	"system":    {"content": true, "name": true},
	"developer": {"content": true, "name": true},
	"user":      {"content": true, "name": true},
	"assistant": {"content": true, "name": true, "tool_calls": true, "refusal": true, "reasoning_content": true},
	"tool":      {"content": true, "tool_call_id": true},
}

// chatClientPartFields are the fields each content part carries.
var chatClientPartFields = map[string]map[string]bool{
	"text":      {"text": true},
	"refusal":   {"refusal": true},
	"image_url": {"image_url": true},
	"file":      {"file": true},
}

var chatClientToolCallFields = map[string]bool{"id": true, "type": true, "function": true, "extra_content": true}

var chatClientFunctionFields = map[string]bool{"name": true, "description": true, "parameters": true, "strict": true}

// chatClientOptions is what the answers need of the request: whether the
// client asked for the usage chunk of a stream.
type chatClientOptions struct {
	includeUsage bool
}

type chatClientPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL *struct {
		URL    string `json:"url"`
		Detail string `json:"detail"`
	} `json:"image_url"`
	File *struct {
		FileData string `json:"file_data"`
		FileID   string `json:"file_id"`
		Filename string `json:"filename"`
	} `json:"file"`
}

type chatClientToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
	ExtraContent struct {
		Google struct {
			ThoughtSignature string `json:"thought_signature"`
		} `json:"google"`
	} `json:"extra_content"`
}

// decodeChatClientRequest reads a Chat Completions request into the
// intermediate form, with the losses no target could carry.
func decodeChatClientRequest(body []byte) (*Request, chatClientOptions, []Loss, error) {
	var opts chatClientOptions
	var buf [16]member
	top, err := objectMembers(body, buf[:0])
	if err != nil {
		return nil, opts, nil, fmt.Errorf("chat request: %w", err)
	}
	losses := fieldLosses(nil, top, chatClientFields, unsetCompact)
	var in struct {
		Model               string            `json:"model"`
		Messages            []json.RawMessage `json:"messages"`
		MaxCompletionTokens *int              `json:"max_completion_tokens"`
		MaxTokens           *int              `json:"max_tokens"`
		Stop                json.RawMessage   `json:"stop"`
		Stream              bool              `json:"stream"`
		StreamOptions       json.RawMessage   `json:"stream_options"`
		Temperature         *float64          `json:"temperature"`
		TopP                *float64          `json:"top_p"`
		Tools               []json.RawMessage `json:"tools"`
		ToolChoice          json.RawMessage   `json:"tool_choice"`
		ParallelToolCalls   *bool             `json:"parallel_tool_calls"`
		ResponseFormat      json.RawMessage   `json:"response_format"`
		Seed                *int64            `json:"seed"`
		FrequencyPenalty    *float64          `json:"frequency_penalty"`
		PresencePenalty     *float64          `json:"presence_penalty"`
		N                   *int              `json:"n"`
		Logprobs            *bool             `json:"logprobs"`
		TopLogprobs         *int              `json:"top_logprobs"`
		Modalities          []string          `json:"modalities"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, opts, nil, fmt.Errorf("chat request: %w", err)
	}
	if in.N != nil && *in.N > 1 {
		losses = addLoss(losses, "n > 1 (several choices)", true)
	}
	if in.Logprobs != nil && *in.Logprobs {
		losses = addLoss(losses, "logprobs", true)
	}
	if in.TopLogprobs != nil && *in.TopLogprobs > 0 {
		losses = addLoss(losses, "top_logprobs", true)
	}
	for _, m := range in.Modalities {
		if m != "text" {
			losses = addLoss(losses, "modality "+m, true)
		}
	}
	if opts, losses, err = chatStreamOptions(in.StreamOptions, losses); err != nil {
		return nil, opts, nil, err
	}
	r := &Request{Model: in.Model, Temperature: in.Temperature, TopP: in.TopP, Stream: in.Stream,
		Seed: in.Seed, FrequencyPenalty: in.FrequencyPenalty, PresencePenalty: in.PresencePenalty}
	switch {
	case in.MaxCompletionTokens != nil:
		r.MaxTokens = *in.MaxCompletionTokens
	case in.MaxTokens != nil:
		r.MaxTokens = *in.MaxTokens
	}
	if r.Stop, err = chatStopSequences(in.Stop); err != nil {
		return nil, opts, nil, err
	}
	if r.ResponseFormat, err = chatResponseFormat(in.ResponseFormat); err != nil {
		return nil, opts, nil, err
	}
	for i, raw := range in.Messages {
		if losses, err = chatClientMessage(r, raw, losses); err != nil {
			return nil, opts, nil, fmt.Errorf("chat request: message %d: %w", i, err)
		}
	}
	for _, raw := range in.Tools {
		if losses, err = chatClientTool(r, raw, losses); err != nil {
			return nil, opts, nil, err
		}
	}
	if r.ToolChoice, losses, err = chatClientToolChoice(in.ToolChoice, losses); err != nil {
		return nil, opts, nil, err
	}
	if in.ParallelToolCalls != nil && !*in.ParallelToolCalls {
		r.ToolChoice.DisableParallel = true
	}
	return r, opts, losses, nil
}

// chatStreamOptions reads stream_options: include_usage is carried (the
// answer then ends with the usage chunk); include_obfuscation (OpenAI's
// padding of stream chunks) changes how it is served; anything else is
// material.
func chatStreamOptions(raw json.RawMessage, losses []Loss) (chatClientOptions, []Loss, error) {
	var opts chatClientOptions
	if isNullish(raw) {
		return opts, losses, nil
	}
	var buf [4]member
	so, err := objectMembers(raw, buf[:0])
	if err != nil {
		return opts, losses, fmt.Errorf("chat request: stream_options: %w", err)
	}
	for _, m := range so {
		// A member's value has no spaces around it: only true compacts
		// to true.
		switch v := m.val; string(m.key) {
		case "include_usage":
			opts.includeUsage = string(v) == "true"
		case "include_obfuscation":
			if string(v) == "true" {
				losses = addLoss(losses, "stream_options.include_obfuscation", false)
			}
		default:
			if !unsetCompact(v) {
				losses = addLoss(losses, "stream_options."+string(m.key), true)
			}
		}
	}
	return opts, losses, nil
}

// chatClientMessage adds one message to r: system and developer messages
// join the system prompt, tool messages are tool results of a user turn,
// consecutive messages of one role share a turn.
func chatClientMessage(r *Request, raw json.RawMessage, losses []Loss) ([]Loss, error) {
	var m struct {
		Role             string            `json:"role"`
		Content          json.RawMessage   `json:"content"`
		ToolCalls        []json.RawMessage `json:"tool_calls"`
		ToolCallID       string            `json:"tool_call_id"`
		Refusal          *string           `json:"refusal"`
		ReasoningContent *string           `json:"reasoning_content"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return losses, err
	}
	known, ok := chatClientMessageFields[m.Role]
	if !ok {
		if m.Role == "function" {
			return addLoss(losses, "message role function (deprecated functions)", true), nil
		}
		return losses, fmt.Errorf("role %q", m.Role)
	}
	losses = chatUnreadFields(raw, m.Role+" message", known, losses)
	blocks, losses, err := chatClientContent(m.Content, m.Role, losses)
	if err != nil {
		return losses, err
	}
	add := func(role string, b ...Block) {
		if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == role {
			r.Messages[n-1].Blocks = append(r.Messages[n-1].Blocks, b...)
			return
		}
		r.Messages = append(r.Messages, Message{Role: role, Blocks: b})
	}
	switch m.Role {
	case "system", "developer":
		if len(r.Messages) > 0 {
			losses = addLoss(losses, m.Role+" message after the conversation began (moved to the system prompt)", false)
		}
		r.System = append(r.System, blocks...)
	case "user":
		add("user", blocks...)
	case "tool":
		if m.ToolCallID == "" {
			return losses, fmt.Errorf("tool message without tool_call_id")
		}
		add("user", Block{Kind: KindToolResult, ToolID: m.ToolCallID, Result: blocks})
	case "assistant":
		var out []Block
		if m.ReasoningContent != nil && *m.ReasoningContent != "" {
			// Reasoning an OpenAI-compatible server showed (DeepSeek's
			// reasoning_content), sent back by the client: no signature,
			// the encoders name it as reasoning in history.
			out = append(out, Block{Kind: KindReasoning, Text: *m.ReasoningContent})
		}
		out = append(out, blocks...)
		if m.Refusal != nil && *m.Refusal != "" {
			out = append(out, Block{Kind: KindText, Text: *m.Refusal})
		}
		for _, rawCall := range m.ToolCalls {
			b, more, err := chatClientToolCallBlock(rawCall, losses)
			if err != nil {
				return more, err
			}
			losses = more
			out = append(out, b)
		}
		add("assistant", out...)
	}
	return losses, nil
}

// chatUnreadFields names the fields of a message, part or tool that the
// decoder does not read: a participant's name changes how it is served
// (advisory); anything else is material.
func chatUnreadFields(obj json.RawMessage, where string, known map[string]bool, losses []Loss) []Loss {
	var buf [16]member
	fields, err := objectMembers(obj, buf[:0])
	if err != nil {
		return losses
	}
	for _, f := range fields {
		switch k := string(f.key); {
		case k == "role" || k == "type" || unsetCompact(f.val):
		case k == "name" && known[k] && strings.HasSuffix(where, " message"):
			losses = addLoss(losses, "message name (participant names)", false)
		case !known[k]:
			losses = addLoss(losses, where+" field "+k, true)
		}
	}
	return losses
}

// chatClientContent reads a message's content: null, a string, or an
// array of parts.
func chatClientContent(raw json.RawMessage, role string, losses []Loss) ([]Block, []Loss, error) {
	if blocks, isString, err := stringContent(raw); isString {
		if len(blocks) == 1 && blocks[0].Text == "" && role != "tool" {
			blocks = nil // "" is no content (a tool's empty result is one)
		}
		return blocks, losses, err
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(raw, &raws); err != nil {
		return nil, losses, err
	}
	var out []Block
	for _, rawPart := range raws {
		var p chatClientPart
		if err := json.Unmarshal(rawPart, &p); err != nil {
			return nil, losses, err
		}
		if known := chatClientPartFields[p.Type]; known != nil {
			losses = chatUnreadFields(rawPart, p.Type+" part", known, losses)
		}
		switch p.Type {
		case "text":
			out = append(out, Block{Kind: KindText, Text: p.Text})
		case "refusal":
			out = append(out, Block{Kind: KindText, Text: p.Refusal})
		case "image_url":
			if p.ImageURL == nil || p.ImageURL.URL == "" {
				return nil, losses, fmt.Errorf("image_url part without a url")
			}
			if d := p.ImageURL.Detail; d != "" && d != "auto" {
				losses = addLoss(losses, "image_url detail", false)
			}
			out = append(out, imageFromURL(p.ImageURL.URL))
		case "file":
			// An inline PDF is a document; a file stored at OpenAI
			// (file_id) or of another type is not carried.
			if p.File == nil || p.File.FileID != "" || p.File.FileData == "" {
				losses = addLoss(losses, "file part other than inline data (file_id)", true)
				continue
			}
			doc := imageFromURL(p.File.FileData)
			if doc.MediaType != "application/pdf" {
				losses = addLoss(losses, "file part other than an inline PDF", true)
				continue
			}
			doc.Kind, doc.Text = KindDocument, p.File.Filename
			out = append(out, doc)
		default:
			losses = addLoss(losses, "content part "+p.Type, true)
		}
	}
	return out, losses, nil
}
