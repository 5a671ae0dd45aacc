package translate

import (
	"encoding/json"
	"fmt"
)

// Anthropic Messages requests, encoded from the intermediate form.

type anthropicOutMessage struct {
	Role    string           `json:"role"`
	Content []anthropicBlock `json:"content"`
}

type anthropicRequest struct {
	Model         string                `json:"model"`
	MaxTokens     int                   `json:"max_tokens"`
	System        []anthropicBlock      `json:"system,omitempty"`
	Messages      []anthropicOutMessage `json:"messages"`
	Tools         []anthropicTool       `json:"tools,omitempty"`
	ToolChoice    *anthropicToolChoice  `json:"tool_choice,omitempty"`
	StopSequences []string              `json:"stop_sequences,omitempty"`
	Temperature   *float64              `json:"temperature,omitempty"`
	TopP          *float64              `json:"top_p,omitempty"`
	TopK          *int                  `json:"top_k,omitempty"`
	Stream        bool                  `json:"stream,omitempty"`
}

var ephemeral = json.RawMessage(`{"type":"ephemeral"}`)

func encodeAnthropicRequest(r *Request, model string) ([]byte, []Loss, error) {
	var losses []Loss
	out := anthropicRequest{Model: model, MaxTokens: r.MaxTokens, StopSequences: r.Stop,
		Temperature: r.Temperature, TopP: r.TopP, TopK: r.TopK, Stream: r.Stream, Messages: []anthropicOutMessage{}}
	// Anthropic has no structured output a request can ask for, nor a
	// seed or penalties.
	losses = samplingLosses(r, structuredOutputLoss(r, losses))
	if out.MaxTokens == 0 {
		out.MaxTokens = DefaultMaxTokens
		losses = addLoss(losses, fmt.Sprintf("unlimited output (max_tokens %d)", DefaultMaxTokens), false)
	}
	for _, b := range r.System {
		if b.Kind != KindText {
			losses = addLoss(losses, "non-text system content", true)
			continue
		}
		out.System = append(out.System, anthropicText(b))
	}
	for _, m := range r.Messages {
		var blocks []anthropicBlock
		blocks, losses = anthropicBlocksOut(m.Blocks, losses)
		if len(blocks) > 0 {
			out.Messages = append(out.Messages, anthropicOutMessage{Role: m.Role, Content: blocks})
		}
	}
	losses = anthropicLastTurnLoss(r, out.Messages, losses)
	for _, t := range r.Tools {
		at := anthropicTool{Name: t.Name, Description: t.Description, InputSchema: t.Schema}
		if t.Cache {
			at.CacheControl = ephemeral
		}
		out.Tools = append(out.Tools, at)
	}
	switch r.ToolChoice.Mode {
	case ChoiceDefault:
		if r.ToolChoice.DisableParallel && len(out.Tools) > 0 {
			out.ToolChoice = &anthropicToolChoice{Type: "auto", DisableParallelToolUse: true}
		}
	case ChoiceAuto, ChoiceAny, ChoiceTool:
		out.ToolChoice = &anthropicToolChoice{Type: r.ToolChoice.Mode, Name: r.ToolChoice.Name,
			DisableParallelToolUse: r.ToolChoice.DisableParallel}
	case ChoiceNone:
		out.ToolChoice = &anthropicToolChoice{Type: "none"}
	default:
		return nil, nil, fmt.Errorf("tool_choice %q has no Anthropic equivalent", r.ToolChoice.Mode)
	}
	body, err := json.Marshal(out)
	return body, losses, err
}

func anthropicText(b Block) anthropicBlock {
	t := b.Text
	ab := anthropicBlock{Type: "text", Text: &t}
	if b.Cache {
		ab.CacheControl = ephemeral
	}
	return ab
}

// anthropicBlocksOut encodes a turn's or a tool result's blocks, leaving
// out those Anthropic cannot carry (their losses are recorded); nil when
// none is left.
func anthropicBlocksOut(bs []Block, losses []Loss) ([]anthropicBlock, []Loss) {
	var out []anthropicBlock
	for _, b := range bs {
		ab, ok, more := anthropicBlockOut(b, losses)
		losses = more
		if ok {
			out = append(out, ab)
		}
	}
	return out, losses
}

func anthropicBlockOut(b Block, losses []Loss) (anthropicBlock, bool, []Loss) {
	var ab anthropicBlock
	switch b.Kind {
	case KindText:
		if b.Text == "" {
			return ab, false, losses // Anthropic refuses empty text blocks
		}
		return anthropicText(b), true, losses
	case KindImage, KindDocument:
		ab.Type = "image"
		if b.Kind == KindDocument {
			ab.Type, ab.Title = "document", b.Text
		}
		switch {
		case b.URL != "":
			ab.Source = &anthropicSource{Type: "url", URL: b.URL}
		case b.Kind == KindDocument && b.MediaType == "text/plain":
			// A text document's Data is its text (Anthropic's text source).
			ab.Source = &anthropicSource{Type: "text", MediaType: b.MediaType, Data: b.Data}
		default:
			ab.Source = &anthropicSource{Type: "base64", MediaType: b.MediaType, Data: b.Data}
		}
	case KindToolCall:
		ab = anthropicBlock{Type: "tool_use", ID: b.ToolID, Name: b.ToolName, Input: b.Args}
	case KindToolResult:
		ab = anthropicBlock{Type: "tool_result", ToolUseID: b.ToolID, IsError: b.IsError}
		var content []anthropicBlock
		content, losses = anthropicBlocksOut(b.Result, losses)
		if content == nil {
			content = []anthropicBlock{}
		}
		ab.Content, _ = json.Marshal(content)
	case KindReasoning:
		if b.Opaque == nil || b.Opaque.Origin != Anthropic {
			return ab, false, reasoningLoss(losses, b, Anthropic)
		}
		if b.Opaque.Kind == "redacted_thinking" {
			ab = anthropicBlock{Type: "redacted_thinking", Data: b.Opaque.Value}
		} else {
			t := b.Text
			ab = anthropicBlock{Type: "thinking", Thinking: &t, Signature: b.Opaque.Value}
		}
		return ab, true, losses
	default:
		return ab, false, addLoss(losses, fmt.Sprintf("block kind %d", b.Kind), true)
	}
	if b.Cache {
		ab.CacheControl = ephemeral
	}
	return ab, true, losses
}

// The losses of a conversation whose encoding ends in an assistant turn
// with text, which Anthropic continues (a prefill) instead of answering.
const (
	// The client's conversation ends so: it means another thing to the client.
	assistantLastLoss = "assistant message last (Anthropic would continue it, not answer anew)"
	// The client's last user message was left out (Anthropic refuses
	// empty text; it has no empty user turn): the client would get the
	// rest of the answer before it.
	emptyLastUserLoss = "empty last user message (Anthropic would continue the answer before it)"
)

// anthropicLastTurnLoss checks the conversation as encoded, not as
// decoded: a turn left out for its empty text can leave the old answer
// last.
func anthropicLastTurnLoss(r *Request, msgs []anthropicOutMessage, losses []Loss) []Loss {
	n := len(msgs)
	if n == 0 || msgs[n-1].Role != "assistant" {
		return losses
	}
	// A tool call last waits for its result (Anthropic refuses it anyway).
	if blocks := msgs[n-1].Content; blocks[len(blocks)-1].Type != "text" {
		return losses
	}
	if m := len(r.Messages); m > 0 && r.Messages[m-1].Role != "assistant" {
		return addLoss(losses, emptyLastUserLoss, true)
	}
	return addLoss(losses, assistantLastLoss, true)
}
