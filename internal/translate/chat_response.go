package translate

import (
	"encoding/json"
	"fmt"
)

// OpenAI Chat Completions answers, decoded into the intermediate form.

// chatStop maps Chat's finish_reason; a value not here is an error.
var chatStop = map[string]string{
	"stop":           StopEnd,
	"length":         StopMax,
	"tool_calls":     StopTool,
	"function_call":  StopTool,
	"content_filter": StopRefusal,
}

type chatUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	PromptTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

func (u chatUsage) usage() Usage {
	cached := u.PromptTokensDetails.CachedTokens
	return Usage{Input: u.PromptTokens - cached, CacheRead: cached, Output: u.CompletionTokens,
		Reasoning: u.CompletionTokensDetails.ReasoningTokens}
}

func decodeChatResponse(body []byte) (*Response, error) {
	var in struct {
		ID      string `json:"id"`
		Model   string `json:"model"`
		Choices []struct {
			Index   int `json:"index"`
			Message struct {
				Content   *string `json:"content"`
				Refusal   *string `json:"refusal"`
				ToolCalls []struct {
					ID       string `json:"id"`
					Type     string `json:"type"`
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage *chatUsage      `json:"usage"`
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("chat answer: %w", err)
	}
	if !isNullish(in.Error) {
		return nil, fmt.Errorf("chat answer is an error: %s", in.Error)
	}
	if len(in.Choices) != 1 {
		return nil, fmt.Errorf("chat answer has %d choices, want 1", len(in.Choices))
	}
	c := in.Choices[0]
	stop, ok := chatStop[c.FinishReason]
	if !ok {
		return nil, fmt.Errorf("chat finish_reason %q has no mapping", c.FinishReason)
	}
	r := &Response{ID: in.ID, Model: in.Model, Stop: stop}
	if in.Usage != nil {
		r.Usage = in.Usage.usage()
	}
	if c.Message.Content != nil && *c.Message.Content != "" {
		r.Blocks = append(r.Blocks, Block{Kind: KindText, Text: *c.Message.Content})
	}
	if c.Message.Refusal != nil && *c.Message.Refusal != "" {
		r.Blocks = append(r.Blocks, Block{Kind: KindText, Text: *c.Message.Refusal})
		r.Stop = StopRefusal
	}
	if r.Stop == StopEnd && len(c.Message.ToolCalls) > 0 {
		r.Stop = StopTool // "stop" with calls (OpenAI-compatible servers), as Gemini's STOP
	}
	var ids toolIDs
	for i, tc := range c.Message.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			return nil, fmt.Errorf("chat tool call type %q has no mapping", tc.Type)
		}
		if err := checkArgs([]byte(tc.Function.Arguments)); err != nil {
			return nil, fmt.Errorf("chat tool call %s (%s): %w", tc.ID, tc.Function.Name, err)
		}
		r.Blocks = append(r.Blocks, Block{Kind: KindToolCall, ToolID: ids.unique(tc.ID, in.ID, i),
			ToolName: tc.Function.Name, Args: compactJSON(json.RawMessage(tc.Function.Arguments))})
	}
	return r, nil
}
