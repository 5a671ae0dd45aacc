package translate

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Gemini answers, decoded into the intermediate form, and Gemini errors.

// geminiFinish maps a candidate's finishReason; STOP with function calls
// is a tool-use stop. A value not here is an error.
var geminiFinish = map[string]string{
	"STOP":               StopEnd,
	"MAX_TOKENS":         StopMax,
	"SAFETY":             StopRefusal,
	"RECITATION":         StopRefusal,
	"BLOCKLIST":          StopRefusal,
	"PROHIBITED_CONTENT": StopRefusal,
	"SPII":               StopRefusal,
	"IMAGE_SAFETY":       StopRefusal,
}

type geminiUsage struct {
	PromptTokenCount        int64 `json:"promptTokenCount"`
	CandidatesTokenCount    int64 `json:"candidatesTokenCount"`
	CachedContentTokenCount int64 `json:"cachedContentTokenCount"`
	ThoughtsTokenCount      int64 `json:"thoughtsTokenCount"`
}

func (u geminiUsage) usage() Usage {
	return Usage{Input: u.PromptTokenCount - u.CachedContentTokenCount, CacheRead: u.CachedContentTokenCount,
		Output: u.CandidatesTokenCount + u.ThoughtsTokenCount, Reasoning: u.ThoughtsTokenCount}
}

type geminiAnswer struct {
	Candidates []struct {
		Content struct {
			Parts []geminiPart `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
	PromptFeedback *struct {
		BlockReason string `json:"blockReason"`
	} `json:"promptFeedback"`
	UsageMetadata *geminiUsage `json:"usageMetadata"`
	ModelVersion  string       `json:"modelVersion"`
	ResponseID    string       `json:"responseId"`
	Error         *geminiError `json:"error"`
}

type geminiError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Status  string `json:"status"`
}

func decodeGeminiResponse(body []byte) (*Response, error) {
	var in geminiAnswer
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("gemini answer: %w", err)
	}
	if in.Error != nil {
		return nil, fmt.Errorf("gemini answer is an error: %s", in.Error.Message)
	}
	r := &Response{ID: in.ResponseID, Model: in.ModelVersion}
	if in.UsageMetadata != nil {
		r.Usage = in.UsageMetadata.usage()
	}
	if len(in.Candidates) == 0 {
		if in.PromptFeedback != nil && in.PromptFeedback.BlockReason != "" {
			r.Stop = StopRefusal // the prompt was blocked: the truth about it
			return r, nil
		}
		return nil, fmt.Errorf("gemini answer without candidates")
	}
	if len(in.Candidates) > 1 {
		return nil, fmt.Errorf("gemini answer has %d candidates, want 1", len(in.Candidates))
	}
	c := in.Candidates[0]
	var ids toolIDs
	calls := 0
	for _, p := range c.Content.Parts {
		switch {
		case p.Thought:
			// Gemini's thinking carries no Anthropic signature: not shown.
		case p.FunctionCall != nil:
			args := p.FunctionCall.Args
			if isNullish(args) {
				args = json.RawMessage(`{}`) // Gemini omits args of a call without parameters
			}
			if err := checkArgs(args); err != nil {
				return nil, fmt.Errorf("gemini functionCall %s: %w", p.FunctionCall.Name, err)
			}
			r.Blocks = append(r.Blocks, Block{Kind: KindToolCall, ToolID: ids.unique("", in.ResponseID, calls),
				ToolName: p.FunctionCall.Name, Args: compactJSON(args)})
			calls++
		case p.Text != nil:
			if n := len(r.Blocks); n > 0 && r.Blocks[n-1].Kind == KindText {
				r.Blocks[n-1].Text += *p.Text // one text block, as the stream writes it
			} else if *p.Text != "" {
				r.Blocks = append(r.Blocks, Block{Kind: KindText, Text: *p.Text})
			}
		default:
			return nil, fmt.Errorf("gemini answer part has no mapping")
		}
	}
	stop, ok := geminiFinish[c.FinishReason]
	if !ok {
		return nil, fmt.Errorf("gemini finishReason %q has no mapping", c.FinishReason)
	}
	if stop == StopEnd && calls > 0 {
		stop = StopTool
	}
	r.Stop = stop
	return r, nil
}

// geminiStatusTypes maps Gemini's error status to Anthropic's error type.
var geminiStatusTypes = map[string]string{
	"INVALID_ARGUMENT":    "invalid_request_error",
	"FAILED_PRECONDITION": "invalid_request_error",
	"UNAUTHENTICATED":     "authentication_error",
	"PERMISSION_DENIED":   "permission_error",
	"NOT_FOUND":           "not_found_error",
	"RESOURCE_EXHAUSTED":  "rate_limit_error",
	"UNAVAILABLE":         "overloaded_error",
	"INTERNAL":            "api_error",
	"DEADLINE_EXCEEDED":   "timeout_error",
}

// geminiContextOverflow is the phrase of Gemini's context overflow error.
const geminiContextOverflow = "exceeds the maximum number of tokens"

func geminiErrorToAnthropic(status int, body []byte) (int, []byte) {
	var in struct {
		Error geminiError `json:"error"`
	}
	msg := strings.TrimSpace(clip(string(body), 500))
	typ := anthropicErrorType(status)
	if err := json.Unmarshal(body, &in); err == nil && in.Error.Message != "" {
		msg = in.Error.Message
		if t, ok := geminiStatusTypes[in.Error.Status]; ok {
			typ = t
		}
	}
	if strings.Contains(msg, geminiContextOverflow) {
		status, typ, msg = http.StatusBadRequest, "invalid_request_error", anthropicContextOverflow+": "+msg
	}
	return status, anthropicErrorBody(typ, msg)
}
