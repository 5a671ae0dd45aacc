package llmhedge

import "bytes"

// Where Chat Completions requests name provider-held objects: an uploaded
// file in a content part, {"type": "file", "file": {"file_id": ...}}.

var fileIDMarker = []byte(`"file_id"`)

func openAIObjects(body []byte, out []objectRef) []objectRef {
	if !bytes.Contains(body, fileIDMarker) {
		return out
	}
	return appendKeyIDs(body, "file_id", objectFile, out, objectIDValue)
}
