package openai

import "github.com/llmhedge/caddy-llm-hedge/internal/wire"

// Where Chat Completions requests name provider-held objects: an uploaded
// file in a content part, {"type": "file", "file": {"file_id": ...}}.
var objectRules = []wire.ObjectRule{
	{Marker: []byte(`"file_id"`), Key: "file_id", Kind: wire.ObjectFile},
}

// ObjectRules is the dialect's wire.ObjectNamer.
func (Dialect) ObjectRules() []wire.ObjectRule { return objectRules }
