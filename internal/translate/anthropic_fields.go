package translate

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
)

// The fields of an Anthropic content block or tool that the decoder does
// not read: each is named, never dropped unseen. A field that changes how
// the request is served is advisory; any other (an image's
// transformations, a document's context, a tool call's caller) is
// material, as an unknown request field is.

// anthropicBlockFields are the fields each block type carries (type and
// cache_control aside: every block has them).
var anthropicBlockFields = map[string]map[string]bool{
	"text":              {"text": true, "citations": true},
	"image":             {"source": true},
	"document":          {"source": true, "title": true},
	"tool_use":          {"id": true, "name": true, "input": true},
	"tool_result":       {"tool_use_id": true, "content": true, "is_error": true},
	"thinking":          {"thinking": true, "signature": true},
	"redacted_thinking": {"data": true},
}

// anthropicToolFields are the fields a client tool carries.
var anthropicToolFields = map[string]bool{
	"type": true, "name": true, "description": true, "input_schema": true,
}

// anthropicAdvisoryFields are the fields dropped with notice, by where
// they stand ("document block citations"), with the loss's name.
var anthropicAdvisoryFields = map[string]string{
	"document block citations":   "document citations",
	"tool strict":                "strict tool schemas",
	"tool input_examples":        "tool input_examples",
	"tool eager_input_streaming": "eager_input_streaming",
	// Claude Code defers some tools (tool search): the target is offered
	// them at once, as tools it may call.
	"tool defer_loading": "defer_loading (deferred tools offered at once)",
}

// anthropicDefaults are values that say what leaving the field out says.
var anthropicDefaults = map[string]string{
	"tool_use block caller": `{"type":"direct"}`,
	"tool allowed_callers":  `["direct"]`,
}

// unreadFieldLosses adds the losses of the fields of obj (a block or a
// tool, named by where) that known does not list and that hold a value.
func unreadFieldLosses(obj json.RawMessage, where string, known map[string]bool, losses []Loss) []Loss {
	var fields map[string]json.RawMessage
	if json.Unmarshal(obj, &fields) != nil {
		return losses
	}
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		v := compactJSON(fields[k])
		if known[k] || k == "type" || k == "cache_control" || unsetValue(v) || string(v) == anthropicDefaults[where+" "+k] {
			continue
		}
		if name, ok := anthropicAdvisoryFields[where+" "+k]; ok {
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
