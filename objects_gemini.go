package llmhedge

import "bytes"

// Where Gemini requests name provider-held objects: a context cache
// created through cachedContents (`"cachedContent": "cachedContents/..."`)
// and uploaded files (`"fileData": {"fileUri": ".../v1beta/files/..."}`).

var (
	cachedContentMarker = []byte(`"cachedContent"`)
	fileURIMarker       = []byte(`"fileUri"`)
)

func geminiObjects(body []byte, out []objectRef) []objectRef {
	if bytes.Contains(body, cachedContentMarker) {
		out = appendKeyIDs(body, "cachedContent", objectCache, out, cacheName)
	}
	if bytes.Contains(body, fileURIMarker) {
		out = appendKeyIDs(body, "fileUri", objectFile, out, fileName)
	}
	return out
}

func cacheName(v []byte) string { return resourceID(v, "cachedContents/") }
func fileName(v []byte) string  { return resourceID(v, "files/") }
