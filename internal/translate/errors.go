package translate

import (
	"encoding/json"
	"net/http"
	"strings"
)

// Error bodies, mapped between formats through tables that keep what an
// agent acts on: overload (retry later), rate limits and context overflow
// (compact the conversation).

// anthropicErrorTypes maps an HTTP status to Anthropic's error type.
var anthropicErrorTypes = map[int]string{
	http.StatusBadRequest:            "invalid_request_error",
	http.StatusUnauthorized:          "authentication_error",
	http.StatusPaymentRequired:       "billing_error",
	http.StatusForbidden:             "permission_error",
	http.StatusNotFound:              "not_found_error",
	http.StatusRequestEntityTooLarge: "request_too_large",
	http.StatusUnprocessableEntity:   "invalid_request_error",
	http.StatusTooManyRequests:       "rate_limit_error",
	http.StatusInternalServerError:   "api_error",
	http.StatusBadGateway:            "api_error",
	http.StatusServiceUnavailable:    "overloaded_error",
	http.StatusGatewayTimeout:        "timeout_error",
	529:                              "overloaded_error",
}

// anthropicContextOverflow is the phrase Anthropic's context overflow
// error starts with, and the one Claude Code looks for.
const anthropicContextOverflow = "prompt is too long"

// anthropicErrorType returns the Anthropic error type of a status; a
// status outside the table takes its class's type.
func anthropicErrorType(status int) string {
	if t, ok := anthropicErrorTypes[status]; ok {
		return t
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

// openAIErrorFields reads the message and code of an OpenAI error body
// ({"error":{...}}), a Gemini one (same wrapper), or a bare message.
func openAIErrorFields(body []byte) (msg, typ, code string) {
	var in struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    any    `json:"code"`
			Status  string `json:"status"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &in); err != nil || in.Error.Message == "" {
		return strings.TrimSpace(clip(string(body), 500)), "", ""
	}
	if s, ok := in.Error.Code.(string); ok {
		code = s
	}
	return in.Error.Message, in.Error.Type, code
}

// openAIErrorToAnthropic maps an OpenAI-shaped error to Anthropic's.
func openAIErrorToAnthropic(status int, body []byte) (int, []byte) {
	msg, _, code := openAIErrorFields(body)
	typ := anthropicErrorType(status)
	if code == "context_length_exceeded" || strings.Contains(msg, "maximum context length") {
		status, typ = http.StatusBadRequest, "invalid_request_error"
		msg = anthropicContextOverflow + ": " + msg
	}
	return status, anthropicErrorBody(typ, msg)
}

func anthropicErrorBody(typ, msg string) []byte {
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
	return b
}

// openAIErrorKind is OpenAI's type and code for an Anthropic error type.
type openAIErrorKind struct {
	status    int
	typ, code string
}

var openAIErrorKinds = map[string]openAIErrorKind{
	"invalid_request_error": {http.StatusBadRequest, "invalid_request_error", ""},
	"authentication_error":  {http.StatusUnauthorized, "invalid_request_error", "invalid_api_key"},
	"billing_error":         {http.StatusTooManyRequests, "insufficient_quota", "insufficient_quota"},
	"permission_error":      {http.StatusForbidden, "invalid_request_error", ""},
	"not_found_error":       {http.StatusNotFound, "invalid_request_error", ""},
	"request_too_large":     {http.StatusRequestEntityTooLarge, "invalid_request_error", ""},
	"rate_limit_error":      {http.StatusTooManyRequests, "requests", "rate_limit_exceeded"},
	"api_error":             {http.StatusInternalServerError, "server_error", ""},
	"timeout_error":         {http.StatusGatewayTimeout, "server_error", ""},
	"overloaded_error":      {http.StatusServiceUnavailable, "server_error", "server_is_overloaded"},
}

// anthropicErrorFields reads the type and message of an Anthropic error.
func anthropicErrorFields(body []byte) (typ, msg string) {
	var in struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &in); err != nil || in.Error.Type == "" {
		return "", strings.TrimSpace(clip(string(body), 500))
	}
	return in.Error.Type, in.Error.Message
}

// anthropicToOpenAIKind maps an Anthropic error (type, or status when the
// type is unknown) to OpenAI's shape.
func anthropicToOpenAIKind(status int, typ, msg string) openAIErrorKind {
	k, ok := openAIErrorKinds[typ]
	if !ok {
		k, ok = openAIErrorKinds[anthropicErrorType(status)]
		k.status = status
	}
	if strings.HasPrefix(msg, anthropicContextOverflow) {
		k.code = "context_length_exceeded"
	}
	return k
}

func anthropicErrorToOpenAI(status int, body []byte) (int, []byte) {
	typ, msg := anthropicErrorFields(body)
	k := anthropicToOpenAIKind(status, typ, msg)
	return k.status, openAIErrorBody(k, msg)
}

func openAIErrorBody(k openAIErrorKind, msg string) []byte {
	var code any
	if k.code != "" {
		code = k.code
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": k.typ, "param": nil, "code": code}})
	return b
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
