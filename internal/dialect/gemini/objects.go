package gemini

import "github.com/llmhedge/caddy-llm-hedge/internal/wire"

// Where Gemini requests name provider-held objects: a context cache
// created through cachedContents (`"cachedContent": "cachedContents/..."`)
// and uploaded files (`"fileData": {"fileUri": ".../v1beta/files/..."}`).
var objectRules = []wire.ObjectRule{
	{Marker: []byte(`"cachedContent"`), Key: "cachedContent", Kind: wire.ObjectCache, ID: cacheName},
	{Marker: []byte(`"fileUri"`), Key: "fileUri", Kind: wire.ObjectFile, ID: fileName},
}

// ObjectRules is the dialect's wire.ObjectNamer.
func (Dialect) ObjectRules() []wire.ObjectRule { return objectRules }

func cacheName(v []byte) string { return wire.ResourceID(v, "cachedContents/") }
func fileName(v []byte) string  { return wire.ResourceID(v, "files/") }
