package llmhedge

import "bytes"

// Where Responses API requests name provider-held objects, besides
// previous_response_id (responses_pin.go): the conversation the response
// belongs to (`"conversation": "conv_..."` or `{"id": ...}`), and
// uploaded files in input_file and input_image parts (`file_id`).

var conversationMarker = []byte(`"conversation"`)

func responsesObjects(body []byte, out []objectRef) []objectRef {
	if bytes.Contains(body, conversationMarker) {
		if id := topLevelID(body, "conversation"); id != "" {
			out = append(out, objectRef{objectConversation, id})
		}
	}
	if !bytes.Contains(body, fileIDMarker) {
		return out
	}
	return appendKeyIDs(body, "file_id", objectFile, out, objectIDValue)
}
