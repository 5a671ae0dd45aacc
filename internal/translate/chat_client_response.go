package translate

import (
	"encoding/json"
	"fmt"
	"strings"
)

// OpenAI Chat Completions answers for a Chat client, encoded from the
// intermediate form: the same message the stream (chatWriter) gives.

type chatOutMessage struct {
	Role      string         `json:"role"`
	Content   *string        `json:"content"`
	Refusal   *string        `json:"refusal"`
	ToolCalls []chatToolCall `json:"tool_calls,omitempty"`
}

type chatOutChoice struct {
	Index        int            `json:"index"`
	Message      chatOutMessage `json:"message"`
	Logprobs     any            `json:"logprobs"`
	FinishReason string         `json:"finish_reason"`
}

type chatOutUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

type chatOutBody struct {
	ID      string          `json:"id"`
	Object  string          `json:"object"`
	Created int64           `json:"created"`
	Model   string          `json:"model"`
	Choices []chatOutChoice `json:"choices"`
	Usage   chatOutUsage    `json:"usage"`
}

// encodeChatResponse writes r as a Chat Completions answer: its text
// blocks, in order, are the content (as the stream's deltas append to
// one content), its tool calls the tool_calls with their ids; reasoning
// of another vendor is not shown (its opaque state stays with its origin).
func encodeChatResponse(r *Response) ([]byte, error) {
	reason, ok := chatFinish[r.Stop]
	if !ok {
		return nil, fmt.Errorf("stop reason %q has no Chat Completions equivalent", r.Stop)
	}
	msg := chatOutMessage{Role: "assistant"}
	var text strings.Builder
	hasText := false
	for _, b := range r.Blocks {
		switch b.Kind {
		case KindText:
			text.WriteString(b.Text)
			hasText = hasText || b.Text != ""
		case KindToolCall:
			msg.ToolCalls = append(msg.ToolCalls, chatToolCall{ID: b.ToolID, Type: "function",
				Function: chatFunction{Name: b.ToolName, Arguments: string(b.Args)}})
		case KindReasoning:
		default:
			return nil, fmt.Errorf("answer block kind %d has no Chat Completions equivalent", b.Kind)
		}
	}
	if hasText {
		s := text.String()
		msg.Content = &s
	}
	out := chatOutBody{ID: chatCompletionID(r.ID), Object: "chat.completion", Created: now().Unix(), Model: r.Model,
		Choices: []chatOutChoice{{Message: msg, FinishReason: reason}}}
	u := r.Usage
	out.Usage.PromptTokens = u.Input + u.CacheRead + u.CacheWrite
	out.Usage.CompletionTokens = u.Output
	out.Usage.TotalTokens = out.Usage.PromptTokens + u.Output
	out.Usage.PromptTokensDetails.CachedTokens = u.CacheRead
	out.Usage.CompletionTokensDetails.ReasoningTokens = u.Reasoning
	return json.Marshal(out)
}
