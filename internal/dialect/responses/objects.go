package responses

import "github.com/llmhedge/caddy-llm-hedge/internal/wire"

// Where Responses API requests name provider-held objects, besides
// previous_response_id (the root's responses_owner.go): the conversation
// the response belongs to (`"conversation": "conv_..."` or `{"id": ...}`),
// and uploaded files in input_file and input_image parts (`file_id`).
var objectRules = []wire.ObjectRule{
	{Marker: []byte(`"conversation"`), Key: "conversation", Kind: wire.ObjectConversation, TopLevel: true},
	{Marker: []byte(`"file_id"`), Key: "file_id", Kind: wire.ObjectFile},
}

// ObjectRules is the dialect's wire.ObjectNamer.
func (Dialect) ObjectRules() []wire.ObjectRule { return objectRules }
