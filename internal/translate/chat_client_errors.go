package translate

import (
	"errors"
	"net/http"
	"strings"
)

// Errors for a Chat Completions client: OpenAI's shape
// ({"error":{"message","type","param","code"}}), keeping what agents act
// on: overload (503 server_is_overloaded), rate limits (429
// rate_limit_exceeded) and context overflow (400 context_length_exceeded).

// chatErrorOf is the error a Chat client reads for a stream's err. An
// UpstreamError comes in Anthropic's error types from the decoders first
// written for Anthropic clients (Gemini, Responses targets; Anthropic's
// types are the error vocabulary of the intermediate form there) or
// already in OpenAI's from the Anthropic decoder (first written for
// Responses clients); the two sets share only invalid_request_error,
// which means the same in both.
func chatErrorOf(err error) (openAIErrorKind, string) {
	var ue *UpstreamError
	if !errors.As(err, &ue) {
		return openAIErrorKind{status: http.StatusInternalServerError, typ: "server_error"}, err.Error()
	}
	if _, anthropicType := openAIErrorKinds[ue.Type]; anthropicType {
		return anthropicToOpenAIKind(ue.Status, ue.Type, ue.Message), ue.Message
	}
	code := ue.Code
	if code == ue.Type {
		code = "" // the Responses error event's code stands in for a missing one
	}
	return openAIErrorKind{status: ue.Status, typ: ue.Type, code: code}, ue.Message
}

// geminiErrorToOpenAI maps a Gemini error answer to OpenAI's shape
// through Anthropic's error types (geminiErrorToAnthropic), as the stream
// does; a context overflow keeps Anthropic's phrase before Gemini's words
// and gets the code context_length_exceeded.
func geminiErrorToOpenAI(status int, body []byte) (int, []byte) {
	status, out := geminiErrorToAnthropic(status, body)
	typ, msg := anthropicErrorFields(out)
	k := anthropicToOpenAIKind(status, typ, msg)
	return k.status, openAIErrorBody(k, msg)
}

// openAIErrorToChat keeps an OpenAI error answer (a Responses target
// answers in Chat's own error shape), rewritten from its fields so that
// a body of another shape (a gateway's text) still reaches the client as
// an OpenAI error; a context overflow keeps its code.
func openAIErrorToChat(status int, body []byte) (int, []byte) {
	msg, typ, code := openAIErrorFields(body)
	if typ == "" {
		k := openAIErrorKinds[anthropicErrorType(status)]
		typ, code = k.typ, k.code
	}
	if strings.Contains(msg, "maximum context length") {
		code = "context_length_exceeded"
	}
	return status, openAIErrorBody(openAIErrorKind{status: status, typ: typ, code: code}, msg)
}
