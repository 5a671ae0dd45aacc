package translate

import (
	"encoding/json"
	"fmt"
	"strings"
)

// OpenAI Chat Completions requests, encoded from the intermediate form.

type chatPart struct {
	Type     string        `json:"type"`
	Text     string        `json:"text,omitempty"`
	ImageURL *chatImageURL `json:"image_url,omitempty"`
}

type chatImageURL struct {
	URL string `json:"url"`
}

type chatToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type chatMessage struct {
	Role       string         `json:"role"`
	Content    any            `json:"content,omitempty"` // string or []chatPart
	ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type chatTool struct {
	Type     string           `json:"type"`
	Function chatToolFunction `json:"function"`
}

type chatToolFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

type chatRequest struct {
	Model               string          `json:"model"`
	Messages            []chatMessage   `json:"messages"`
	MaxCompletionTokens int             `json:"max_completion_tokens,omitempty"`
	Temperature         *float64        `json:"temperature,omitempty"`
	TopP                *float64        `json:"top_p,omitempty"`
	Stop                []string        `json:"stop,omitempty"`
	Tools               []chatTool      `json:"tools,omitempty"`
	ToolChoice          any             `json:"tool_choice,omitempty"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls,omitempty"`
	Stream              bool            `json:"stream,omitempty"`
	StreamOptions       *chatStreamOpts `json:"stream_options,omitempty"`
	ResponseFormat      map[string]any  `json:"response_format,omitempty"`
	Seed                *int64          `json:"seed,omitempty"`
	FrequencyPenalty    *float64        `json:"frequency_penalty,omitempty"`
	PresencePenalty     *float64        `json:"presence_penalty,omitempty"`
}

type chatStreamOpts struct {
	IncludeUsage bool `json:"include_usage"`
}

// chatMaxStop is how many stop sequences Chat Completions accepts.
const chatMaxStop = 4

// encodeChatRequest writes r as a Chat Completions request for model, with
// the losses this target adds.
func encodeChatRequest(r *Request, model string) ([]byte, []Loss, error) {
	var losses []Loss
	out := chatRequest{Model: model, MaxCompletionTokens: r.MaxTokens,
		Temperature: r.Temperature, TopP: r.TopP, Stream: r.Stream,
		Seed: r.Seed, FrequencyPenalty: r.FrequencyPenalty, PresencePenalty: r.PresencePenalty}
	if rf := r.ResponseFormat; rf != nil {
		// Structured output: the server constrains the answer.
		out.ResponseFormat = map[string]any{"type": rf.Type}
		if rf.Type == "json_schema" {
			out.ResponseFormat["json_schema"] = rf.jsonSchema(map[string]any{})
		}
	}
	if r.Stream {
		out.StreamOptions = &chatStreamOpts{IncludeUsage: true}
	}
	if r.TopK != nil {
		losses = addLoss(losses, "top_k", false)
	}
	if len(r.Stop) > chatMaxStop {
		losses = addLoss(losses, fmt.Sprintf("more than %d stop sequences", chatMaxStop), true)
	}
	if len(r.Stop) > 0 {
		out.Stop = r.Stop
		// Chat says "stop" whether or not a sequence matched.
		losses = addLoss(losses, stopSequenceLoss, false)
	}
	if len(r.System) > 0 {
		var sys strings.Builder
		for i, b := range r.System {
			if b.Kind != KindText {
				losses = addLoss(losses, "non-text system content", true)
				continue
			}
			if i > 0 {
				sys.WriteString("\n\n")
			}
			sys.WriteString(b.Text)
			losses = cacheLoss(losses, b.Cache)
		}
		out.Messages = append(out.Messages, chatMessage{Role: "system", Content: sys.String()})
	}
	for _, m := range r.Messages {
		var msgs []chatMessage
		msgs, losses = chatMessagesFor(m, losses)
		out.Messages = append(out.Messages, msgs...)
	}
	for _, t := range r.Tools {
		losses = cacheLoss(losses, t.Cache)
		losses = toolNameLoss(losses, t.Name)
		out.Tools = append(out.Tools, chatTool{Type: "function",
			Function: chatToolFunction{Name: t.Name, Description: t.Description, Parameters: t.Schema}})
	}
	var err error
	out.ToolChoice, err = openAIToolChoice(r.ToolChoice, len(out.Tools), "Chat Completions", func(name string) any {
		return map[string]any{"type": "function", "function": map[string]string{"name": name}}
	})
	if err != nil {
		return nil, nil, err
	}
	out.ParallelToolCalls = openAIParallelToolCalls(r.ToolChoice, len(out.Tools))
	body, err := json.Marshal(out)
	return body, losses, err
}

func cacheLoss(losses []Loss, cache bool) []Loss {
	if cache {
		return addLoss(losses, "cache_control breakpoints", false)
	}
	return losses
}

// chatMessagesFor turns one turn into Chat messages: a user turn's tool
// results become "tool" messages first (Chat wants them right after the
// assistant's calls), then the rest of the turn.
func chatMessagesFor(m Message, losses []Loss) ([]chatMessage, []Loss) {
	var tools []chatMessage
	var parts []chatPart
	var calls []chatToolCall
	for _, b := range m.Blocks {
		losses = cacheLoss(losses, b.Cache)
		switch b.Kind {
		case KindText:
			parts = append(parts, chatPart{Type: "text", Text: b.Text})
		case KindImage:
			if m.Role != "user" {
				losses = addLoss(losses, "image in an assistant turn", true)
				continue
			}
			parts = append(parts, chatImagePart(b))
		case KindDocument:
			losses = addLoss(losses, "document", true)
		case KindToolCall:
			calls = append(calls, chatToolCall{ID: b.ToolID, Type: "function",
				Function: chatFunction{Name: b.ToolName, Arguments: string(b.Args)}})
		case KindToolResult:
			var text string
			text, losses = toolResultText(b.Result, losses)
			if b.IsError {
				losses = addLoss(losses, "tool_result is_error flag", false)
			}
			tools = append(tools, chatMessage{Role: "tool", ToolCallID: b.ToolID, Content: text})
		case KindReasoning:
			losses = reasoningLoss(losses, b, OpenAI)
		}
	}
	out := tools
	if len(parts) > 0 || len(calls) > 0 {
		msg := chatMessage{Role: m.Role, ToolCalls: calls}
		switch {
		case len(parts) == 1 && parts[0].Type == "text":
			msg.Content = parts[0].Text
		case len(parts) > 0:
			msg.Content = parts
		}
		out = append(out, msg)
	}
	return out, losses
}

func chatImagePart(b Block) chatPart {
	url := b.URL
	if url == "" {
		url = "data:" + b.MediaType + ";base64," + b.Data
	}
	return chatPart{Type: "image_url", ImageURL: &chatImageURL{URL: url}}
}

// reasoningLoss drops a reasoning block for a target that is not its
// origin: signed or redacted thinking goes back only to where it came from.
func reasoningLoss(losses []Loss, b Block, target string) []Loss {
	if b.Opaque != nil && b.Opaque.Origin != target {
		return addLoss(losses, b.Opaque.Origin+" reasoning state (kept for "+b.Opaque.Origin+" only)", false)
	}
	return addLoss(losses, "reasoning in history", false)
}
