package translate

import (
	"encoding/json"
	"net/http"
)

// ClientError is the error body of the client's format for status and
// message: what the engine answers when a request cannot be translated
// (a body that is not a valid request, or no candidate left).
func ClientError(client string, status int, message string) []byte {
	switch client {
	case Anthropic:
		return anthropicErrorBody(anthropicErrorType(status), message)
	case Responses, OpenAI:
		k, ok := openAIErrorKinds[anthropicErrorType(status)]
		if !ok {
			k = openAIErrorKind{typ: "invalid_request_error"}
		}
		return openAIErrorBody(k, message)
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": status, "message": message, "status": geminiStatus(status)}})
	return b
}

func geminiStatus(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case status == http.StatusForbidden:
		return "PERMISSION_DENIED"
	case status == http.StatusNotFound:
		return "NOT_FOUND"
	case status == http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case status == http.StatusServiceUnavailable:
		return "UNAVAILABLE"
	case status >= 500:
		return "INTERNAL"
	}
	return "INVALID_ARGUMENT"
}

// Refusal is the client's 400 when no candidate is left because every
// translating one would lose something material: it names what.
func Refusal(client string, losses []Loss) (int, []byte) {
	msg := "no provider can serve this request faithfully: " + Describe(losses, true) + " cannot be carried to the available providers"
	return http.StatusBadRequest, ClientError(client, http.StatusBadRequest, msg)
}
