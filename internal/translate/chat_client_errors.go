package translate

import (
	"strings"
)

// Errors for a Chat Completions client: OpenAI's shape
// ({"error":{"message","type","param","code"}}), keeping what agents act
// on: overload (503 server_is_overloaded), rate limits (429
// rate_limit_exceeded) and context overflow (400 context_length_exceeded).

// chatErrorOf is the error a Chat client reads for a stream's err: an
// UpstreamError is in OpenAI's types already (the Anthropic decoder's
// own; clientErrors converts the Anthropic-typed ones of the Gemini and
// Responses decoders), anything else a server_error.
func chatErrorOf(err error) (openAIErrorKind, string) {
	e := clientStreamError(err, "server_error")
	code := e.Code
	if code == e.Type {
		code = "" // the Responses error event's code stands in for a missing one
	}
	return openAIErrorKind{status: e.Status, typ: e.Type, code: code}, e.Message
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
