package gemini

import "github.com/llmhedge/caddy-llm-hedge/internal/wire"

// Where Gemini requests name provider-held objects: a context cache
// (top-level `"cachedContent": "cachedContents/..."`) and files of the
// Files API in a part's fileData, in the contents or the system
// instruction, camelCase or snake_case as the API accepts both. Only the
// Files API's own URI (`https://generativelanguage.googleapis.com/v1beta/files/{id}`)
// or name (`files/{id}`) is one: any other URI (a bucket, gs://, a web
// page) is the client's, readable from anywhere.
var objectRules = []wire.ObjectRule{
	{Marker: []byte(`"cachedContent"`), Kind: wire.ObjectCache, Paths: []wire.ObjectPath{wire.Path("cachedContent")}, ID: cacheName},
	{Marker: []byte(`"cached_content"`), Kind: wire.ObjectCache, Paths: []wire.ObjectPath{wire.Path("cached_content")}, ID: cacheName},
	{Marker: []byte(`"fileUri"`), Kind: wire.ObjectFile, Paths: []wire.ObjectPath{
		wire.Path("contents[].parts[].fileData.fileUri"),
		wire.Path("systemInstruction.parts[].fileData.fileUri"),
	}, ID: fileName},
	{Marker: []byte(`"file_uri"`), Kind: wire.ObjectFile, Paths: []wire.ObjectPath{
		wire.Path("contents[].parts[].file_data.file_uri"),
		wire.Path("system_instruction.parts[].file_data.file_uri"),
	}, ID: fileName},
}

// ObjectRules is the dialect's wire.ObjectNamer.
func (Dialect) ObjectRules() []wire.ObjectRule { return objectRules }

func cacheName(v []byte) string { return wire.ResourceName(v, "cachedContents/") }

// fileName reads a file of the Files API from its URI or its name.
func fileName(v []byte) string {
	return wire.ResourceName(v,
		"https://generativelanguage.googleapis.com/v1beta/files/",
		"https://generativelanguage.googleapis.com/v1/files/",
		"files/")
}

// objectWords are the markers the parse watches for (wire.ObjectWords).
var objectWords = wire.ObjectWords(objectRules)
