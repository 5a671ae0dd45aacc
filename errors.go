package llmhedge

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// errorType maps an HTTP status to the error type each dialect uses for it
// (Anthropic's documented types; OpenAI's conventional ones).
func errorType(d dialect, status int) string {
	if d == dialectAnthropic {
		switch status {
		case 400:
			return "invalid_request_error"
		case 401:
			return "authentication_error"
		case 403:
			return "permission_error"
		case 404:
			return "not_found_error"
		case 413:
			return "request_too_large"
		case 429:
			return "rate_limit_error"
		case 504:
			return "timeout_error"
		case 503, 529:
			return "overloaded_error"
		}
		if status >= 400 && status < 500 {
			return "invalid_request_error"
		}
		return "api_error"
	}
	switch status {
	case 400, 404, 405, 413, 422:
		return "invalid_request_error"
	case 401:
		return "authentication_error"
	case 403:
		return "permission_error"
	case 429:
		return "rate_limit_error"
	case 504:
		return "timeout"
	}
	if status >= 400 && status < 500 {
		return "invalid_request_error"
	}
	return "server_error"
}

// errorCode is the OpenAI `code` field: a short machine-readable reason.
func errorCode(status int) string {
	switch status {
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_exceeded"
	case 503, 529:
		return "service_unavailable"
	case 504:
		return "timeout"
	}
	return strconv.Itoa(status)
}

type anthropicErrorBody struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

type openaiErrorBody struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    string `json:"code"`
	} `json:"error"`
}

// errorJSON renders an error object in the dialect's shape. Status picks
// the type; message is what the client reads.
func errorJSON(d dialect, status int, message string) []byte {
	var v any
	if d == dialectAnthropic {
		var b anthropicErrorBody
		b.Type = "error"
		b.Error.Type = errorType(d, status)
		b.Error.Message = message
		v = b
	} else {
		var b openaiErrorBody
		b.Error.Message = message
		b.Error.Type = errorType(d, status)
		b.Error.Code = errorCode(status)
		v = b
	}
	out, _ := json.Marshal(v) // plain structs of strings: cannot fail
	return out
}

// writeError sends a complete error response before anything was
// committed to the client.
func writeError(w http.ResponseWriter, d dialect, status int, message string) {
	body := errorJSON(d, status, message)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Del("Content-Encoding")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// errorEvent renders the SSE event that ends a committed stream with a
// failure, in the client's dialect: Anthropic `event: error`, OpenAI a data
// line holding an error object (what both official SDKs raise as an error).
func errorEvent(d dialect, status int, message string) []byte {
	body := errorJSON(d, status, message)
	out := make([]byte, 0, len(body)+32)
	if d == dialectAnthropic {
		out = append(out, "event: error\n"...)
	}
	out = append(out, "data: "...)
	out = append(out, body...)
	out = append(out, "\n\n"...)
	return out
}
