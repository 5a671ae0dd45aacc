package translate

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Gemini answers for a Gemini client (Gemini CLI, google.golang.org/genai):
// the non-stream GenerateContentResponse, the stream writer and errors.

// geminiFinishOf maps a stop reason to a candidate's finishReason; a stop
// reason not here is an error. Gemini says STOP for a matched stop
// sequence and for function calls.
var geminiFinishOf = map[string]string{
	StopEnd:      "STOP",
	StopSequence: "STOP",
	StopTool:     "STOP",
	StopMax:      "MAX_TOKENS",
	StopRefusal:  "SAFETY",
	// Anthropic ends an answer that filled the context window so.
	"model_context_window_exceeded": "MAX_TOKENS",
}

// geminiUsageOf is usageMetadata for u: the prompt count includes the
// cached tokens, the candidates count excludes the thoughts.
func appendGeminiUsage(dst []byte, u Usage) []byte {
	prompt := u.Input + u.CacheRead + u.CacheWrite
	dst = append(dst, `{"promptTokenCount":`...)
	dst = strconv.AppendInt(dst, prompt, 10)
	dst = append(dst, `,"candidatesTokenCount":`...)
	dst = strconv.AppendInt(dst, u.Output-u.Reasoning, 10)
	dst = append(dst, `,"totalTokenCount":`...)
	dst = strconv.AppendInt(dst, prompt+u.Output, 10)
	if u.CacheRead > 0 {
		dst = append(dst, `,"cachedContentTokenCount":`...)
		dst = strconv.AppendInt(dst, u.CacheRead, 10)
	}
	if u.Reasoning > 0 {
		dst = append(dst, `,"thoughtsTokenCount":`...)
		dst = strconv.AppendInt(dst, u.Reasoning, 10)
	}
	return append(dst, '}')
}

// appendGeminiCall appends a functionCall part. The call keeps its id
// (the v1beta FunctionCall.id, which genai and Gemini CLI send back in
// the call and its functionResponse): the next turn's results then
// answer the calls by id, parallel calls to one function included.
func appendGeminiCall(dst []byte, id, name string, args []byte) []byte {
	dst = append(dst, `{"functionCall":{"id":`...)
	dst = appendJSONString(dst, id)
	dst = append(dst, `,"name":`...)
	dst = appendJSONString(dst, name)
	dst = append(dst, `,"args":`...)
	dst = append(dst, args...)
	return append(dst, "}}"...)
}

type geminiOutAnswer struct {
	Candidates    []geminiOutCandidate `json:"candidates"`
	UsageMetadata json.RawMessage      `json:"usageMetadata"`
	ModelVersion  string               `json:"modelVersion,omitempty"`
	ResponseID    string               `json:"responseId,omitempty"`
}

type geminiOutCandidate struct {
	Content      geminiOutContent `json:"content"`
	FinishReason string           `json:"finishReason"`
	Index        int              `json:"index"`
}

type geminiOutContent struct {
	Parts []json.RawMessage `json:"parts"`
	Role  string            `json:"role"`
}

// encodeGeminiResponse writes r as a generateContent answer.
func encodeGeminiResponse(r *Response) ([]byte, error) {
	finish, ok := geminiFinishOf[r.Stop]
	if !ok {
		return nil, fmt.Errorf("stop reason %q has no Gemini equivalent", r.Stop)
	}
	parts := []json.RawMessage{}
	for _, b := range r.Blocks {
		switch b.Kind {
		case KindText:
			parts = append(parts, append(appendJSONString([]byte(`{"text":`), b.Text), '}'))
		case KindToolCall:
			parts = append(parts, appendGeminiCall(nil, b.ToolID, b.ToolName, b.Args))
		case KindReasoning:
			// Another vendor's thinking, and its state, stay with it.
		default:
			return nil, fmt.Errorf("answer block kind %d has no Gemini equivalent", b.Kind)
		}
	}
	out := geminiOutAnswer{
		Candidates:    []geminiOutCandidate{{Content: geminiOutContent{Parts: parts, Role: "model"}, FinishReason: finish}},
		UsageMetadata: appendGeminiUsage(nil, r.Usage), ModelVersion: r.Model, ResponseID: r.ID,
	}
	return json.Marshal(out)
}

// geminiWriter writes a streamGenerateContent?alt=sse stream: `data:`
// chunks, each a GenerateContentResponse with the next parts, the last
// with the finishReason and usageMetadata; no [DONE], no event names.
// Text is sent as it arrives; a function call is sent whole, in one part,
// when its arguments parse (as Gemini sends calls), else an error. It is
// a strict state machine like the others: one start, one open item.
type geminiWriter struct {
	writerPhase
	id, model string
	open      bool
	openKind  Kind
	callID    string
	name      string
	args      []byte
	quoted    []byte // appendUnescaped's
}

func (w *geminiWriter) start(dst []byte, id, model string) ([]byte, error) {
	if w.started {
		return dst, malformed("a second message start")
	}
	w.started, w.id, w.model = true, id, model
	return dst, nil // Gemini has no start event: the first chunk carries content
}

// chunkHead writes a chunk up to the open parts array.
func (w *geminiWriter) chunkHead(dst []byte) []byte {
	return append(dst, `data: {"candidates":[{"content":{"role":"model","parts":[`...)
}

// chunkTail closes a chunk's parts, with a finishReason and usage when
// finishing.
func (w *geminiWriter) chunkTail(dst []byte, finish string, u *Usage) []byte {
	dst = append(dst, `]}`...)
	if finish != "" {
		dst = append(dst, `,"finishReason":"`...)
		dst = append(dst, finish...)
		dst = append(dst, '"')
	}
	dst = append(dst, `,"index":0}]`...)
	if u != nil {
		dst = append(dst, `,"usageMetadata":`...)
		dst = appendGeminiUsage(dst, *u)
	}
	dst = append(dst, `,"modelVersion":`...)
	dst = appendJSONString(dst, w.model)
	dst = append(dst, `,"responseId":`...)
	dst = appendJSONString(dst, w.id)
	return append(dst, "}\n\n"...)
}

func (w *geminiWriter) openItem(dst []byte, kind Kind, _ int, callID, name string) ([]byte, error) {
	if err := w.live(); err != nil {
		return dst, err
	}
	if w.open {
		return dst, malformed("an output item starts while another is open")
	}
	if kind == KindToolCall && (callID == "" || name == "") {
		return dst, malformed("tool call without id or name")
	}
	w.open, w.openKind, w.callID, w.name, w.args = true, kind, callID, name, w.args[:0]
	return dst, nil
}

func (w *geminiWriter) delta(dst []byte, kind Kind, escaped []byte) ([]byte, error) {
	if err := w.live(); err != nil {
		return dst, err
	}
	if !w.open || w.openKind != kind {
		return dst, malformed("a delta outside an output item of its kind")
	}
	if len(escaped) == 0 {
		return dst, nil
	}
	if kind == KindToolCall {
		w.args = appendUnescaped(w.args, escaped, &w.quoted)
		return dst, nil
	}
	dst = w.chunkHead(dst)
	dst = append(dst, `{"text":"`...)
	dst = append(dst, escaped...)
	dst = append(dst, `"}`...)
	return w.chunkTail(dst, "", nil), nil
}

func (w *geminiWriter) closeItem(dst []byte) ([]byte, error) {
	if err := w.live(); err != nil {
		return dst, err
	}
	if !w.open {
		return dst, malformed("no output item is open")
	}
	w.open = false
	if w.openKind != KindToolCall {
		return dst, nil
	}
	if err := checkArgs(w.args); err != nil {
		return dst, fmt.Errorf("%w: %w", errMalformed, err)
	}
	dst = w.chunkHead(dst)
	dst = appendGeminiCall(dst, w.callID, w.name, compactJSON(w.args))
	return w.chunkTail(dst, "", nil), nil
}

func (w *geminiWriter) finish(dst []byte, stop string, u Usage) ([]byte, error) {
	if err := w.live(); err != nil {
		return dst, err
	}
	if w.open {
		return dst, malformed("the message ends inside an output item")
	}
	finish, ok := geminiFinishOf[stop]
	if !ok {
		return dst, malformed("stop reason %q has no Gemini equivalent", stop)
	}
	w.finished = true
	return w.chunkTail(w.chunkHead(dst), finish, &u), nil
}

// fail writes Gemini's error object as a chunk and ends the stream.
func (w *geminiWriter) fail(dst []byte, err error) []byte {
	if w.finished {
		return dst
	}
	w.finished = true
	e := clientStreamError(err, "INTERNAL")
	code := e.Status
	if code == 0 {
		code = http.StatusInternalServerError
	}
	status := e.Type
	if status == "" || strings.ToUpper(status) != status {
		status = geminiStatus(code)
	}
	dst = append(dst, `data: {"error":{"code":`...)
	dst = strconv.AppendInt(dst, int64(code), 10)
	dst = append(dst, `,"message":`...)
	dst = appendJSONString(dst, e.Message)
	dst = append(dst, `,"status":`...)
	dst = appendJSONString(dst, status)
	return append(dst, "}}\n\n"...)
}

// geminiStatusOfAnthropic maps Anthropic's error types to Google's
// status and the HTTP status it goes with: overload is UNAVAILABLE (503,
// which Gemini clients retry, as Anthropic's 529), rate limits
// RESOURCE_EXHAUSTED (429).
var geminiStatusOfAnthropic = map[string]int{
	"invalid_request_error": http.StatusBadRequest,
	"authentication_error":  http.StatusUnauthorized,
	"billing_error":         http.StatusTooManyRequests,
	"permission_error":      http.StatusForbidden,
	"not_found_error":       http.StatusNotFound,
	"request_too_large":     http.StatusBadRequest,
	"rate_limit_error":      http.StatusTooManyRequests,
	"api_error":             http.StatusInternalServerError,
	"timeout_error":         http.StatusGatewayTimeout,
	"overloaded_error":      http.StatusServiceUnavailable,
}

// geminiErrorOf is the Gemini error for an error of Anthropic's type typ
// (or, unknown, of the HTTP status) and message: a context overflow keeps
// Gemini's own words for it, which clients look for.
func geminiErrorOf(status int, typ, msg string) (int, string, string) {
	if s, ok := geminiStatusOfAnthropic[typ]; ok {
		status = s
	} else if status == 529 {
		status = http.StatusServiceUnavailable
	}
	if strings.HasPrefix(msg, anthropicContextOverflow) && !strings.Contains(msg, geminiContextOverflow) {
		status = http.StatusBadRequest
		msg = "The input token count " + geminiContextOverflow + " allowed: " + msg
	}
	return status, geminiStatus(status), msg
}

func geminiErrorBody(code int, status, msg string) []byte {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": code, "message": msg, "status": status}})
	return b
}

// anthropicErrorToGemini maps an Anthropic error answer to Gemini's shape.
func anthropicErrorToGemini(status int, body []byte) (int, []byte) {
	typ, msg := anthropicErrorFields(body)
	code, st, msg := geminiErrorOf(status, typ, msg)
	return code, geminiErrorBody(code, st, msg)
}

// openAIErrorToGemini maps an OpenAI error answer to Gemini's shape,
// through Anthropic's types (which keep overload, rate limits and
// context overflow).
func openAIErrorToGemini(status int, body []byte) (int, []byte) {
	return anthropicErrorToGemini(openAIErrorToAnthropic(status, body))
}

// geminiTyped is an upstream error in a Gemini client's terms: Type is
// Google's status. from is the error as a decoder reported it,
// Anthropic-typed (Chat decoder) or OpenAI-typed (Anthropic decoder).
func geminiTyped(ue *UpstreamError) *UpstreamError {
	typ := ue.Type
	if _, ok := geminiStatusOfAnthropic[typ]; !ok {
		typ = "" // an OpenAI type: the status says it
		if ue.Code == "context_length_exceeded" && !strings.HasPrefix(ue.Message, anthropicContextOverflow) {
			return geminiTyped(&UpstreamError{Status: http.StatusBadRequest, Type: "invalid_request_error",
				Message: anthropicContextOverflow + ": " + ue.Message})
		}
	}
	code, st, msg := geminiErrorOf(ue.Status, typ, ue.Message)
	return &UpstreamError{Status: code, Type: st, Message: msg}
}
