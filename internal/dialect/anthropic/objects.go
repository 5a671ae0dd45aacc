package anthropic

import "github.com/llmhedge/caddy-llm-hedge/internal/wire"

// Where Anthropic Messages requests name provider-held objects: the
// code-execution container to reuse (top-level `"container":
// "container_..."` or `{"id": ...}`), and uploaded files in the content
// blocks that take one: a document or image whose source is
// `{"type": "file", "file_id": ...}` and a container_upload block's
// file_id, in a message or in a tool_result's content. A file_id in a
// tool call's input is the tool's argument, not a file of the API.
var objectRules = []wire.ObjectRule{
	{Marker: []byte(`"container"`), Kind: wire.ObjectContainer, Paths: []wire.ObjectPath{wire.Path("container")}, ID: wire.StringOrID},
	{Marker: []byte(`"file_id"`), Kind: wire.ObjectFile, Paths: []wire.ObjectPath{
		wire.Path("messages[].content[]{type=document|image}.source{type=file}.file_id"),
		wire.Path("messages[].content[]{type=container_upload}.file_id"),
		wire.Path("messages[].content[]{type=tool_result}.content[]{type=document|image}.source{type=file}.file_id"),
	}},
}

// ObjectRules is the dialect's wire.ObjectNamer.
func (Dialect) ObjectRules() []wire.ObjectRule { return objectRules }

// objectWords are the markers the parse watches for (wire.ObjectWords).
var objectWords = wire.ObjectWords(objectRules)
