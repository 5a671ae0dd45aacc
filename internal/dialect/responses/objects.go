package responses

import "github.com/llmhedge/caddy-llm-hedge/internal/wire"

// Where Responses API requests name provider-held objects, besides
// previous_response_id (the root's responses_owner.go): the conversation
// the response belongs to (top-level `"conversation": "conv_..."` or
// `{"id": ...}`); the code interpreter's container (a tool's
// `"container": "cntr_..."`, or the files of an auto container); and
// uploaded files in input_file and input_image parts of a message or of a
// function call's output. A file_id elsewhere (metadata, a call's
// arguments) is the client's own data.
var objectRules = []wire.ObjectRule{
	{Marker: []byte(`"conversation"`), Kind: wire.ObjectConversation, Paths: []wire.ObjectPath{wire.Path("conversation")}, ID: wire.StringOrID},
	{Marker: []byte(`"code_interpreter"`), Kind: wire.ObjectContainer, Paths: []wire.ObjectPath{
		wire.Path("tools[]{type=code_interpreter}.container"),
	}},
	{Marker: []byte(`"file_id"`), Kind: wire.ObjectFile, Paths: []wire.ObjectPath{
		wire.Path("input[].content[]{type=input_file|input_image}.file_id"),
		wire.Path("input[]{type=function_call_output}.output[]{type=input_file|input_image}.file_id"),
	}},
	{Marker: []byte(`"file_ids"`), Kind: wire.ObjectFile, Paths: []wire.ObjectPath{
		wire.Path("tools[]{type=code_interpreter}.container{type=auto}.file_ids[]"),
	}},
}

// ObjectRules is the dialect's wire.ObjectNamer.
func (Dialect) ObjectRules() []wire.ObjectRule { return objectRules }

// objectWords are the markers the parse watches for (wire.ObjectWords).
var objectWords = wire.ObjectWords(objectRules)
