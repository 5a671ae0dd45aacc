package llmhedge

import "bytes"

// Where Anthropic Messages requests name provider-held objects: the
// code-execution container to reuse (`"container": "container_..."` or
// `{"id": ...}`), and uploaded files in document, image and
// container_upload sources (`"source": {"type": "file", "file_id": ...}`).

var containerMarker = []byte(`"container"`)

func anthropicObjects(body []byte, out []objectRef) []objectRef {
	if bytes.Contains(body, containerMarker) {
		if id := topLevelID(body, "container"); id != "" {
			out = append(out, objectRef{objectContainer, id})
		}
	}
	if !bytes.Contains(body, fileIDMarker) {
		return out
	}
	return appendKeyIDs(body, "file_id", objectFile, out, objectIDValue)
}
