package gemini

// The Gemini dialect (dialect.go): error shapes, statuses and classification.

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/limit"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// geminiStatus is Google's canonical status name for an HTTP status
// (google.rpc.Code's HTTP mapping; 502 and 529, which have none, read as
// UNAVAILABLE: the client may retry).
func geminiStatus(status int) string {
	switch status {
	case 400, 413, 422:
		return "INVALID_ARGUMENT"
	case 401:
		return "UNAUTHENTICATED"
	case 403:
		return "PERMISSION_DENIED"
	case 404:
		return "NOT_FOUND"
	case 409:
		return "ABORTED"
	case 429:
		return "RESOURCE_EXHAUSTED"
	case 499:
		return "CANCELLED"
	case 500:
		return "INTERNAL"
	case 501:
		return "UNIMPLEMENTED"
	case 502, 503, 529:
		return "UNAVAILABLE"
	case 504:
		return "DEADLINE_EXCEEDED"
	}
	if status >= 400 && status < 500 {
		return "FAILED_PRECONDITION"
	}
	return "INTERNAL"
}

type geminiErrorBody struct {
	Error struct {
		Code    int           `json:"code"`
		Message string        `json:"message"`
		Status  string        `json:"status"`
		Details []retryDetail `json:"details,omitempty"`
	} `json:"error"`
}

// retryDetail is a google.rpc.RetryInfo error detail.
type retryDetail struct {
	Type       string `json:"@type"`
	RetryDelay string `json:"retryDelay"`
}

// geminiErrorJSON is the error body before commit, Google's shape: the
// genai SDKs read it as an APIError with that code, message and status.
func ErrorJSON(status int, message string) []byte { return errorBody(status, message, nil) }

// ErrorJSONRetry is ErrorJSON with the client's Retry-After as a
// google.rpc.RetryInfo detail, as Google sends it on a 429: Gemini CLI
// reads the delay there, never in the header, and without it retries on
// its own backoff (ten times, for minutes, even when the pool said an hour).
func ErrorJSONRetry(status int, message string, retryAfterSecs int) []byte {
	return errorBody(status, message, []retryDetail{{geminiRetryInfoType, strconv.Itoa(retryAfterSecs) + "s"}})
}

func errorBody(status int, message string, details []retryDetail) []byte {
	var b geminiErrorBody
	b.Error.Code = status
	b.Error.Message = message
	b.Error.Status = geminiStatus(status)
	b.Error.Details = details
	out, _ := json.Marshal(b) // a plain struct of strings and an int: cannot fail
	return out
}

// geminiErrorEvent renders the chunk that ends a committed Gemini stream
// with a failure: a data line holding the error object, which the genai
// SDK yields as an APIError (a stream that just ends is a clean end to
// it). Lines end in CRLF as Google's do.
func ErrorEvent(status int, message string) []byte {
	body := ErrorJSON(status, message)
	out := make([]byte, 0, len(body)+10)
	out = append(out, "data: "...)
	out = append(out, body...)
	return append(out, "\r\n\r\n"...)
}

// geminiRetryDelay reads how long a Gemini error body asks the client to
// wait: the retryDelay ("2s", "0.5s", a protobuf Duration in JSON) of the
// google.rpc.RetryInfo entry in error.details. ok is false when there is
// none or it does not parse; the delay is clamped to [0, 24h].
func RetryDelay(body []byte) (time.Duration, bool) {
	details, _ := jsonscan.Lookup(body, "error", "details")
	arr, ok := jsonscan.Open(details, 0, 0)
	for ok && !arr.IsObject() && arr.Next() {
		entry := arr.Value()
		typ, _ := geminiLast(entry, "@type")
		if !jsonscan.StringIs(typ, geminiRetryInfoType) {
			continue
		}
		v, _ := geminiLast(entry, "retryDelay")
		if !jsonscan.IsString(v) {
			continue
		}
		s, found := strings.CutSuffix(wire.JSONStringValue(v), "s")
		if !found {
			continue
		}
		if ms, ok := limit.ParseDecimalMilli(s); ok && strings.TrimSpace(s) == s {
			return limit.ScaleRetryAfter(ms, time.Millisecond), true
		}
	}
	return 0, false
}

// geminiClassify classifies a non-200 Gemini answer as classifyAnswer
// does, reading Google's error body: a 400 whose ErrorInfo reason is
// API_KEY_INVALID (Gemini's answer to a bad or expired key) is about the
// key, not the request; a 404 is a missing model when its message says
// so (geminiModelMissing). Every other 400 (INVALID_ARGUMENT,
// FAILED_PRECONDITION) is the request's own; 429, 500, 503 and 504 are
// the provider's.
func Classify(status int, body []byte, passThroughKey bool) wire.FailClass {
	switch {
	case status == http.StatusBadRequest && geminiKeyInvalid(body):
		if passThroughKey {
			return wire.ClassClientKey
		}
		return wire.ClassAuth
	case status == http.StatusForbidden && !passThroughKey:
		return geminiForbidden(body)
	case status == http.StatusNotFound && !passThroughKey:
		if geminiModelMissing(body) {
			return wire.ClassModelNotFound
		}
		return wire.ClassRequest
	}
	return wire.ClassifyAnswer(status, body, passThroughKey)
}

// geminiRequestLevel reports whether a non-200 Gemini answer is about the
// request itself (relayed to the client, no failover): see geminiClassify.
func RequestLevel(status int, body []byte) bool {
	return Classify(status, body, false) == wire.ClassRequest
}

// geminiForbidden classifies a 403 PERMISSION_DENIED answered to the
// provider's own key or token (SPEC 15). Only a key that is invalid or
// disabled fails the key: API_KEY_INVALID or "API key not valid",
// SERVICE_DISABLED (the key's project has the API off), BILLING_DISABLED
// or CONSUMER_INVALID (its project has no billing, or is gone), a key
// restriction that blocks this API or caller (API_KEY_*_BLOCKED), a
// suspended consumer, a token without the scope (ADC's
// ACCESS_TOKEN_SCOPE_INSUFFICIENT), expired or missing. IAM_PERMISSION_DENIED (Vertex) is the provider's
// credential lacking a permission, and "unregistered callers" a request
// that reached Google without it: the provider's failure too. Any other
// 403 is about an object the request named that this key cannot see ("You
// do not have permission to access the File ... or it may not exist", a
// cachedContent, a tuned model): the client's own error, passed through,
// with no key disabled and nothing counted against the provider.
func geminiForbidden(body []byte) wire.FailClass {
	if geminiKeyInvalid(body) || strings.HasPrefix(geminiErrorMessage(body), "method doesn't allow unregistered callers") {
		return wire.ClassAuth
	}
	details, _ := jsonscan.Lookup(body, "error", "details")
	arr, ok := jsonscan.Open(details, 0, 0)
	for ok && !arr.IsObject() && arr.Next() {
		r, _ := geminiLast(arr.Value(), "reason")
		if !jsonscan.IsString(r) {
			continue
		}
		switch reason := wire.JSONStringValue(r); {
		case reason == "SERVICE_DISABLED", reason == "CONSUMER_SUSPENDED", reason == "IAM_PERMISSION_DENIED",
			reason == "BILLING_DISABLED", reason == "CONSUMER_INVALID", reason == "ACCESS_TOKEN_SCOPE_INSUFFICIENT",
			reason == "ACCESS_TOKEN_EXPIRED", reason == "CREDENTIALS_MISSING",
			strings.HasPrefix(reason, "API_KEY_") && strings.HasSuffix(reason, "_BLOCKED"):
			return wire.ClassAuth
		}
	}
	return wire.ClassRequest
}

// geminiKeyInvalid reports whether an error body rejects the API key:
// an ErrorInfo detail with reason API_KEY_INVALID, or Google's "API key
// not valid" / "API key expired" message.
func geminiKeyInvalid(body []byte) bool {
	details, _ := jsonscan.Lookup(body, "error", "details")
	arr, ok := jsonscan.Open(details, 0, 0)
	for ok && !arr.IsObject() && arr.Next() {
		if r, _ := geminiLast(arr.Value(), "reason"); jsonscan.StringIs(r, "API_KEY_INVALID") {
			return true
		}
	}
	msg := geminiErrorMessage(body)
	return strings.HasPrefix(msg, "api key not valid") || strings.HasPrefix(msg, "api key expired")
}

// geminiModelMissing reports whether a 404 body says the model does not
// exist: the Gemini API's "models/x is not found for API version v1beta,
// or is not supported for generateContent", or Vertex AI's "Publisher
// Model `...` was not found".
func geminiModelMissing(body []byte) bool {
	msg := geminiErrorMessage(body)
	switch {
	case strings.Contains(msg, "models/") && strings.Contains(msg, " is not found"):
		return true
	case strings.HasPrefix(msg, "publisher model") && strings.Contains(msg, "not found"):
		return true
	}
	return false
}

// geminiPromptTooLong reports whether a 400 body says the prompt is over
// the model's context window ("The input token count (N) exceeds the
// maximum number of tokens allowed (M)."), for context_fallback.
func PromptTooLong(body []byte) bool {
	msg := geminiErrorMessage(body)
	return strings.Contains(msg, "input token count") && strings.Contains(msg, "exceeds the maximum number of tokens")
}

// geminiErrorMessage returns error.message of an error body, lower-cased.
func geminiErrorMessage(body []byte) string {
	v, ok := jsonscan.Lookup(body, "error", "message")
	if !ok || !jsonscan.IsString(v) {
		return ""
	}
	return strings.ToLower(jsonscan.Unquote(v))
}
