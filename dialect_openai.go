package llmhedge

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
)

// The OpenAI Chat Completions API: POST /v1/chat/completions, unnamed SSE
// chunks ending with `data: [DONE]`, the key as a Bearer token. It is also
// the shape of the many OpenAI-compatible providers, so a forwarded call
// no other dialect claims is taken to be OpenAI's.

// openAIDialect is the OpenAI Chat Completions API.
type openAIDialect struct{}

var dialectOpenAI dialect = openAIDialect{}

func (openAIDialect) String() string { return "openai" }

func (openAIDialect) isCompletionPath(path string) bool {
	return path == "/v1/chat/completions" || path == "/chat/completions"
}

func (openAIDialect) completionPath(string) string { return "/v1/chat/completions" }

var openAIAuxPaths = []auxPath{
	{http.MethodGet, "/v1/models"},
	{http.MethodGet, "/v1/models/{id}"},
}

func (openAIDialect) auxPaths() []auxPath { return openAIAuxPaths }

// sniffAux: any path is OpenAI's unless another dialect claims it.
func (openAIDialect) sniffAux(string, headerGetter) int { return 1 }

func (openAIDialect) parseRequest(_, _ string, body []byte) (*llmRequest, error) {
	return parseRequestBody(body)
}

func (d openAIDialect) upstreamPath(string, string) string { return d.completionPath("") }

func (openAIDialect) bodyFor(req *llmRequest, model string) []byte { return req.spliceModel(model) }

// sessionKey is prompt_cache_key (literally the cache key), else user,
// else safety_identifier.
func (openAIDialect) sessionKey(body []byte, _ http.Header) string {
	var cacheKey, user, safety string
	_ = jsonscan.ScanTopLevel(body, func(key []byte, vStart, vEnd int) bool {
		v := body[vStart:vEnd]
		switch string(key) {
		case "prompt_cache_key":
			cacheKey = jsonscan.Unquote(v)
		case "user":
			user = jsonscan.Unquote(v)
		case "safety_identifier":
			safety = jsonscan.Unquote(v)
		}
		return true
	})
	switch {
	case cacheKey != "":
		return cacheKey
	case user != "":
		return user
	}
	return safety
}

var openAICredentialHeaders = []string{"Authorization", "OpenAI-Organization", "OpenAI-Project"}

func (openAIDialect) credentialHeaders() []string { return openAICredentialHeaders }

func (openAIDialect) setAuth(h http.Header, key string) { h.Set("Authorization", "Bearer "+key) }

func (openAIDialect) inspect(ev sse.Event, withText bool, cs *choiceSet) eventInfo {
	return inspectOpenAI(ev, withText, cs)
}

// OpenAI chunks carry no event name: the choices say what they hold.
func inspectOpenAI(ev sse.Event, withText bool, cs *choiceSet) eventInfo {
	var info eventInfo
	data := ev.Data
	start := jsonscan.SkipSpace(data, 0)
	if string(ev.Name) == "error" {
		info.class = evError
		info.errVal, _ = jsonscan.Lookup(data, "error")
		return info
	}
	if start == len(data) {
		return info // no payload: a comment or keepalive
	}
	if data[start] == '[' && isDoneMarker(data[start:]) {
		info.class = evTerminal
		return info
	}
	it, ok := jsonscan.Open(data, start, 0)
	if !ok || !it.IsObject() {
		info.class = evMalformed
		return info
	}
	finish := false
	for it.Next() {
		switch {
		case it.KeyIs("error"):
			info.errVal = it.Value()
		case it.KeyIs("choices"):
			choices, ok := it.Enter()
			if !ok {
				continue
			}
			for !choices.IsObject() && choices.Next() {
				choice, ok := choices.Enter()
				index, finished := int64(0), false // a choice without an index is choice 0
				for ok && choice.IsObject() && choice.Next() {
					switch {
					case choice.KeyIs("finish_reason"):
						if jsonscan.NonEmpty(choice.Value()) {
							finish, finished = true, true
						}
					case choice.KeyIs("index"):
						if n, isInt := jsonscan.Int(choice.Value()); isInt {
							index = n
						} else {
							index = -1
						}
					case choice.KeyIs("delta"):
						if delta, ok := choice.Enter(); ok {
							openAIDelta(&delta, &info, withText)
							choice.Leave(&delta)
						}
					}
				}
				if ok {
					choices.Leave(&choice)
					if cs != nil && choice.IsObject() {
						cs.note(index, finished)
					}
				}
			}
			it.Leave(&choices)
		}
	}
	switch {
	case !it.End():
		info.class = evMalformed
	case info.errVal != nil && !jsonscan.IsNull(info.errVal):
		info.class = evError
	case finish:
		info.class = evFinish
		if info.by == "" {
			info.by = "finish_reason"
		}
	case info.by != "":
		info.class = evOutput
	}
	return info
}

// openAIDelta notes which member of a choice's delta carries output (the
// first one, for the commit log) and the raw content string.
func openAIDelta(delta *jsonscan.Iter, info *eventInfo, withText bool) {
	for delta.IsObject() && delta.Next() {
		var name string
		switch {
		case delta.KeyIs("content"):
			name = "content"
		case delta.KeyIs("reasoning_content"):
			name = "reasoning_content"
		case delta.KeyIs("reasoning"):
			name = "reasoning"
		case delta.KeyIs("tool_calls"):
			name = "tool_calls"
		case delta.KeyIs("function_call"):
			name = "function_call"
		case delta.KeyIs("refusal"):
			name = "refusal"
		default:
			continue
		}
		v := delta.Value()
		if info.by == "" && jsonscan.NonEmpty(v) {
			info.by = name
		}
		if withText && name == "content" && info.text == nil && jsonscan.IsString(v) {
			info.text = v
		}
	}
}

func isDoneMarker(b []byte) bool {
	return len(b) >= 6 && string(b[:6]) == "[DONE]" && jsonscan.SkipSpace(b, 6) == len(b)
}

func (openAIDialect) terminalName(sse.Event) string { return "[DONE]" }

// finishGrace: a chunk with every choice's finish_reason completes the
// answer before [DONE].
func (openAIDialect) finishGrace() bool { return true }

// streamEnd: the grace ends the stream with the [DONE] the SDKs wait for.
func (openAIDialect) streamEnd() []byte { return doneEvent }

// checkBody wants a non-empty choices array and no error.
func (openAIDialect) checkBody(body []byte) (reason string, err error) {
	var m [2][]byte
	if reason, err := bodyMembers(body, m[:], "error", "choices"); err != nil {
		return reason, err
	}
	errVal, choices := m[0], m[1]
	if errVal != nil && !jsonscan.IsNull(errVal) {
		return errorBody(errVal, body)
	}
	if !isNonEmptyArray(choices) {
		return "empty_choices", errors.New("upstream 200 body has no choices")
	}
	return "", nil
}

// checkBodyReject reads the answer text from choices[].message.content.
func (openAIDialect) checkBodyReject(body []byte, reject [][]byte) error {
	var text []byte
	choices, _ := jsonscan.Lookup(body, "choices")
	arr, ok := jsonscan.Open(choices, 0, 0)
	for ok && !arr.IsObject() && arr.Next() {
		if c, ok := jsonscan.Lookup(arr.Value(), "message", "content"); ok {
			text = appendAnswerText(text, c)
		}
	}
	return rejectedIn(text, reject)
}

// observeEvent reads the chunks that may carry usage (and the first that
// names the model); the rest are skipped by a substring check.
func (openAIDialect) observeEvent(u *usage, ev sse.Event) {
	if u.Model == "" || mayCarryUsage(ev.Data) {
		u.observeOpenAI(ev.Data)
	}
}

func (openAIDialect) observeBody(u *usage, body []byte) { u.observeOpenAI(body) }

// mayCarryUsage is true unless the chunk has no "usage" member or only a
// "usage":null (which OpenAI sends on every chunk with include_usage).
func mayCarryUsage(data []byte) bool {
	i := bytes.Index(data, usageKey)
	if i < 0 {
		return false
	}
	j := jsonscan.SkipSpace(data, i+len(usageKey))
	if j < len(data) && data[j] == ':' {
		j = jsonscan.SkipSpace(data, j+1)
		if len(data)-j >= 4 && string(data[j:j+4]) == "null" {
			return bytes.Contains(data[j:], usageKey)
		}
	}
	return true
}

// observeOpenAI reads the model and the usage of a chunk or a body:
// prompt_tokens, completion_tokens, prompt_tokens_details.cached_tokens.
func (u *usage) observeOpenAI(obj []byte) {
	it, ok := jsonscan.Open(obj, 0, 0)
	for ok && it.IsObject() && it.Next() {
		switch {
		case it.KeyIs("model"):
			if v := it.Value(); u.Model == "" && len(v) > 2 && v[0] == '"' {
				u.Model = string(jsonscan.AppendString(nil, v))
			}
		case it.KeyIs("usage"):
			if uo, ok := it.Enter(); ok {
				u.readTokenCounts(&uo, "prompt_tokens", "completion_tokens", "prompt_tokens_details")
				it.Leave(&uo)
			}
		}
	}
}

// modelMissing: the model_not_found code, or "The model `x` does not
// exist" (what OpenAI-compatible servers copy).
func (openAIDialect) modelMissing(body []byte) bool {
	if errorField(body, "code") == "model_not_found" {
		return true
	}
	msg := errorField(body, "message")
	return strings.HasPrefix(msg, "the model ") && strings.Contains(msg, "does not exist")
}

// promptTooLong: the context_length_exceeded code, or "This model's
// maximum context length is N tokens" (what compatible servers copy).
func (openAIDialect) promptTooLong(body []byte) bool {
	return errorField(body, "code") == "context_length_exceeded" || strings.Contains(errorField(body, "message"), "maximum context length")
}

func (openAIDialect) classify(status int, body []byte, passThroughKey bool) failClass {
	return classifyAnswer(status, body, passThroughKey)
}

// retryDelay: OpenAI's hints are in the headers only.
func (openAIDialect) retryDelay([]byte) (time.Duration, bool) { return 0, false }

func (openAIDialect) errorType(status int) string { return openAIErrorType(status) }

// openAIErrorType maps a status to OpenAI's conventional error types.
func openAIErrorType(status int) string {
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

type openaiErrorBody struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    string `json:"code"`
	} `json:"error"`
}

func (openAIDialect) errorJSON(status int, message string) []byte {
	return openAIErrorJSON(status, message)
}

// openAIErrorJSON is OpenAI's error body: message, type and code.
func openAIErrorJSON(status int, message string) []byte {
	var b openaiErrorBody
	b.Error.Message = message
	b.Error.Type = openAIErrorType(status)
	b.Error.Code = errorCode(status)
	out, _ := json.Marshal(b) // plain structs of strings: cannot fail
	return out
}

// errorEvent is a data line holding an error object: what both official
// SDKs raise as an error.
func (openAIDialect) errorEvent(status int, message string) []byte {
	return sseErrorEvent("", openAIErrorJSON(status, message))
}

func (openAIDialect) cachedInInput() bool { return true }
