package anthropic

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

// The Anthropic Messages API: POST /v1/messages, named SSE events
// (message_start ... content_block_delta ... message_stop), the key in
// X-Api-Key.

// anthropicDialect is the Anthropic Messages API.
type Dialect struct{}

func (Dialect) String() string { return "anthropic" }

func (Dialect) IsCompletionPath(path string) bool {
	return path == "/v1/messages" || path == "/messages"
}

func (Dialect) CompletionPath(string) string { return "/v1/messages" }

var anthropicAuxPaths = []wire.AuxPath{
	{Method: http.MethodGet, Path: "/v1/models"},
	{Method: http.MethodGet, Path: "/v1/models/{id}"},
	{Method: http.MethodPost, Path: "/v1/messages/count_tokens"},
}

func (Dialect) AuxPaths() []wire.AuxPath { return anthropicAuxPaths }

// sniffAux claims a /v1/messages path, or a request with Anthropic's
// version or key header, over the OpenAI fallback.
func (Dialect) SniffAux(path string, h wire.HeaderGetter) int {
	if strings.HasPrefix(path, "/v1/messages") || h.Get("anthropic-version") != "" || h.Get("x-api-key") != "" {
		return 2
	}
	return 0
}

func (Dialect) ParseRequest(_, _ string, body []byte) (*wire.Request, error) {
	return wire.ParseRequestBodyWatching(body, objectWords)
}

func (d Dialect) UpstreamPath(string, string) string { return d.CompletionPath("") }

func (Dialect) BodyFor(req *wire.Request, model string) []byte {
	return req.SpliceModel(model)
}

// sessionKey is metadata.user_id, else the X-Claude-Code-Session-Id
// header Claude Code sends.
func (Dialect) SessionKey(body []byte, top *jsonscan.Top, header http.Header) string {
	var user string
	_ = top.Scan(body, func(key []byte, vStart, vEnd int) bool {
		v := body[vStart:vEnd]
		if string(key) == "metadata" {
			_ = jsonscan.ScanTopLevel(v, func(key []byte, s, e int) bool {
				if string(key) == "user_id" {
					user = jsonscan.Unquote(v[s:e])
				}
				return true
			})
		}
		return true
	})
	if user == "" {
		user = strings.TrimSpace(header.Get("X-Claude-Code-Session-Id"))
	}
	return user
}

var anthropicCredentialHeaders = []string{"X-Api-Key", "Anthropic-Organization"}

func (Dialect) CredentialHeaders() []string { return anthropicCredentialHeaders }

func (Dialect) SetAuth(h http.Header, key string) { h.Set("X-Api-Key", key) }

func (Dialect) Inspect(ev sse.Event, withText bool, _ *wire.ChoiceSet) wire.EventInfo {
	if info, ok := inspectContentDelta(ev, withText); ok {
		return info
	}
	return inspectAnthropic(ev, withText)
}

// Anthropic events name themselves; the data is still validated, and a
// data "type" stands in for a missing event name.
func inspectAnthropic(ev sse.Event, withText bool) wire.EventInfo {
	var info wire.EventInfo
	named := string(ev.Name) == "error"
	data := ev.Data
	start := jsonscan.SkipSpace(data, 0)
	if start == len(data) {
		// No payload (a comment, or a bare keepalive): the name decides.
		switch {
		case named:
			info.Class = wire.EvError
		case string(ev.Name) == "message_stop":
			info.Class = wire.EvTerminal
		}
		return info
	}
	var typ []byte
	var stopBy string // delta.stop_reason, when it makes an answer of no content
	it, ok := jsonscan.Open(data, start, 0)
	if ok && it.IsObject() {
		for it.Next() {
			switch {
			case it.KeyIs("type"):
				typ = it.Value()
			case it.KeyIs("error"):
				info.ErrVal = it.Value()
			case it.KeyIs("delta"):
				if d, ok := it.Enter(); ok {
					for d.IsObject() && d.Next() {
						switch {
						case withText && d.KeyIs("text"):
							if v := d.Value(); jsonscan.IsString(v) {
								info.Text = v
							}
						case d.KeyIs("stop_reason"):
							stopBy = answerStop(d.Value())
						}
					}
					it.Leave(&d)
				}
			}
		}
	}
	switch {
	case named:
		info.Class = wire.EvError
		return info
	case !ok || !it.IsObject() || !it.End():
		info.Class = wire.EvMalformed
		return info
	case info.ErrVal != nil && !jsonscan.IsNull(info.ErrVal) || jsonscan.StringIs(typ, "error"):
		info.Class = wire.EvError
		return info
	}
	var isDelta, isStop, isMessageDelta bool
	if ev.Name != nil {
		isDelta = string(ev.Name) == "content_block_delta"
		isStop = string(ev.Name) == "message_stop"
		isMessageDelta = string(ev.Name) == "message_delta"
	} else {
		isDelta = jsonscan.StringIs(typ, "content_block_delta")
		isStop = jsonscan.StringIs(typ, "message_stop")
		isMessageDelta = jsonscan.StringIs(typ, "message_delta")
	}
	switch {
	case isDelta:
		info.Class, info.By = wire.EvOutput, "content_block_delta"
	case isStop:
		info.Class = wire.EvTerminal
	case isMessageDelta && stopBy != "":
		// A refusal with no content before it (a filter that stopped the
		// answer at once), or a limit reached before any (max_tokens, the
		// context window), is the model's answer, as OpenAI's finish_reason
		// content_filter or length is: delivered, never failed over to
		// bill the prompt again elsewhere for the same end.
		info.Class, info.By = wire.EvFinish, stopBy
	}
	if info.Class != wire.EvOutput {
		info.Text = nil
	}
	return info
}

// answerStop names a stop_reason that makes an answer of no content:
// refusal, max_tokens, model_context_window_exceeded; "" for any other
// (an end_turn or stop_sequence with nothing is a fault). The names are
// constants: naming allocates nothing.
func answerStop(v []byte) string {
	switch {
	case jsonscan.StringIs(v, "refusal"):
		return "refusal"
	case jsonscan.StringIs(v, "max_tokens"):
		return "max_tokens"
	case jsonscan.StringIs(v, "model_context_window_exceeded"):
		return "model_context_window_exceeded"
	}
	return ""
}

func (Dialect) TerminalName(ev sse.Event) string {
	if ev.Name != nil {
		return string(ev.Name)
	}
	return "message_stop"
}

// finishGrace: an Anthropic answer is done only at message_stop.
func (Dialect) FinishGrace() bool { return false }

func (Dialect) StreamEnd() []byte { return nil }

// checkBody wants a non-empty content array and no error; a refusal or a
// limit reached may have no content (the stream's rule, inspectAnthropic).
func (Dialect) CheckBody(body []byte) (reason string, err error) {
	var m [4][]byte
	if reason, err := wire.BodyMembers(body, m[:], "type", "error", "content", "stop_reason"); err != nil {
		return reason, err
	}
	typ, errVal, content, stop := m[0], m[1], m[2], m[3]
	if errVal != nil && !jsonscan.IsNull(errVal) || jsonscan.StringIs(typ, "error") {
		return wire.ErrorBody(errVal, body)
	}
	if !wire.IsNonEmptyArray(content) && answerStop(stop) == "" {
		return "empty_content", errors.New("upstream 200 body has no content")
	}
	return "", nil
}

// checkBodyReject reads the answer text from content[].text.
func (Dialect) CheckBodyReject(body []byte, reject [][]byte) error {
	var text []byte
	content, _ := jsonscan.Lookup(body, "content")
	arr, ok := jsonscan.Open(content, 0, 0)
	for ok && !arr.IsObject() && arr.Next() {
		if t, ok := jsonscan.Lookup(arr.Value(), "text"); ok {
			text = wire.AppendAnswerText(text, t)
		}
	}
	return wire.RejectedIn(text, reject)
}

// observeEvent reads message_start (the model and every count) and
// message_delta (the final counts); other events are skipped by name.
func (Dialect) ObserveEvent(u *wire.Usage, ev sse.Event) {
	var start, delta bool
	if ev.Name != nil {
		start = string(ev.Name) == "message_start"
		delta = string(ev.Name) == "message_delta"
	} else if bytes.Contains(ev.Data, wire.UsageKey) { // unnamed: the data's "type" says what it is
		typ, _ := jsonscan.Lookup(ev.Data, "type")
		start = jsonscan.StringIs(typ, "message_start")
		delta = jsonscan.StringIs(typ, "message_delta")
	}
	switch {
	case start:
		msg, _ := jsonscan.Lookup(ev.Data, "message")
		u.ObserveModel(msg)
		if v, ok := jsonscan.Lookup(msg, "usage"); ok {
			observeAnthropicUsage(u, v, false)
		}
	case delta:
		if v, ok := jsonscan.Lookup(ev.Data, "usage"); ok {
			observeAnthropicUsage(u, v, true)
		}
	}
}

func (Dialect) ObserveBody(u *wire.Usage, body []byte) {
	u.ObserveModel(body)
	if v, ok := jsonscan.Lookup(body, "usage"); ok {
		observeAnthropicUsage(u, v, false)
	}
}

// observeAnthropicUsage reads an Anthropic usage object. message_start
// sets every count; a later message_delta carries the final output count
// and, when non-zero, corrected input and cache counts.
func observeAnthropicUsage(u *wire.Usage, v []byte, delta bool) {
	it, ok := jsonscan.Open(v, 0, 0)
	for ok && it.IsObject() && it.Next() {
		n, ok := jsonscan.Int(it.Value())
		if !ok {
			continue
		}
		switch {
		case it.KeyIs("output_tokens"):
			u.Output = n
		case delta && n == 0:
		case it.KeyIs("input_tokens"):
			u.Input = n
		case it.KeyIs("cache_read_input_tokens"):
			u.CacheRead = n
		case it.KeyIs("cache_creation_input_tokens"):
			u.CacheWrite = n
		}
	}
}

// modelMissing: a not_found_error about a model.
func (Dialect) ModelMissing(body []byte) bool {
	return wire.ErrorField(body, "type") == "not_found_error" && strings.Contains(wire.ErrorField(body, "message"), "model")
}

// promptTooLong: an invalid_request_error "prompt is too long: N tokens > M maximum".
func (Dialect) PromptTooLong(body []byte) bool {
	return wire.ErrorField(body, "type") == "invalid_request_error" && strings.Contains(wire.ErrorField(body, "message"), "prompt is too long")
}

func (Dialect) Classify(status int, body []byte, passThroughKey bool) wire.FailClass {
	return wire.ClassifyAnswer(status, body, passThroughKey)
}

// retryDelay: Anthropic's hints are in the headers only.
func (Dialect) RetryDelay([]byte) (time.Duration, bool) { return 0, false }

// errorType maps a status to Anthropic's documented error types.
func (Dialect) ErrorType(status int) string {
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

type anthropicErrorBody struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

func (d Dialect) ErrorJSON(status int, message string) []byte {
	var b anthropicErrorBody
	b.Type = "error"
	b.Error.Type = d.ErrorType(status)
	b.Error.Message = message
	out, _ := json.Marshal(b) // plain structs of strings: cannot fail
	return out
}

// errorEvent is `event: error` with the error body.
func (d Dialect) ErrorEvent(status int, message string) []byte {
	return wire.SSEErrorEvent("error", d.ErrorJSON(status, message))
}

func (Dialect) CachedInInput() bool { return false }

// PrefillsOn is Anthropic's wire.Prefiller: Anthropic's API, Bedrock and
// Vertex's Anthropic publisher continue a trailing assistant turn as
// written.
func (Dialect) PrefillsOn(api string) bool {
	switch strings.ToLower(api) {
	case "anthropic", "bedrock", "vertex":
		return true
	}
	return false
}
