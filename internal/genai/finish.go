// Package genai holds what the attempt spans take from the OpenTelemetry
// GenAI semantic conventions: the operation and provider names of the
// registry, and the finish reasons a response reports. It knows dialects
// by name only ("anthropic", "openai", "responses", "gemini").
package genai

import (
	"bytes"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
)

// FinishReasons are why a response says it stopped, for
// gen_ai.response.finish_reasons. They are read only when On (the attempt
// is traced), from the events and bodies the usage is read from. A reason
// is a provider's enum word (end_turn, stop, STOP, max_tokens, ...): a
// value that is not a short word is dropped, so no text of an answer can
// pass for one.
type FinishReasons struct {
	On bool
	n  uint8
	r  [maxFinishReasons]string
}

const (
	maxFinishReasons   = 4  // one per choice or candidate, bounded
	maxFinishReasonLen = 40 // the longest registry value is ~25
)

// knownFinishReasons are the usual values, shared so that keeping one
// allocates nothing.
var knownFinishReasons = []string{
	"end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn", "refusal",
	"stop", "length", "tool_calls", "content_filter", "function_call",
	"STOP", "MAX_TOKENS", "SAFETY", "RECITATION", "OTHER", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "MALFORMED_FUNCTION_CALL",
	"completed", "incomplete", "failed", "max_output_tokens",
}

var (
	stopReasonKey      = []byte(`"stop_reason"`)
	finishReasonKey    = []byte(`"finish_reason"`)
	geminiFinishKey    = []byte(`"finishReason"`)
	responsesStatusKey = []byte(`"status"`)
)

// List is the reasons seen, in order; nil when none.
func (f *FinishReasons) List() []string {
	if f.n == 0 {
		return nil
	}
	return f.r[:f.n]
}

// ObserveEvent reads the reasons the data of a stream event of dialect
// carries.
func (f *FinishReasons) ObserveEvent(dialect string, data []byte) {
	switch dialect {
	case "anthropic": // message_delta: {"delta":{"stop_reason":"end_turn"}}
		if bytes.Contains(data, stopReasonKey) {
			v, _ := jsonscan.Lookup(data, "delta", "stop_reason")
			f.add(v)
		}
	case "openai":
		if bytes.Contains(data, finishReasonKey) {
			f.addEach(data, "choices", "finish_reason")
		}
	case "gemini":
		if bytes.Contains(data, geminiFinishKey) {
			f.addEach(data, "candidates", "finishReason")
		}
	case "responses": // response.completed / incomplete / failed carry the response
		if bytes.Contains(data, responsesStatusKey) {
			typ, _ := jsonscan.Lookup(data, "type")
			if jsonscan.StringIs(typ, "response.completed") || jsonscan.StringIs(typ, "response.incomplete") || jsonscan.StringIs(typ, "response.failed") {
				resp, _ := jsonscan.Lookup(data, "response")
				f.observeResponse(resp)
			}
		}
	}
}

// ObserveBody reads the reasons of a complete non-stream body of dialect.
func (f *FinishReasons) ObserveBody(dialect string, body []byte) {
	switch dialect {
	case "anthropic":
		v, _ := jsonscan.Lookup(body, "stop_reason")
		f.add(v)
	case "openai":
		f.addEach(body, "choices", "finish_reason")
	case "gemini":
		f.addEach(body, "candidates", "finishReason")
	case "responses":
		f.observeResponse(body)
	}
}

// observeResponse reads a Responses object: its status, or why it is
// incomplete.
func (f *FinishReasons) observeResponse(resp []byte) {
	status, _ := jsonscan.Lookup(resp, "status")
	if jsonscan.StringIs(status, "incomplete") {
		if why, ok := jsonscan.Lookup(resp, "incomplete_details", "reason"); ok {
			status = why
		}
	}
	f.add(status)
}

// addEach adds the member key of every element of the array at list.
func (f *FinishReasons) addEach(obj []byte, list, key string) {
	arr, ok := jsonscan.Lookup(obj, list)
	if !ok {
		return
	}
	it, ok := jsonscan.Open(arr, 0, 0)
	for ok && !it.IsObject() && it.Next() {
		v, _ := jsonscan.Lookup(it.Value(), key)
		f.add(v)
	}
}

// add keeps the raw JSON string v as a reason, once; null, an empty
// string or anything but a short word is skipped.
func (f *FinishReasons) add(v []byte) {
	if !jsonscan.IsString(v) || len(v) < 3 || len(v) > maxFinishReasonLen+2 {
		return
	}
	word := v[1 : len(v)-1]
	for _, c := range word {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return
		}
	}
	for _, have := range f.r[:f.n] {
		if have == string(word) {
			return
		}
	}
	if int(f.n) == len(f.r) {
		return
	}
	reason := ""
	for _, known := range knownFinishReasons {
		if known == string(word) {
			reason = known
			break
		}
	}
	if reason == "" {
		reason = string(word) // an unusual value: once per response
	}
	f.r[f.n] = reason
	f.n++
}
