package sim

// Scripted tool loops (Config.ToolCalls): the simulator answers the first
// turn of an agent's conversation with a tool call and the turn carrying the
// tool's result with a text that quotes it, as a model driving an agent does.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ToolCall is one scripted tool call.
type ToolCall struct {
	// Name of the tool to call; the call is made only when the request
	// offers a tool of that name.
	Name string `json:"name"`

	// Arguments of the call: a JSON object. Default {}.
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// DefaultToolAnswer is the answer after a tool result when
// Config.ToolAnswer is unset.
const DefaultToolAnswer = "The tool returned: {result}"

// The values of Fault.Turn: the turns of a scripted tool loop.
const (
	// TurnToolCall: the request is answered with a scripted tool call.
	TurnToolCall = "tool_call"
	// TurnToolResult: the request's last turn carries a tool result.
	TurnToolResult = "tool_result"
)

// argumentPiece is the size of one argument delta of a streamed tool call.
const argumentPiece = 16

// Validate reports what is wrong with a scripted call.
func (c ToolCall) Validate() error {
	if c.Name == "" {
		return fmt.Errorf("tool call: a name is required")
	}
	if len(c.Arguments) > 0 && (!json.Valid(c.Arguments) || bytes.TrimSpace(c.Arguments)[0] != '{') {
		return fmt.Errorf("tool call %s: arguments %s: want a JSON object", c.Name, c.Arguments)
	}
	return nil
}

// scriptedCall is the tool call one request is answered with.
type scriptedCall struct {
	name   string
	id     string // the call's id (Anthropic, OpenAI); Gemini has none
	itemID string // the Responses API output item's id
	args   string // the arguments, compact JSON
}

// scriptTurn settles a scripted turn, when the config has tool calls: after
// a tool result, the answer quoting it (one delta per word); else, when the
// request offers a scripted tool, a call of it (its arguments in pieces,
// Gemini's in one). ok is false when the turn is not scripted.
func scriptTurn(ex *exchange) (deltas []string, ok bool) {
	cfg := &ex.p.cfg
	if len(cfg.ToolCalls) == 0 {
		return nil, false
	}
	if result, ok := lastToolResult(ex); ok {
		ex.turn = TurnToolResult
		answer := cfg.ToolAnswer
		if answer == "" {
			answer = DefaultToolAnswer
		}
		ex.s.rec.update(ex.rec, func(rec *RequestRecord) { rec.ToolResult = true })
		return words(strings.ReplaceAll(answer, "{result}", result)), true
	}
	offered := offeredTools(ex.req.Tools)
	for _, c := range cfg.ToolCalls {
		if !offered[c.Name] {
			continue
		}
		ex.newID()
		n := strconv.FormatUint(ex.s.ids.Add(1), 16)
		args := []byte("{}")
		if len(c.Arguments) > 0 {
			var b bytes.Buffer
			json.Compact(&b, c.Arguments) // valid: checked by Validate
			args = b.Bytes()
		}
		ex.call = &scriptedCall{name: c.Name, id: "call_sim_" + n, itemID: "fc_sim_" + n, args: string(args)}
		if ex.wire.name() == "anthropic" {
			ex.call.id = "toolu_sim_" + n
		}
		ex.turn = TurnToolCall
		ex.s.rec.update(ex.rec, func(rec *RequestRecord) { rec.ToolCall = c.Name })
		if ex.wire.name() == "gemini" {
			return []string{ex.call.args}, true // Gemini sends a call whole
		}
		return splitPieces(ex.call.args, argumentPiece), true
	}
	return nil, false
}

// splitPieces cuts s into pieces of about n bytes, on rune boundaries.
func splitPieces(s string, n int) []string {
	var out []string
	for len(s) > n {
		i := n
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return append(out, s)
}

// offeredTools are the names of the tools a request offers, in any
// dialect's shape: Anthropic {name}, Chat Completions {function: {name}},
// Responses {name}, Gemini {functionDeclarations: [{name}]}.
func offeredTools(raw json.RawMessage) map[string]bool {
	var tools []struct {
		Name     string `json:"name"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
		FunctionDeclarations []struct {
			Name string `json:"name"`
		} `json:"functionDeclarations"`
	}
	if json.Unmarshal(raw, &tools) != nil {
		return nil
	}
	names := make(map[string]bool)
	for _, t := range tools {
		names[t.Name], names[t.Function.Name] = true, true
		for _, d := range t.FunctionDeclarations {
			names[d.Name] = true
		}
	}
	delete(names, "")
	return names
}

// lastToolResult returns the text of the tool result the conversation's last
// turn carries, the assistant prefill of a continuation aside: an Anthropic
// user turn's tool_result, a Chat Completions role tool message, a
// Responses function_call_output (or custom_tool_call_output) item, a
// Gemini functionResponse part.
func lastToolResult(ex *exchange) (string, bool) {
	var raw json.RawMessage
	switch ex.wire.name() {
	case "anthropic", "openai":
		raw = ex.req.Messages
	case "responses":
		raw = ex.req.Input
	case "gemini":
		raw = ex.req.Contents
	}
	var turns []json.RawMessage
	if json.Unmarshal(raw, &turns) != nil || len(turns) == 0 {
		return "", false
	}
	last := turns[len(turns)-1]
	if _, prefilled := assistantPrefill(ex); prefilled && len(turns) > 1 {
		last = turns[len(turns)-2]
	}
	var turn struct {
		Role    string          `json:"role"`
		Type    string          `json:"type"`
		Content json.RawMessage `json:"content"`
		Output  json.RawMessage `json:"output"`
		Parts   []struct {
			FunctionResponse *struct {
				Response json.RawMessage `json:"response"`
			} `json:"functionResponse"`
		} `json:"parts"`
	}
	if json.Unmarshal(last, &turn) != nil {
		return "", false
	}
	switch ex.wire.name() {
	case "anthropic":
		var blocks []struct {
			Type    string          `json:"type"`
			Content json.RawMessage `json:"content"`
		}
		if turn.Role != "user" || json.Unmarshal(turn.Content, &blocks) != nil {
			return "", false
		}
		for i := len(blocks) - 1; i >= 0; i-- {
			if blocks[i].Type == "tool_result" {
				return contentText(blocks[i].Content), true
			}
		}
	case "openai":
		if turn.Role == "tool" {
			return contentText(turn.Content), true
		}
	case "responses":
		if turn.Type == "function_call_output" || turn.Type == "custom_tool_call_output" {
			return contentText(turn.Output), true
		}
	case "gemini":
		for i := len(turn.Parts) - 1; i >= 0; i-- {
			if fr := turn.Parts[i].FunctionResponse; fr != nil {
				return functionResponseText(fr.Response), true
			}
		}
	}
	return "", false
}

// contentText is a tool result's content: a string, or the text of its
// parts joined.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// functionResponseText is a Gemini functionResponse's response: its output
// (or result) when a string, else the object's JSON.
func functionResponseText(raw json.RawMessage) string {
	var r map[string]json.RawMessage
	if json.Unmarshal(raw, &r) == nil {
		for _, k := range []string{"output", "result"} {
			var s string
			if json.Unmarshal(r[k], &s) == nil {
				return s
			}
		}
	}
	return string(raw)
}
