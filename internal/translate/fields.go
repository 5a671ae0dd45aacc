package translate

import (
	"bytes"
	"encoding/json"
)

// The fields of a client's content block, content part or tool that the
// decoder does not read (Anthropic blocks and tools, Responses parts and
// function tools): each is named, never dropped unseen. A field that changes how
// the request is served is advisory; any other (an image's
// transformations, a document's context, a tool call's caller) is
// material, as an unknown request field is.

// anthropicBlockFields are the fields each block type carries (type
// aside: every block and part has it).
var anthropicBlockFields = map[string]map[string]bool{
	"text":              {"text": true, "citations": true, "cache_control": true},
	"image":             {"source": true, "cache_control": true},
	"document":          {"source": true, "title": true, "cache_control": true},
	"tool_use":          {"id": true, "name": true, "input": true, "cache_control": true},
	"tool_result":       {"tool_use_id": true, "content": true, "is_error": true, "cache_control": true},
	"thinking":          {"thinking": true, "signature": true, "cache_control": true},
	"redacted_thinking": {"data": true, "cache_control": true},
}

// anthropicToolFields are the fields a client tool carries.
var anthropicToolFields = map[string]bool{
	"type": true, "name": true, "description": true, "input_schema": true, "cache_control": true,
}

// responsesPartFields are the fields each Responses content part carries.
var responsesPartFields = map[string]map[string]bool{
	"input_text":  {"text": true},
	"output_text": {"text": true, "logprobs": true},
	"text":        {"text": true},
	"refusal":     {"refusal": true},
	"input_image": {"image_url": true, "file_id": true},
	"input_file":  {"file_data": true, "filename": true, "file_id": true, "file_url": true},
}

// responsesToolFields are the fields a Responses function tool carries.
var responsesToolFields = map[string]bool{
	"type": true, "name": true, "description": true, "parameters": true, "strict": true,
}

// advisoryFields are the fields dropped with notice, by where they stand
// ("document block citations"), with the loss's name.
var advisoryFields = map[string]string{
	"document block citations":   "document citations",
	"tool strict":                "strict tool schemas",
	"tool input_examples":        "tool input_examples",
	"tool eager_input_streaming": "eager_input_streaming",
	// Claude Code defers some tools (tool search): the target is offered
	// them at once, as tools it may call.
	"tool defer_loading":           "defer_loading (deferred tools offered at once)",
	"function tool defer_loading":  "defer_loading (deferred tools offered at once)",
	"input_image part detail":      "input_image detail",
	"output_text part annotations": "annotations in history",
}

// fieldDefaults are values that say what leaving the field out says.
var fieldDefaults = map[string]string{
	"tool_use block caller":       `{"type":"direct"}`,
	"tool allowed_callers":        `["direct"]`,
	"input_image part detail":     `"auto"`,
	"image block transformations": `{"oversized_image":"downsize"}`,
}

// unreadFieldLosses adds the losses of the fields of obj (a block or a
// tool, named by where) that known does not list and that hold a value.
func unreadFieldLosses(obj json.RawMessage, where string, known map[string]bool, losses []Loss) []Loss {
	var buf [16]member
	fields, err := objectMembers(obj, buf[:0])
	if err != nil {
		return losses
	}
	for _, f := range fields {
		if known[string(f.key)] || string(f.key) == "type" {
			continue // a field read (the common case) is not compacted
		}
		k := string(f.key)
		if v := compactJSON(f.val); unsetValue(v) || string(v) == fieldDefaults[where+" "+k] {
			continue
		}
		if name, ok := advisoryFields[where+" "+k]; ok {
			losses = addLoss(losses, name, false)
			continue
		}
		losses = addLoss(losses, where+" field "+k, true)
	}
	return losses
}

// unsetValue reports whether a field's value says nothing: null, false,
// or an empty string, object or array.
func unsetValue(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	switch string(v) {
	case "", "null", "false", `""`, "{}", "[]":
		return true
	}
	return false
}

// fieldLosses names the top-level fields of a client's request its
// decoder does not carry: table says "carried", "advisory" (named, not
// material) or nothing (an unknown field: material). unset tells a field
// sent empty, which asks nothing.
func fieldLosses(losses []Loss, top []member, table map[string]string, unset func(json.RawMessage) bool) []Loss {
	for _, m := range top {
		if unset(m.val) {
			continue
		}
		switch table[string(m.key)] {
		case "carried":
		case "advisory":
			losses = addLoss(losses, string(m.key), false)
		default:
			losses = addLoss(losses, "field "+string(m.key), true)
		}
	}
	return losses
}
