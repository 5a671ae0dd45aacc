package translate

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// OpenAI Responses answers, encoded from the intermediate form; Anthropic
// answers decoded into it.

// now is the clock of created_at; tests fix it.
var now = time.Now

// responsesStatus maps a stop reason to the response's status and its
// incomplete_details.reason; a stop reason not here is an error.
var responsesStatus = map[string][2]string{
	StopEnd:      {"completed", ""},
	StopSequence: {"completed", ""},
	StopTool:     {"completed", ""},
	StopMax:      {"incomplete", "max_output_tokens"},
	StopRefusal:  {"incomplete", "content_filter"},
	// Anthropic ends an answer that filled the context window so.
	"model_context_window_exceeded": {"incomplete", "max_output_tokens"},
}

type responsesUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int64 `json:"total_tokens"`
}

func responsesUsageOf(u Usage) responsesUsage {
	var out responsesUsage
	out.InputTokens = u.Input + u.CacheRead + u.CacheWrite
	out.InputTokensDetails.CachedTokens = u.CacheRead
	out.OutputTokens = u.Output
	out.OutputTokensDetails.ReasoningTokens = u.Reasoning
	out.TotalTokens = out.InputTokens + out.OutputTokens
	return out
}

type responsesOutPart struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
	Logprobs    []any  `json:"logprobs"`
}

type responsesOutItem struct {
	ID        string             `json:"id"`
	Type      string             `json:"type"`
	Status    string             `json:"status"`
	Role      string             `json:"role,omitempty"`
	Content   []responsesOutPart `json:"content,omitempty"`
	CallID    string             `json:"call_id,omitempty"`
	Name      string             `json:"name,omitempty"`
	Arguments *string            `json:"arguments,omitempty"`
	Input     *string            `json:"input,omitempty"`
}

// MarshalJSON writes a message item's content always, [] while a stream's
// item is in progress ("omitempty" alone would drop it: Codex then
// ignores the item and every text delta into it); other items have none.
func (it responsesOutItem) MarshalJSON() ([]byte, error) {
	type plain responsesOutItem
	if it.Type != "message" {
		return json.Marshal(plain(it))
	}
	content := it.Content
	if content == nil {
		content = []responsesOutPart{}
	}
	return json.Marshal(struct {
		plain
		Content []responsesOutPart `json:"content"`
	}{plain(it), content})
}

type responsesBody struct {
	ID                string             `json:"id"`
	Object            string             `json:"object"`
	CreatedAt         int64              `json:"created_at"`
	Status            string             `json:"status"`
	Error             any                `json:"error"`
	IncompleteDetails any                `json:"incomplete_details"`
	Model             string             `json:"model"`
	Output            []responsesOutItem `json:"output"`
	ParallelToolCalls bool               `json:"parallel_tool_calls"`
	ToolChoice        string             `json:"tool_choice"`
	Tools             []any              `json:"tools"`
	Usage             *responsesUsage    `json:"usage"`
}

// responsesIDs names the response and its items after the target's answer id.
func responsesID(id string) string {
	return "resp_" + strings.TrimPrefix(id, "msg_")
}

func responsesItemID(r *Response, i int, b Block, custom bool) string {
	if custom {
		return "ctc_" + idChars(b.ToolID)
	}
	if b.Kind == KindToolCall {
		return "fc_" + idChars(b.ToolID)
	}
	return fmt.Sprintf("msg_%s_%d", strings.TrimPrefix(idChars(r.ID), "msg_"), i)
}

// responsesOutput builds the output items of an answer: a message item per
// text block, a function_call item per tool call. Reasoning from another
// vendor is not shown (its opaque state stays with its origin).
func responsesOutput(r *Response, custom map[string]bool) ([]responsesOutItem, error) {
	out := []responsesOutItem{}
	for i, b := range r.Blocks {
		switch b.Kind {
		case KindText:
			out = append(out, responsesOutItem{ID: responsesItemID(r, i, b, false), Type: "message", Status: "completed",
				Role: "assistant", Content: []responsesOutPart{{Type: "output_text", Text: b.Text, Annotations: []any{}, Logprobs: []any{}}}})
		case KindToolCall:
			if custom[b.ToolName] {
				input, err := customInput(b.Args)
				if err != nil {
					return nil, err
				}
				out = append(out, responsesOutItem{ID: responsesItemID(r, i, b, true), Type: "custom_tool_call", Status: "completed",
					CallID: b.ToolID, Name: b.ToolName, Input: &input})
				continue
			}
			args := string(b.Args)
			out = append(out, responsesOutItem{ID: responsesItemID(r, i, b, false), Type: "function_call", Status: "completed",
				CallID: b.ToolID, Name: b.ToolName, Arguments: &args})
		case KindReasoning:
		default:
			return nil, fmt.Errorf("answer block kind %d has no Responses equivalent", b.Kind)
		}
	}
	return out, nil
}

// responsesObject is the Response object of an answer, as the non-stream
// body and the stream's last event carry it.
func responsesObject(r *Response, created int64, custom map[string]bool) (*responsesBody, error) {
	st, ok := responsesStatus[r.Stop]
	if !ok {
		return nil, fmt.Errorf("stop reason %q has no Responses equivalent", r.Stop)
	}
	output, err := responsesOutput(r, custom)
	if err != nil {
		return nil, err
	}
	u := responsesUsageOf(r.Usage)
	body := &responsesBody{ID: responsesID(r.ID), Object: "response", CreatedAt: created, Status: st[0],
		Model: r.Model, Output: output, ParallelToolCalls: true, ToolChoice: "auto", Tools: []any{}, Usage: &u}
	if st[1] != "" {
		body.IncompleteDetails = map[string]string{"reason": st[1]}
	}
	return body, nil
}

func encodeResponsesResponse(r *Response, custom map[string]bool) ([]byte, error) {
	body, err := responsesObject(r, now().Unix(), custom)
	if err != nil {
		return nil, err
	}
	return json.Marshal(body)
}

// decodeAnthropicResponse reads a Messages answer.
func decodeAnthropicResponse(body []byte) (*Response, error) {
	var in anthropicMessage
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("anthropic answer: %w", err)
	}
	if in.Type != "message" {
		return nil, fmt.Errorf("anthropic answer of type %q", in.Type)
	}
	if in.StopReason == nil {
		return nil, fmt.Errorf("anthropic answer without stop_reason")
	}
	r := &Response{ID: in.ID, Model: in.Model, Stop: *in.StopReason,
		Usage: Usage{Input: in.Usage.InputTokens, Output: in.Usage.OutputTokens,
			CacheRead: in.Usage.CacheReadInputTokens, CacheWrite: in.Usage.CacheCreationInputTokens}}
	if in.StopSequence != nil {
		r.StopSeq = *in.StopSequence
	}
	for _, b := range in.Content {
		switch b.Type {
		case "text":
			if b.Text != nil {
				r.Blocks = append(r.Blocks, Block{Kind: KindText, Text: *b.Text})
			}
		case "tool_use":
			args := b.Input
			if isNullish(args) {
				args = json.RawMessage(`{}`)
			}
			if err := checkArgs(args); err != nil {
				return nil, fmt.Errorf("anthropic answer: tool_use %s: %w", b.ID, err)
			}
			r.Blocks = append(r.Blocks, Block{Kind: KindToolCall, ToolID: b.ID, ToolName: b.Name, Args: compactJSON(args)})
		case "thinking":
			t := ""
			if b.Thinking != nil {
				t = *b.Thinking
			}
			r.Blocks = append(r.Blocks, Block{Kind: KindReasoning, Text: t, Opaque: &Opaque{Origin: Anthropic, Kind: "signature", Value: b.Signature}})
		case "redacted_thinking":
			r.Blocks = append(r.Blocks, Block{Kind: KindReasoning, Opaque: &Opaque{Origin: Anthropic, Kind: "redacted_thinking", Value: b.Data}})
		default:
			return nil, fmt.Errorf("anthropic answer: content block %q has no mapping", b.Type)
		}
	}
	return r, nil
}
