package responses

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/dialect/openai"
	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// The OpenAI Responses API: the event
// classes of its stream, its fake 200s, usage, response ids and session
// keys. Every event names itself twice, in the SSE `event:` line and in the
// data's "type"; the clients (openai-go's event union, Codex) dispatch on
// the data's type, so it decides, and the event name stands in when the
// data has none.

// inspectResponses classifies one Responses API event; withText also
// returns the raw JSON string of a response.output_text.delta, which the
// gate checks for rejected phrases. It walks the JSON once, without
// allocating, except to render the message of an error event.
func InspectResponses(ev sse.Event, withText bool) wire.EventInfo {
	return inspectResponses(ev, withText, nil)
}

// inspectResponses is InspectResponses with the stream's memo of its text
// deltas (inspectTextDelta), nil for none.
func inspectResponses(ev sse.Event, withText bool, memo *wire.Memo) wire.EventInfo {
	if info, ok := inspectTextDelta(ev, withText, memo); ok {
		return info
	}
	var info wire.EventInfo
	named := string(ev.Name) == "error"
	data := ev.Data
	start := jsonscan.SkipSpace(data, 0)
	if start == len(data) {
		// No payload (a comment, a keepalive): no client sees it as an
		// event, so only an `event: error` means anything.
		if named {
			info.Class = wire.EvError
		}
		return info
	}
	var typ, delta, resp, code, msg, seq []byte
	types, resps := 0, 0
	it, ok := jsonscan.Open(data, start, 0)
	if ok && it.IsObject() {
		for it.Next() {
			switch {
			case it.KeyIs("type"):
				typ = it.Value()
				types++
			case it.KeyIs("error"):
				info.ErrVal = it.Value()
			case it.KeyIs("delta"):
				delta = it.Value()
			case it.KeyIs("response"):
				resps++
				if resps == 1 && types == 1 && finalKind(typ, ev.Name) {
					// The usage observer's reading of it, in this walk.
					vs := it.Pos
					if obj, ok := it.Enter(); ok {
						info.Model, info.Counts = readFinalResponse(&obj)
						it.Leave(&obj)
						resp = data[vs:it.Pos]
						continue
					}
				}
				resp = it.Value()
			case it.KeyIs("code"):
				code = it.Value()
			case it.KeyIs("message"):
				msg = it.Value()
			case seq == nil && it.KeyIs("sequence_number"):
				seq = it.Value() // the first, as a lookup finds it
			}
		}
	}
	valid := ok && it.IsObject() && it.End()
	if !valid && !named {
		info.Class = wire.EvMalformed
		info.ErrVal = nil
		return info
	}
	var buf [64]byte
	kind := responsesKind(typ, ev.Name, buf[:0])
	// The response object ObserveEvent would read, from this walk; with
	// one type and one response member, it is also what a lookup of
	// either finds (the resumer's reading).
	if valid && types <= 1 && resps <= 1 {
		info.UsageRead = true
		switch string(kind) {
		case "response.completed", "response.incomplete", "response.failed":
			info.Usage, info.UsageFinal = resp, true
		case "response.created", "response.in_progress", "response.queued":
			info.Usage = resp
		}
	}
	switch {
	case named || string(kind) == "error" || info.ErrVal != nil && !jsonscan.IsNull(info.ErrVal):
		info.Class = wire.EvError
		if !valid || info.ErrVal == nil || jsonscan.IsNull(info.ErrVal) {
			info.ErrVal = responsesFlatError(code, msg)
		}
		return info
	case string(kind) == "response.failed":
		info.Class = wire.EvError
		info.ErrVal = nil
		if v, ok := jsonscan.Lookup(resp, "error"); ok && !jsonscan.IsNull(v) {
			info.ErrVal = v
		}
		return info
	}
	info.ErrVal = nil
	info.Seq = seq
	info.Class, info.By = responsesClass(kind)
	if withText && info.By == "response.output_text.delta" && jsonscan.IsString(delta) {
		info.Text = delta
	}
	return info
}

// responsesKind returns what an event is: the data's "type" when it is a
// string (decoded into buf if it holds escapes), else the event name.
func responsesKind(typ, name, buf []byte) []byte {
	if !jsonscan.IsString(typ) {
		return name
	}
	if bytes.IndexByte(typ, '\\') < 0 {
		return typ[1 : len(typ)-1]
	}
	return jsonscan.AppendString(buf, typ)
}

// responsesClass maps an event type to its class and, for output, the name
// the commit log shows (a constant: naming allocates nothing).
func responsesClass(kind []byte) (wire.EventClass, string) {
	switch string(kind) {
	case "response.completed":
		return wire.EvTerminal, ""
	case "response.incomplete":
		// Named: a terminal that is an answer even before any output
		// (the gate commits it; CheckResponsesBody's rule).
		return wire.EvTerminal, "response.incomplete"
	case "response.output_item.done":
		return wire.EvOutput, "response.output_item.done"
	case "response.output_text.delta":
		return wire.EvOutput, "response.output_text.delta"
	case "response.function_call_arguments.delta":
		return wire.EvOutput, "response.function_call_arguments.delta"
	case "response.reasoning_summary_text.delta":
		return wire.EvOutput, "response.reasoning_summary_text.delta"
	case "response.reasoning_text.delta":
		return wire.EvOutput, "response.reasoning_text.delta"
	case "response.refusal.delta":
		return wire.EvOutput, "response.refusal.delta"
	case "response.custom_tool_call_input.delta":
		return wire.EvOutput, "response.custom_tool_call_input.delta"
	case "response.audio.delta":
		return wire.EvOutput, "response.audio.delta"
	case "response.audio.transcript.delta":
		return wire.EvOutput, "response.audio.transcript.delta"
	case "response.code_interpreter_call_code.delta":
		return wire.EvOutput, "response.code_interpreter_call_code.delta"
	case "response.mcp_call_arguments.delta":
		return wire.EvOutput, "response.mcp_call_arguments.delta"
	case "response.image_generation_call.partial_image":
		// Model output, and each one is a large base64 image: holding them
		// until output_item.done would overflow the gate's buffer.
		return wire.EvOutput, "response.image_generation_call.partial_image"
	}
	if bytes.HasPrefix(kind, []byte("response.")) && bytes.HasSuffix(kind, []byte(".delta")) {
		return wire.EvOutput, "response.*.delta"
	}
	return wire.EvPrelude, ""
}

// responsesFlatError renders the code and message of an error event
// ({"type":"error","code":...,"message":...}) as an error object for
// upstreamErrorMessage; nil when there is neither.
func responsesFlatError(code, msg []byte) []byte {
	if !jsonscan.IsString(code) && !jsonscan.IsString(msg) {
		return nil
	}
	out := []byte(`{`)
	if jsonscan.IsString(code) {
		out = append(append(out, `"code":`...), code...)
	}
	if jsonscan.IsString(msg) {
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(append(out, `"message":`...), msg...)
	}
	return append(out, '}')
}

// responsesTerminalName names the event that ended a stream, for the
// gate's terminal_before_content message.
func TerminalName(ev sse.Event) string {
	typ, _ := jsonscan.Lookup(ev.Data, "type")
	var buf [64]byte
	if string(responsesKind(typ, ev.Name, buf[:0])) == "response.incomplete" {
		return "response.incomplete"
	}
	return "response.completed"
}

// checkResponsesBody detects a fake 200 in a complete non-stream Responses
// body: "malformed_body"; "error_body" for a non-null top-level "error" or
// "status":"failed"; "empty_output" for a completed response with no
// output item. A queued or in-progress response (background mode) and an
// incomplete one are answers.
func CheckResponsesBody(body []byte) (reason string, err error) {
	it, ok := jsonscan.Open(body, 0, 0)
	if !ok || !it.IsObject() {
		return "malformed_body", fmt.Errorf("upstream 200 body is not a JSON object: %q", wire.ClipData(body, 200))
	}
	var status, errVal, output []byte
	for it.Next() {
		switch {
		case it.KeyIs("status"):
			status = it.Value()
		case it.KeyIs("error"):
			errVal = it.Value()
		case it.KeyIs("output"):
			output = it.Value()
		}
	}
	if !it.End() {
		return "malformed_body", fmt.Errorf("upstream 200 body is not valid JSON: %q", wire.ClipData(body, 200))
	}
	if jsonscan.IsNull(errVal) {
		errVal = nil
	}
	switch {
	case jsonscan.StringIs(status, "failed"):
		return "error_body", fmt.Errorf("upstream 200 body is a failed response: %s", wire.UpstreamErrorMessage(errVal, body))
	case errVal != nil:
		return "error_body", fmt.Errorf("upstream 200 body is an error: %s", wire.UpstreamErrorMessage(errVal, body))
	case jsonscan.StringIs(status, "completed") && (len(output) == 0 || output[0] != '[' || !jsonscan.NonEmpty(output)):
		return "empty_output", fmt.Errorf("upstream 200 body is a completed response with no output")
	}
	return "", nil
}

// checkResponsesBodyReject fails a complete non-stream body whose answer
// text (output[] messages' output_text parts: not reasoning, not refusals)
// contains one of the reject phrases, case-insensitively: the text the
// stream gate checks in response.output_text.delta.
func CheckResponsesBodyReject(body []byte, reject [][]byte) error {
	if len(reject) == 0 {
		return nil
	}
	var text []byte
	output, _ := jsonscan.Lookup(body, "output")
	items, ok := jsonscan.Open(output, 0, 0)
	for ok && !items.IsObject() && items.Next() {
		item := items.Value()
		if typ, _ := jsonscan.Lookup(item, "type"); !jsonscan.StringIs(typ, "message") {
			continue
		}
		content, _ := jsonscan.Lookup(item, "content")
		parts, ok := jsonscan.Open(content, 0, 0)
		for ok && !parts.IsObject() && parts.Next() {
			part := parts.Value()
			if typ, _ := jsonscan.Lookup(part, "type"); !jsonscan.StringIs(typ, "output_text") {
				continue
			}
			if t, _ := jsonscan.Lookup(part, "text"); jsonscan.IsString(t) {
				text = wire.AppendAnswerText(text, t)
			}
		}
	}
	return wire.RejectedIn(text, reject)
}

// responsesDialect is the OpenAI Responses API: POST /v1/responses and
// /v1/responses/compact, named SSE events ending with response.completed
// or response.incomplete, the key as a Bearer token. Its stateful calls
// (a response by id) are routed by the owners table (responses_pin.go).
type Dialect struct{}

func (Dialect) String() string { return "responses" }

func (Dialect) IsCompletionPath(p string) bool {
	switch p {
	case "/v1/responses", "/responses", "/v1/responses/compact", "/responses/compact":
		return true
	}
	return false
}

// completionPath: compact has an endpoint of its own.
func (Dialect) CompletionPath(clientPath string) string {
	if strings.HasSuffix(clientPath, "/compact") {
		return "/v1/responses/compact"
	}
	return "/v1/responses"
}

var responsesAuxPaths = []wire.AuxPath{
	{Method: http.MethodPost, Path: "/v1/responses/input_tokens"},
	{Method: http.MethodGet, Path: "/v1/responses/{id}"},
	{Method: http.MethodDelete, Path: "/v1/responses/{id}"},
	{Method: http.MethodPost, Path: "/v1/responses/{id}/cancel"},
	{Method: http.MethodGet, Path: "/v1/responses/{id}/input_items"},
}

func (Dialect) AuxPaths() []wire.AuxPath { return responsesAuxPaths }

// sniffAux claims the paths under /v1/responses/ (over OpenAI's 1).
func (Dialect) SniffAux(p string, _ wire.HeaderGetter) int {
	if strings.HasPrefix(p, "/v1/responses/") || strings.HasPrefix(p, "/responses/") {
		return 2
	}
	return 0
}

func (Dialect) ParseRequest(_, _ string, body []byte) (*wire.Request, error) {
	return wire.ParseRequestBodyWatching(body, objectWords)
}

// upstreamPath is the canonical path of the client's endpoint (compact or not).
func (d Dialect) UpstreamPath(clientPath, _ string) string {
	return d.CompletionPath(strings.TrimSuffix(clientPath, "/"))
}

// streamEnd: a Responses stream ends with response.completed; nothing is synthesized.
func (Dialect) StreamEnd() []byte { return nil }

func (Dialect) Classify(status int, body []byte, passThroughKey bool) wire.FailClass {
	return wire.ClassifyAnswer(status, body, passThroughKey)
}

// retryDelay: OpenAI's hints are in the headers only.
func (Dialect) RetryDelay([]byte) (time.Duration, bool) { return 0, false }

func (Dialect) BodyFor(req *wire.Request, model string) []byte {
	return req.SpliceModel(model)
}

func (Dialect) SessionKey(body []byte, top *jsonscan.Top, header http.Header) string {
	return SessionKey(body, top, header, "")
}

func (Dialect) CredentialHeaders() []string { return openai.CredentialHeaders }

func (Dialect) SetAuth(h http.Header, key string) { h.Set("Authorization", "Bearer "+key) }

// Inspect keeps in cs's memo what the stream's text deltas repeat.
func (Dialect) Inspect(ev sse.Event, withText bool, cs *wire.ChoiceSet) wire.EventInfo {
	if cs == nil {
		return inspectResponses(ev, withText, nil)
	}
	if cs.Memo == nil {
		cs.Memo = new(wire.Memo)
	}
	return inspectResponses(ev, withText, cs.Memo)
}

func (Dialect) TerminalName(ev sse.Event) string { return TerminalName(ev) }

// finishGrace: nothing before response.completed says the answer is done.
func (Dialect) FinishGrace() bool { return false }

func (Dialect) CheckBody(body []byte) (string, error) { return CheckResponsesBody(body) }

func (Dialect) CheckBodyReject(body []byte, reject [][]byte) error {
	return CheckResponsesBodyReject(body, reject)
}

func (Dialect) ObserveEvent(u *wire.Usage, ev sse.Event) { ObserveResponsesEvent(u, ev) }

// ObserveInfo skips the output events: valid (inspect walked them), of a
// type that carries no response object, they tell ObserveEvent nothing.
// Of the others, it reads the response object inspect found, as
// ObserveEvent would (after the same quick look for the members it reads),
// without walking the event again.
func (Dialect) ObserveInfo(u *wire.Usage, ev sse.Event, info wire.EventInfo) {
	switch {
	case info.Class == wire.EvOutput || u == nil:
	case !info.UsageRead:
		ObserveResponsesEvent(u, ev)
	case info.Usage != nil && (info.UsageFinal || u.Model == "") && mayObserve(u, ev.Data):
		// (before the final counts, a response object tells only the
		// model: once it is known, there is nothing to look for)
		if info.UsageFinal && info.Counts.Read { // inspect's walk read it
			applyFinal(u, info.Model, info.Counts)
			return
		}
		observeResponsesObject(u, info.Usage, info.UsageFinal)
	}
}

func (Dialect) ObserveBody(u *wire.Usage, body []byte) { ObserveResponsesBody(u, body) }

func (Dialect) ModelMissing(body []byte) bool { return openai.Dialect{}.ModelMissing(body) }

func (Dialect) PromptTooLong(body []byte) bool { return openai.Dialect{}.PromptTooLong(body) }

func (Dialect) ErrorType(status int) string { return openai.ErrorType(status) }

func (Dialect) ErrorJSON(status int, message string) []byte {
	return ErrorJSON(status, message)
}

// errorEvent carries both the Responses error event's fields and an
// "error" object: the openai-go SDK reports a stream error only for data
// with a top-level "error".
func (Dialect) ErrorEvent(status int, message string) []byte {
	return ErrorEvent(status, message, -1)
}

func (Dialect) CachedInInput() bool { return true }
