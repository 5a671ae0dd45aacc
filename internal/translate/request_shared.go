package translate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
)

// Request-side rules that more than one dialect spells the same way.

// stringContent reads a content value in the form Anthropic and Responses
// share: null (no blocks), a string (one text block), or an array of the
// dialect's own parts. isString is false only for the array, which the
// caller decodes.
func stringContent(raw json.RawMessage) (blocks []Block, isString bool, err error) {
	if isNullish(raw) {
		return nil, true, nil
	}
	if raw[0] != '"' {
		return nil, false, nil
	}
	if plainString(raw) {
		return []Block{{Kind: KindText, Text: string(raw[1 : len(raw)-1])}}, true, nil
	}
	var s string // Unmarshal's: on the heap, on this path only
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, true, err
	}
	return []Block{{Kind: KindText, Text: s}}, true, nil
}

// plainString reports whether raw is exactly one JSON string whose bytes
// are its text, as json.Unmarshal decodes it: no escape, and valid UTF-8
// (Unmarshal turns an invalid byte into U+FFFD).
func plainString(raw []byte) bool {
	return jsonscan.StringEnd(raw, 0) == len(raw) && bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw)
}

// openAIToolChoice spells a tool choice for Chat Completions or Responses:
// both name the modes with the same strings and differ only in the object
// that names one tool, which named builds. target names the API in the error.
func openAIToolChoice(tc ToolChoice, tools int, target string, named func(name string) any) (any, error) {
	switch {
	case tc.Mode == ChoiceDefault, tools == 0 && (tc.Mode == ChoiceAuto || tc.Mode == ChoiceNone):
		// Without tools both APIs refuse a tool_choice ("only allowed when
		// tools are specified"); auto and none then say nothing.
		return nil, nil
	}
	switch tc.Mode {
	case ChoiceAuto:
		return "auto", nil
	case ChoiceAny:
		return "required", nil
	case ChoiceNone:
		return "none", nil
	case ChoiceTool:
		return named(tc.Name), nil
	}
	return nil, fmt.Errorf("tool_choice %q has no %s equivalent", tc.Mode, target)
}

// openAIParallelToolCalls is parallel_tool_calls for both OpenAI APIs:
// false when the request forbids parallel calls and sends tools, else
// left out (the APIs' default allows them).
func openAIParallelToolCalls(tc ToolChoice, tools int) *bool {
	if tc.DisableParallel && tools > 0 {
		f := false
		return &f
	}
	return nil
}

// prefillLoss names a conversation that ends in an assistant turn with
// text, whose meaning differs between the formats: Anthropic continues
// that text (a prefill: the answer starts where it stops), OpenAI and
// Gemini answer anew after it. Carried across, the client would get an
// answer that is not the one it asked for; what names how the target
// would read it.
func prefillLoss(r *Request, what string, losses []Loss) []Loss {
	n := len(r.Messages)
	if n == 0 || r.Messages[n-1].Role != "assistant" {
		return losses
	}
	// The turn's last block decides: text is where an answer would go on;
	// a tool call waits for its result (Anthropic refuses it last).
	blocks := r.Messages[n-1].Blocks
	for i := len(blocks) - 1; i >= 0; i-- {
		switch b := blocks[i]; {
		case b.Kind == KindText && b.Text != "":
			return addLoss(losses, what, true)
		case b.Kind == KindToolCall:
			return losses
		}
	}
	return losses
}

// maxToolName is the longest function name OpenAI and Gemini accept;
// Anthropic's tool names may be longer (Claude Code names MCP tools
// mcp__<server>__<tool>).
const maxToolName = 64

// toolNameLoss names a tool the target would refuse with a 400 for its
// name's length, a request error that would stop the other candidates:
// refused before sending instead.
func toolNameLoss(losses []Loss, name string) []Loss {
	if len(name) > maxToolName {
		return addLoss(losses, fmt.Sprintf("tool name longer than %d characters", maxToolName), true)
	}
	return losses
}

// toolResultSep separates the text parts of one tool result where a target
// holds the result as one string: each part was a block of its own (an MCP
// tool's items, a file and a note on it), and run together "line one" and
// "line two" would read "line oneline two". An empty part adds no line.
const toolResultSep = "\n"

// toolResultText is a tool result for a target that carries only its
// text: the text parts one per line, anything else a material loss.
func toolResultText(result []Block, losses []Loss) (string, []Loss) {
	texts := make([]string, 0, len(result))
	for _, r := range result {
		losses = cacheLoss(losses, r.Cache)
		switch {
		case r.Kind != KindText:
			losses = addLoss(losses, "image or document in a tool result", true)
		case r.Text != "":
			texts = append(texts, r.Text)
		}
	}
	return strings.Join(texts, toolResultSep), losses
}

// openAIChoiceString reads what OpenAI's two APIs spell alike in
// tool_choice: nothing, or "auto", "none" or "required". done is false
// for an object, which each API spells its own way.
func openAIChoiceString(raw json.RawMessage, api string) (tc ToolChoice, done bool, err error) {
	if isNullish(raw) {
		return ToolChoice{}, true, nil
	}
	if raw[0] != '"' {
		return ToolChoice{}, false, nil
	}
	var s string
	_ = json.Unmarshal(raw, &s)
	switch s {
	case "auto":
		return ToolChoice{Mode: ChoiceAuto}, true, nil
	case "none":
		return ToolChoice{Mode: ChoiceNone}, true, nil
	case "required":
		return ToolChoice{Mode: ChoiceAny}, true, nil
	}
	return ToolChoice{}, true, fmt.Errorf("%s request: tool_choice %q", api, s)
}
