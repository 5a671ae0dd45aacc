package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// The OpenAI Chat Completions API: POST /v1/chat/completions, unnamed SSE
// chunks ending with `data: [DONE]`, the key as a Bearer token. It is also
// the shape of the many OpenAI-compatible providers, so a forwarded call
// no other dialect claims is taken to be OpenAI's.

// openAIDialect is the OpenAI Chat Completions API.
type Dialect struct{}

func (Dialect) String() string { return "openai" }

func (Dialect) IsCompletionPath(path string) bool {
	return path == "/v1/chat/completions" || path == "/chat/completions"
}

func (Dialect) CompletionPath(string) string { return "/v1/chat/completions" }

var openAIAuxPaths = []wire.AuxPath{
	{Method: http.MethodGet, Path: "/v1/models"},
	{Method: http.MethodGet, Path: "/v1/models/{id}"},
}

func (Dialect) AuxPaths() []wire.AuxPath { return openAIAuxPaths }

// sniffAux: any path is OpenAI's unless another dialect claims it, on a
// guess.
func (Dialect) SniffAux(string, wire.HeaderGetter) int { return wire.SniffGuess }

func (Dialect) ParseRequest(_, _ string, body []byte) (*wire.Request, error) {
	return wire.ParseRequestBodyWatching(body, objectWords)
}

func (d Dialect) UpstreamPath(string, string) string { return d.CompletionPath("") }

func (Dialect) BodyFor(req *wire.Request, model string) []byte { return req.SpliceModel(model) }

// sessionKey is prompt_cache_key (literally the cache key), else user,
// else safety_identifier.
func (Dialect) SessionKey(body []byte, top *jsonscan.Top, _ http.Header) string {
	var cacheKey, user, safety string
	_ = top.Scan(body, func(key []byte, vStart, vEnd int) bool {
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

var CredentialHeaders = []string{"Authorization", "OpenAI-Organization", "OpenAI-Project"}

func (Dialect) CredentialHeaders() []string { return CredentialHeaders }

func (Dialect) SetAuth(h http.Header, key string) { h.Set("Authorization", "Bearer "+key) }

func (Dialect) Inspect(ev sse.Event, withText bool, cs *wire.ChoiceSet) wire.EventInfo {
	return inspectOpenAI(ev, withText, cs)
}

// OpenAI chunks carry no event name: the choices say what they hold.
func inspectOpenAI(ev sse.Event, withText bool, cs *wire.ChoiceSet) wire.EventInfo {
	var info wire.EventInfo
	data := ev.Data
	start := jsonscan.SkipSpace(data, 0)
	if string(ev.Name) == "error" {
		info.Class = wire.EvError
		info.ErrVal, _ = jsonscan.Lookup(data, "error")
		return info
	}
	if start == len(data) {
		return info // no payload: a comment or keepalive
	}
	if data[start] == '[' && isDoneMarker(data[start:]) {
		info.Class = wire.EvTerminal
		return info
	}
	if info, ok := inspectFramed(data, withText, cs); ok {
		return info
	}
	it, ok := jsonscan.Open(data, start, 0)
	if !ok || !it.IsObject() {
		info.Class = wire.EvMalformed
		return info
	}
	// The walk reads the text where the resumer asks for it, and where a
	// stream's memo may keep the chunk's frame (cs): a stream with no
	// resumer (a translated one, or continuation off) reads its deltas by
	// the frame too. Without withText the text is not given.
	withText, askedText := withText || cs != nil, withText
	finish := false
	// plain: one choice, index 0, whose delta holds at most a content
	// string and a role, and no usage: what the resumer reads (withText).
	plain, choiceKeys, n := withText, 0, 0
	single := true   // one choice, index 0, each of its members once
	var byVal []byte // the value of the member info.By names
	var usage []byte
	usageOdd := false
	for it.Next() {
		switch {
		case it.KeyIs("error"):
			info.ErrVal = it.Value()
		case it.KeyIs("usage"):
			usageOdd = usageOdd || usage != nil || string(it.Key) != "usage"
			if usage = it.Value(); jsonscan.NonEmpty(usage) {
				plain = false
			}
		case it.KeyIs("choices"):
			choiceKeys++
			choices, ok := it.Enter()
			if !ok {
				continue
			}
			for !choices.IsObject() && choices.Next() {
				n++
				choice, ok := choices.Enter()
				index, finished := int64(0), false // a choice without an index is choice 0
				keys := [3]int{}                   // finish_reason, index, delta
				for ok && choice.IsObject() && choice.Next() {
					switch {
					case choice.KeyIs("finish_reason"):
						keys[0]++
						if jsonscan.NonEmpty(choice.Value()) {
							finish, finished = true, true
						}
					case choice.KeyIs("index"):
						keys[1]++
						if n, isInt := jsonscan.Int(choice.Value()); isInt {
							index = n
						} else {
							index = -1
						}
					case choice.KeyIs("delta"):
						keys[2]++
						if delta, ok := choice.Enter(); ok {
							if !openAIDelta(&delta, &info, withText, &byVal) || !delta.IsObject() {
								plain = false
							}
							choice.Leave(&delta)
						} else {
							plain = false
						}
					}
				}
				if !ok || !choice.IsObject() || index != 0 || keys[0] > 1 || keys[1] > 1 || keys[2] > 1 {
					plain, single = false, false
				}
				if ok {
					choices.Leave(&choice)
					if cs != nil && choice.IsObject() {
						cs.Note(index, finished)
					}
				}
			}
			it.Leave(&choices)
		}
	}
	info.Plain = plain && choiceKeys == 1 && n == 1
	info.UsageRead, info.Usage = !usageOdd, usage
	switch {
	case !it.End():
		info.Class = wire.EvMalformed
		info.UsageRead, info.Usage = false, nil
	case info.ErrVal != nil && !jsonscan.IsNull(info.ErrVal):
		info.Class = wire.EvError
	case finish:
		info.Class = wire.EvFinish
		if info.By == "" {
			info.By = "finish_reason"
		}
	case info.By != "":
		info.Class = wire.EvOutput
		if withText {
			rememberFrame(data, &info, cs, single && choiceKeys == 1 && n == 1, byVal)
		}
	}
	if !askedText {
		info.Text, info.Plain = nil, false
	}
	return info
}

// openAIDelta notes which member of a choice's delta carries output (the
// first one, for the commit log; its value in byVal) and the raw content
// string. plain (with the text) says the delta holds at most one content
// string and a role.
func openAIDelta(delta *jsonscan.Iter, info *wire.EventInfo, withText bool, byVal *[]byte) (plain bool) {
	plain = withText
	contents := 0
	for delta.IsObject() && delta.Next() {
		var name string
		switch {
		case delta.KeyIs("content"):
			name = "content"
			contents++
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
		case withText && delta.KeyIs("role"):
			continue
		default:
			if withText && jsonscan.NonEmpty(delta.Value()) {
				plain = false // output the resumer does not continue
			}
			continue
		}
		v := delta.Value()
		if withText && name != "content" && jsonscan.NonEmpty(v) {
			plain = false
		}
		if withText && name == "content" && (contents > 1 || !jsonscan.IsString(v) && jsonscan.NonEmpty(v)) {
			plain = false
		}
		if info.By == "" && jsonscan.NonEmpty(v) {
			info.By, *byVal = name, v
		}
		if withText && name == "content" && info.Text == nil && jsonscan.IsString(v) {
			info.Text = v
		}
	}
	return plain
}

func isDoneMarker(b []byte) bool {
	return len(b) >= 6 && string(b[:6]) == "[DONE]" && jsonscan.SkipSpace(b, 6) == len(b)
}

func (Dialect) TerminalName(sse.Event) string { return "[DONE]" }

// finishGrace: a chunk with every choice's finish_reason completes the
// answer before [DONE].
func (Dialect) FinishGrace() bool { return true }

// streamEnd: the grace ends the stream with the [DONE] the SDKs wait for.
func (Dialect) StreamEnd() []byte { return wire.DoneEvent }

// checkBody wants a non-empty choices array and no error.
func (Dialect) CheckBody(body []byte) (reason string, err error) {
	var m [2][]byte
	if reason, err := wire.BodyMembers(body, m[:], "error", "choices"); err != nil {
		return reason, err
	}
	errVal, choices := m[0], m[1]
	if errVal != nil && !jsonscan.IsNull(errVal) {
		return wire.ErrorBody(errVal, body)
	}
	if !wire.IsNonEmptyArray(choices) {
		return "empty_choices", errors.New("upstream 200 body has no choices")
	}
	return "", nil
}

// checkBodyReject reads the answer text from choices[].message.content.
func (Dialect) CheckBodyReject(body []byte, reject [][]byte) error {
	var text []byte
	choices, _ := jsonscan.Lookup(body, "choices")
	arr, ok := jsonscan.Open(choices, 0, 0)
	for ok && !arr.IsObject() && arr.Next() {
		if c, ok := jsonscan.Lookup(arr.Value(), "message", "content"); ok {
			text = wire.AppendAnswerText(text, c)
		}
	}
	return wire.RejectedIn(text, reject)
}

// observeEvent reads the chunks that may carry usage (and the first that
// names the model); the rest are skipped by a substring check.
func (Dialect) ObserveEvent(u *wire.Usage, ev sse.Event) {
	if u.Model == "" || mayCarryUsage(ev.Data) {
		observeOpenAI(u, ev.Data)
	}
}

func (Dialect) ObserveBody(u *wire.Usage, body []byte) { observeOpenAI(u, body) }

// ObserveInfo is ObserveEvent from what inspect read: once the model is
// known, only a top-level usage object counts, and inspect has it.
func (d Dialect) ObserveInfo(u *wire.Usage, ev sse.Event, info wire.EventInfo) {
	if u.Model == "" || !info.UsageRead {
		if len(ev.Data) > 0 {
			d.ObserveEvent(u, ev)
		}
		return
	}
	if uo, ok := jsonscan.Open(info.Usage, 0, 1); ok {
		u.ReadTokenCounts(&uo, "prompt_tokens", "completion_tokens", "prompt_tokens_details")
	}
}

// mayCarryUsage is true unless the chunk has no "usage" member or only a
// "usage":null (which OpenAI sends on every chunk with include_usage).
func mayCarryUsage(data []byte) bool {
	i := bytes.Index(data, wire.UsageKey)
	if i < 0 {
		return false
	}
	j := jsonscan.SkipSpace(data, i+len(wire.UsageKey))
	if j < len(data) && data[j] == ':' {
		j = jsonscan.SkipSpace(data, j+1)
		if len(data)-j >= 4 && string(data[j:j+4]) == "null" {
			return bytes.Contains(data[j:], wire.UsageKey)
		}
	}
	return true
}

// observeOpenAI reads the model and the usage of a chunk or a body:
// prompt_tokens, completion_tokens, prompt_tokens_details.cached_tokens.
func observeOpenAI(u *wire.Usage, obj []byte) {
	it, ok := jsonscan.Open(obj, 0, 0)
	for ok && it.IsObject() && it.Next() {
		switch {
		case it.KeyIs("model"):
			if v := it.Value(); u.Model == "" && len(v) > 2 && v[0] == '"' {
				u.Model = string(jsonscan.AppendString(nil, v))
			}
		case it.KeyIs("usage"):
			if uo, ok := it.Enter(); ok {
				u.ReadTokenCounts(&uo, "prompt_tokens", "completion_tokens", "prompt_tokens_details")
				it.Leave(&uo)
			}
		}
	}
}

// modelMissing: the model_not_found code, or "The model `x` does not
// exist" (what OpenAI-compatible servers copy).
func (Dialect) ModelMissing(body []byte) bool {
	if wire.ErrorField(body, "code") == "model_not_found" {
		return true
	}
	msg := wire.ErrorField(body, "message")
	return strings.HasPrefix(msg, "the model ") && strings.Contains(msg, "does not exist")
}

// promptTooLong: the context_length_exceeded code, or "This model's
// maximum context length is N tokens" (what compatible servers copy).
func (Dialect) PromptTooLong(body []byte) bool {
	return wire.ErrorField(body, "code") == "context_length_exceeded" || strings.Contains(wire.ErrorField(body, "message"), "maximum context length")
}

func (Dialect) Classify(status int, body []byte, passThroughKey bool) wire.FailClass {
	return wire.ClassifyAnswer(status, body, passThroughKey)
}

// retryDelay: OpenAI's hints are in the headers only.
func (Dialect) RetryDelay([]byte) (time.Duration, bool) { return 0, false }

func (Dialect) ErrorType(status int) string { return ErrorType(status) }

// openAIErrorType maps a status to OpenAI's conventional error types.
func ErrorType(status int) string {
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

func (Dialect) ErrorJSON(status int, message string) []byte {
	return ErrorJSON(status, message)
}

// openAIErrorJSON is OpenAI's error body: message, type and code.
func ErrorJSON(status int, message string) []byte {
	var b openaiErrorBody
	b.Error.Message = message
	b.Error.Type = ErrorType(status)
	b.Error.Code = wire.ErrorCode(status)
	out, _ := json.Marshal(b) // plain structs of strings: cannot fail
	return out
}

// errorEvent is a data line holding an error object: what both official
// SDKs raise as an error.
func (Dialect) ErrorEvent(status int, message string) []byte {
	return wire.SSEErrorEvent("", ErrorJSON(status, message))
}

func (Dialect) CachedInInput() bool { return true }
