package responses

// The Responses dialect (dialect.go): response ids, session keys and error shapes.

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/llmhedge/caddy-llm-hedge/internal/dialect/openai"
	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// maxResponseIDLen bounds a response id the proxy remembers or looks up.
const MaxResponseIDLen = wire.MaxObjectIDLen

// responsesCreatedID returns the id of the response a response.created
// event announces (response.id), or "" for any other event or an id that
// is not a plausible one (see validResponseID). Other events cost one
// read of the data's leading "type".
func CreatedID(ev sse.Event) string {
	typ, _ := jsonscan.Lookup(ev.Data, "type")
	var buf [64]byte
	if string(responsesKind(typ, ev.Name, buf[:0])) != "response.created" {
		return ""
	}
	id, _ := jsonscan.Lookup(ev.Data, "response", "id")
	return responseIDValue(id)
}

// responsesBodyID returns the top-level id of a complete non-stream
// response body, or "".
func BodyID(body []byte) string {
	id, _ := jsonscan.Lookup(body, "id")
	return responseIDValue(id)
}

// previousResponseID returns the top-level previous_response_id of a
// request body, or "" when it is absent, null or not a plausible id. Like
// the providers (and encoding/json), the last of duplicate keys counts, so
// the proxy pins the request to the provider that will read that id. A
// body that is not a JSON object has none.
func PreviousResponseID(body []byte, top *jsonscan.Top) string {
	var id string
	err := top.Scan(body, func(key []byte, s, e int) bool {
		if jsonscan.KeyIs(key, "previous_response_id") {
			id = responseIDValue(body[s:e])
		}
		return true
	})
	if err != nil {
		return ""
	}
	return id
}

// responseIDValue decodes a raw JSON string holding a response id: a
// provider-held object id as wire.ObjectIDValue reads one.
func responseIDValue(v []byte) string { return wire.ObjectIDValue(v) }

// ValidResponseID reports whether id is one the proxy stores, logs and
// matches against request paths (wire.ValidObjectID).
func ValidResponseID(id []byte) bool { return wire.ValidObjectID(id) }

// responsesSessionKey returns the key that identifies a conversation for
// affinity, or "": with headerName set only that header; otherwise the
// body's top-level prompt_cache_key (literally the cache key), else the
// session-id header, else conversation_id (what Codex CLI sends).
func SessionKey(body []byte, top *jsonscan.Top, header http.Header, headerName string) string {
	if headerName != "" {
		return strings.TrimSpace(header.Get(headerName))
	}
	var cacheKey string
	_ = top.Scan(body, func(key []byte, s, e int) bool {
		if jsonscan.KeyIs(key, "prompt_cache_key") {
			if v := body[s:e]; jsonscan.IsString(v) {
				cacheKey = jsonscan.Unquote(v)
			} else {
				cacheKey = ""
			}
		}
		return true
	})
	if cacheKey != "" {
		return cacheKey
	}
	if k := strings.TrimSpace(header.Get("session-id")); k != "" {
		return k
	}
	return strings.TrimSpace(header.Get("conversation_id"))
}

// responsesErrorJSON is the error body before commit: OpenAI's shape.
func ErrorJSON(status int, message string) []byte {
	return openai.ErrorJSON(status, message)
}

// responsesErrorEventBody is the Responses API error event
// (ResponseErrorEvent: type, code, message, param, sequence_number) plus
// the OpenAI error object under "error": the official SDKs raise a stream
// error only for data with a top-level "error" member (openai-go's
// ssestream, openai-python's Stream); without it the event decodes as an
// ordinary event and the stream then ends cleanly.
type responsesErrorEventBody struct {
	Type           string  `json:"type"`
	Code           string  `json:"code"`
	Message        string  `json:"message"`
	Param          *string `json:"param"`
	SequenceNumber *int64  `json:"sequence_number,omitempty"`
	Error          struct {
		Type    string `json:"type"`
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// responsesErrorEvent renders the event that ends a committed Responses
// stream with a failure. seq is the sequence_number to give it (one past
// the last relayed), or negative to leave it out.
func ErrorEvent(status int, message string, seq int64) []byte {
	var b responsesErrorEventBody
	b.Type = "error"
	b.Code = wire.ErrorCode(status)
	b.Message = message
	if seq >= 0 {
		b.SequenceNumber = &seq
	}
	b.Error.Type = openai.ErrorType(status)
	b.Error.Code = b.Code
	b.Error.Message = message
	body, _ := json.Marshal(b) // plain structs of strings and numbers: cannot fail
	out := make([]byte, 0, len(body)+32)
	out = append(out, "event: error\ndata: "...)
	out = append(out, body...)
	return append(out, "\n\n"...)
}

// responseStored reports whether a request asks the provider to keep its
// response: unless its top-level store is false (the last of duplicate
// keys counts, as for the provider).
func ResponseStored(body []byte, top *jsonscan.Top) bool {
	stored := true
	_ = top.Scan(body, func(key []byte, s, e int) bool {
		if jsonscan.KeyIs(key, "store") {
			stored = string(body[s:e]) != "false"
		}
		return true
	})
	return stored
}
