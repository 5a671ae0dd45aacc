package translate

import (
	"encoding/json"
	"fmt"
	"strings"
)

// OpenAI Responses answers, decoded into the intermediate form.

// responsesStop maps a response's status (and incomplete reason) to a
// stop reason; completed with function calls is a tool-use stop. A value
// not here is an error.
func responsesStop(status, reason string, calls bool) (string, error) {
	switch {
	case status == "completed" && calls:
		return StopTool, nil
	case status == "completed":
		return StopEnd, nil
	case status == "incomplete" && reason == "max_output_tokens":
		return StopMax, nil
	case status == "incomplete" && reason == "content_filter":
		return StopRefusal, nil
	}
	return "", fmt.Errorf("response status %q (reason %q) has no mapping", status, reason)
}

type responsesAnswer struct {
	ID                string `json:"id"`
	Model             string `json:"model"`
	Status            string `json:"status"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Output []struct {
		Type      string `json:"type"`
		ID        string `json:"id"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
		Content   []struct {
			Type    string `json:"type"`
			Text    string `json:"text"`
			Refusal string `json:"refusal"`
		} `json:"content"`
	} `json:"output"`
	Usage *responsesUsage `json:"usage"`
}

func (u *responsesUsage) usage() Usage {
	if u == nil {
		return Usage{}
	}
	cached := u.InputTokensDetails.CachedTokens
	return Usage{Input: u.InputTokens - cached, CacheRead: cached, Output: u.OutputTokens,
		Reasoning: u.OutputTokensDetails.ReasoningTokens}
}

func decodeResponsesAnswer(body []byte) (*Response, error) {
	var in responsesAnswer
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("responses answer: %w", err)
	}
	if in.Error != nil && in.Error.Message != "" {
		return nil, fmt.Errorf("responses answer is an error: %s", in.Error.Message)
	}
	r := &Response{ID: strings.TrimPrefix(in.ID, "resp_"), Model: in.Model, Usage: in.Usage.usage()}
	var ids toolIDs
	calls, refused := 0, false
	for _, it := range in.Output {
		switch it.Type {
		case "message":
			// One text block per message item, as the stream writes it.
			var text strings.Builder
			for _, c := range it.Content {
				switch c.Type {
				case "output_text":
					text.WriteString(c.Text)
				case "refusal":
					text.WriteString(c.Refusal)
					refused = true
				default:
					return nil, fmt.Errorf("responses answer: content part %q has no mapping", c.Type)
				}
			}
			if text.Len() > 0 {
				r.Blocks = append(r.Blocks, Block{Kind: KindText, Text: text.String()})
			}
		case "function_call":
			args := it.Arguments
			if strings.TrimSpace(args) == "" {
				return nil, fmt.Errorf("responses answer: function_call %s without arguments", it.CallID)
			}
			if err := checkArgs([]byte(args)); err != nil {
				return nil, fmt.Errorf("responses answer: function_call %s: %w", it.CallID, err)
			}
			r.Blocks = append(r.Blocks, Block{Kind: KindToolCall, ToolID: ids.unique(it.CallID, r.ID, calls),
				ToolName: it.Name, Args: compactJSON(json.RawMessage(args))})
			calls++
		case "reasoning":
			// Encrypted reasoning is OpenAI's own state: not shown to this client.
		default:
			return nil, fmt.Errorf("responses answer: output item %q has no mapping", it.Type)
		}
	}
	reason := ""
	if in.IncompleteDetails != nil {
		reason = in.IncompleteDetails.Reason
	}
	stop, err := responsesStop(in.Status, reason, calls > 0)
	if err != nil {
		return nil, err
	}
	if refused && stop == StopEnd {
		stop = StopRefusal
	}
	r.Stop = stop
	return r, nil
}
