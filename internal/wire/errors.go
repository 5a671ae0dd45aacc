package wire

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
)

// errorType maps an HTTP status to the error type dialect d uses for it.
func errorType(d Dialect, status int) string { return d.ErrorType(status) }

// errorCode is the OpenAI `code` field: a short machine-readable reason.
func ErrorCode(status int) string {
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

// errorJSON renders an error object in the dialect's shape. Status picks
// the type; message is what the client reads.
func errorJSON(d Dialect, status int, message string) []byte { return d.ErrorJSON(status, message) }

// writeError sends a complete error response before anything was
// committed to the client.
func WriteError(w http.ResponseWriter, d Dialect, status int, message string) {
	h := w.Header()
	var body []byte
	if r, ok := d.(RetryErrorShaper); ok {
		if secs, err := strconv.Atoi(h.Get("Retry-After")); err == nil && secs > 0 {
			body = r.ErrorJSONRetry(status, message, secs)
		}
	}
	if body == nil {
		body = errorJSON(d, status, message)
	}
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Del("Content-Encoding")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// RetryErrorShaper is a dialect whose clients read the retry delay from
// the error body, not the Retry-After header: Gemini's (a RetryInfo
// detail, which Gemini CLI reads to wait or, past its limit, to give up).
// WriteError uses it when the response already carries a Retry-After in
// seconds, so the body says the same as the header.
type RetryErrorShaper interface {
	ErrorJSONRetry(status int, message string, retryAfterSecs int) []byte
}

// errorEvent renders the SSE event that ends a committed stream with a
// failure, in the client's dialect.
func ErrorEvent(d Dialect, status int, message string) []byte { return d.ErrorEvent(status, message) }

// sseErrorEvent frames an error body as an SSE event, named when name is
// not empty.
func SSEErrorEvent(name string, body []byte) []byte {
	out := make([]byte, 0, len(body)+32)
	if name != "" {
		out = append(out, "event: "...)
		out = append(out, name...)
		out = append(out, '\n')
	}
	out = append(out, "data: "...)
	out = append(out, body...)
	out = append(out, "\n\n"...)
	return out
}

// upstreamErrorMessage renders the upstream's own words from a raw "error"
// value (an object with type and message, or a string), falling back to
// the clipped event data.
func UpstreamErrorMessage(errVal, data []byte) string {
	if jsonscan.IsString(errVal) {
		return string(jsonscan.AppendString(nil, errVal))
	}
	if it, ok := jsonscan.Open(errVal, 0, 0); ok && it.IsObject() {
		var typ, msg []byte
		for it.Next() {
			switch {
			case it.KeyIs("type"), it.KeyIs("code") && typ == nil:
				if v := it.Value(); jsonscan.IsString(v) {
					typ = jsonscan.AppendString(nil, v)
				}
			case it.KeyIs("message"):
				if v := it.Value(); jsonscan.IsString(v) {
					msg = jsonscan.AppendString(nil, v)
				}
			}
		}
		switch {
		case len(typ) > 0 && len(msg) > 0:
			return string(typ) + ": " + string(msg)
		case len(msg) > 0:
			return string(msg)
		case len(typ) > 0:
			return string(typ)
		}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return "(no details)"
	}
	return strconv.Quote(string(ClipData(data, 200)))
}

// clipData shortens b for an error message.
func ClipData(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// errorField is the string member name of an error body's "error" object,
// lower-cased, or "".
func ErrorField(body []byte, name string) string {
	v, ok := jsonscan.Lookup(body, "error", name)
	if !ok || !jsonscan.IsString(v) {
		return ""
	}
	return strings.ToLower(jsonscan.Unquote(v))
}

// MaxErrorBody bounds an upstream error body kept for the client.
const MaxErrorBody = 64 << 10

// UpstreamMessage renders the upstream's own words from an error body in
// either dialect (`{"error":{...}}` or `{"type":"error","error":{...}}`).
func UpstreamMessage(body []byte) string {
	errVal, _ := jsonscan.Lookup(body, "error")
	return UpstreamErrorMessage(errVal, body)
}
