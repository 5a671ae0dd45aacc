package openai

import "github.com/llmhedge/caddy-llm-hedge/internal/wire"

// Where Chat Completions requests name provider-held objects: an uploaded
// file in a message's content part {"type": "file", "file": {"file_id":
// ...}}; a file_id anywhere else (metadata, a tool's schema) is not one.
var objectRules = []wire.ObjectRule{
	{Marker: []byte(`"file_id"`), Kind: wire.ObjectFile, Paths: []wire.ObjectPath{
		wire.Path("messages[].content[]{type=file}.file.file_id"),
	}},
}

// ObjectRules is the dialect's wire.ObjectNamer.
func (Dialect) ObjectRules() []wire.ObjectRule { return objectRules }

// objectWords are the markers the parse watches for (wire.ObjectWords).
var objectWords = wire.ObjectWords(objectRules)
