package anthropic

import "github.com/llmhedge/caddy-llm-hedge/internal/wire"

// Where Anthropic Messages requests name provider-held objects: the
// code-execution container to reuse (`"container": "container_..."` or
// `{"id": ...}`), and uploaded files in document, image and
// container_upload sources (`"source": {"type": "file", "file_id": ...}`).
var objectRules = []wire.ObjectRule{
	{Marker: []byte(`"container"`), Key: "container", Kind: wire.ObjectContainer, TopLevel: true},
	{Marker: []byte(`"file_id"`), Key: "file_id", Kind: wire.ObjectFile},
}

// ObjectRules is the dialect's wire.ObjectNamer.
func (Dialect) ObjectRules() []wire.ObjectRule { return objectRules }
