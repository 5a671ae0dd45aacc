package translate

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// Anthropic Messages answers: encoding a client's, decoding a target's.

type anthropicUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

type anthropicMessage struct {
	ID           string           `json:"id"`
	Type         string           `json:"type"`
	Role         string           `json:"role"`
	Model        string           `json:"model"`
	Content      []anthropicBlock `json:"content"`
	StopReason   *string          `json:"stop_reason"`
	StopSequence *string          `json:"stop_sequence"`
	Usage        anthropicUsage   `json:"usage"`
}

// anthropicStopReasons are the stop reasons of the intermediate form an
// Anthropic client can read; the set is Anthropic's own.
var anthropicStopReasons = map[string]bool{
	StopEnd: true, StopMax: true, StopSequence: true, StopTool: true, StopRefusal: true,
}

func encodeAnthropicResponse(r *Response) ([]byte, error) {
	if !anthropicStopReasons[r.Stop] {
		return nil, fmt.Errorf("stop reason %q has no Anthropic equivalent", r.Stop)
	}
	stop := r.Stop
	out := anthropicMessage{ID: anthropicMessageID(r.ID), Type: "message", Role: "assistant", Model: r.Model,
		Content: []anthropicBlock{}, StopReason: &stop,
		Usage: anthropicUsage{InputTokens: r.Usage.Input, OutputTokens: r.Usage.Output,
			CacheCreationInputTokens: r.Usage.CacheWrite, CacheReadInputTokens: r.Usage.CacheRead}}
	if r.StopSeq != "" {
		out.StopSequence = &r.StopSeq
	}
	for _, b := range r.Blocks {
		switch b.Kind {
		case KindText:
			t := b.Text
			out.Content = append(out.Content, anthropicBlock{Type: "text", Text: &t})
		case KindToolCall:
			out.Content = append(out.Content, anthropicBlock{Type: "tool_use", ID: b.ToolID, Name: b.ToolName, Input: b.Args})
		case KindReasoning:
			// Thinking from another vendor carries no Anthropic signature,
			// and one is never forged: it is not shown.
			if b.Opaque != nil && b.Opaque.Origin == Anthropic {
				t := b.Text
				out.Content = append(out.Content, anthropicBlock{Type: "thinking", Thinking: &t, Signature: b.Opaque.Value})
			}
		default:
			return nil, fmt.Errorf("answer block kind %d has no Anthropic equivalent", b.Kind)
		}
	}
	return json.Marshal(out)
}

// anthropicMessageID gives a message id Anthropic's shape.
func anthropicMessageID(id string) string {
	if len(id) >= 4 && id[:4] == "msg_" {
		return id
	}
	return "msg_" + id
}

// toolIDs hands out tool-call ids that are unique within one answer: an
// id the target left empty or repeated is replaced by one made of the
// answer's id and the call's ordinal n, the same in a stream and in the
// non-stream answer, and unique across the conversation as the answer id is.
type toolIDs struct {
	seen []string
}

func (t *toolIDs) unique(id, answer string, n int) string {
	if !anthropicIDChars(id) || t.has(id) {
		id = "toolu_" + idChars(answer) + "_" + strconv.Itoa(n)
		for t.has(id) {
			id += "x"
		}
	}
	t.seen = append(t.seen, id)
	return id
}

// idChars keeps the characters Anthropic allows in a tool_use id.
func idChars(s string) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if anthropicIDChars(s[i : i+1]) {
			b = append(b, c)
		}
	}
	return string(b)
}

// anthropicIDChars reports whether id is a tool_use id Anthropic accepts
// (^[a-zA-Z0-9_-]+$): an id of an OpenAI-compatible server that is not
// (Kimi's "functions.ls:0") would make the conversation's history a 400
// when it goes back to Anthropic.
func anthropicIDChars(id string) bool {
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return id != ""
}

func (t *toolIDs) has(id string) bool {
	for _, s := range t.seen {
		if s == id {
			return true
		}
	}
	return false
}

func (t *toolIDs) reset() { t.seen = t.seen[:0] }

// checkArgs holds tool arguments to the rule: they parse, as an object.
func checkArgs(args []byte) error {
	if !json.Valid(args) {
		return fmt.Errorf("tool arguments are not valid JSON: %.80q", args)
	}
	for _, c := range args {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '{':
			return nil
		}
		break
	}
	return fmt.Errorf("tool arguments are not a JSON object: %.80q", args)
}
