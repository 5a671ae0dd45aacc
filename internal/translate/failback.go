package translate

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
)

// AnthropicFailback prepares an Anthropic Messages request for an
// Anthropic provider when its history may hold a turn another vendor
// served by translation. With thinking on, Anthropic wants the last
// assistant message of a tool-use cycle to start with its own signed
// thinking; a translated turn has none (none is ever forged), so for that
// request thinking is turned off and named as an advisory loss. Any other
// request comes back unchanged, byte for byte, with no loss.
func AnthropicFailback(body []byte) ([]byte, []Loss, error) {
	var in struct {
		Thinking *struct {
			Type string `json:"type"`
		} `json:"thinking"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, nil, fmt.Errorf("anthropic request: %w", err)
	}
	if in.Thinking == nil || in.Thinking.Type == "disabled" || len(in.Messages) < 2 {
		return body, nil, nil
	}
	last, prev := in.Messages[len(in.Messages)-1], in.Messages[len(in.Messages)-2]
	if last.Role != "user" || prev.Role != "assistant" || !carriesToolResult(last.Content) {
		return body, nil, nil // not inside a tool-use cycle
	}
	var blocks []struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(prev.Content, &blocks); err != nil || len(blocks) == 0 {
		return body, nil, nil
	}
	if blocks[0].Type == "thinking" || blocks[0].Type == "redacted_thinking" {
		return body, nil, nil
	}
	out, err := withoutField(body, "thinking")
	if err != nil {
		return nil, nil, err
	}
	return out, []Loss{{What: "extended thinking for this tool-use cycle (its calls came from another vendor)"}}, nil
}

// carriesToolResult reports whether a user turn answers tool calls: it
// holds a tool_result block, beside others or not (Claude Code sends
// reminders as text blocks next to its results).
func carriesToolResult(content json.RawMessage) bool {
	var blocks []struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(content, &blocks); err != nil {
		return false
	}
	for _, b := range blocks {
		if b.Type == "tool_result" {
			return true
		}
	}
	return false
}

// withoutField removes one top-level member of a JSON object, keeping
// every other byte.
func withoutField(body []byte, name string) ([]byte, error) {
	start, end := -1, -1
	prevEnd := -1
	err := jsonscan.ScanTopLevel(body, func(key []byte, vStart, vEnd int) bool {
		if jsonscan.KeyIs(key, name) {
			start, end = prevEnd, vEnd
			if start < 0 { // the first member: remove it and the comma after it
				start = bytes.IndexByte(body, '{') + 1
				if i := bytes.IndexByte(body[end:], ','); i >= 0 && jsonscan.SkipSpace(body, end) == end+i {
					end += i + 1
				}
			}
			return false
		}
		prevEnd = vEnd
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("anthropic request: %w", err)
	}
	if start < 0 {
		return body, nil
	}
	out := append(append([]byte{}, body[:start]...), body[end:]...)
	if !json.Valid(out) {
		return nil, fmt.Errorf("anthropic request: removing %s broke the body", name)
	}
	return out, nil
}
