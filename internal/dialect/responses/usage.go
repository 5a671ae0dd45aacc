package responses

import (
	"bytes"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// Usage: what the stream's events and a complete body say about the
// tokens an answer used and the model that wrote it.

var (
	responsesModelKey = []byte(`"model"`)
	responsesRespKey  = []byte(`"response"`)
)

// mayObserve is the quick look before a walk: data names a response
// object and the usage or, while the model is unknown, a model.
func mayObserve(u *wire.Usage, data []byte) bool {
	return (bytes.Contains(data, wire.UsageKey) || u.Model == "" && bytes.Contains(data, responsesModelKey)) &&
		bytes.Contains(data, responsesRespKey)
}

// observeResponsesEvent records what a stream event says about usage: the
// model from the first response object seen (response.created carries
// it), the counts from response.completed, response.incomplete or
// response.failed. An event without a "usage" key (or, until the model is
// known, a "model" key) is skipped by a substring check, so every delta
// costs two byte searches and no allocation.
func ObserveResponsesEvent(u *wire.Usage, ev sse.Event) {
	if u == nil || len(ev.Data) == 0 {
		return
	}
	if !mayObserve(u, ev.Data) {
		return
	}
	var typ, resp []byte
	it, ok := jsonscan.Open(ev.Data, 0, 0)
	for ok && it.IsObject() && it.Next() {
		switch {
		case it.KeyIs("type"):
			typ = it.Value()
		case it.KeyIs("response"):
			resp = it.Value()
		}
	}
	if !ok || !it.IsObject() || !it.End() {
		return
	}
	var buf [64]byte
	switch string(responsesKind(typ, ev.Name, buf[:0])) {
	case "response.completed", "response.incomplete", "response.failed":
		observeResponsesObject(u, resp, true)
	case "response.created", "response.in_progress", "response.queued":
		observeResponsesObject(u, resp, false)
	}
}

// observeResponsesBody records the usage of a complete non-stream body (a
// response object).
func ObserveResponsesBody(u *wire.Usage, body []byte) {
	if u == nil {
		return
	}
	observeResponsesObject(u, body, true)
}

// observeResponsesObject reads a response object: its model, if none was
// seen yet, and with counts its usage (input_tokens, which includes the
// cached tokens as OpenAI's prompt_tokens does; output_tokens;
// input_tokens_details.cached_tokens).
func observeResponsesObject(u *wire.Usage, obj []byte, counts bool) {
	if !counts && u.Model != "" {
		return // nothing left to read: response.in_progress after response.created
	}
	it, ok := jsonscan.Open(obj, 0, 0)
	if !ok {
		return
	}
	if counts {
		model, c := readFinalResponse(&it)
		applyFinal(u, model, c)
		return
	}
	for it.IsObject() && it.Next() {
		if it.KeyIs("model") {
			if v := it.Value(); len(v) > 2 && v[0] == '"' {
				u.Model = wire.JSONStringValue(v)
				return // the first model read is the one kept
			}
		}
	}
}

// applyFinal records what readFinalResponse read.
func applyFinal(u *wire.Usage, model []byte, c wire.UsageCounts) {
	if u.Model == "" && model != nil {
		u.Model = wire.JSONStringValue(model)
	}
	u.ApplyCounts(c)
}

// finalKind says the event's type (read so far) is one whose response
// object holds the final usage counts.
func finalKind(typ, name []byte) bool {
	var buf [64]byte
	switch string(responsesKind(typ, name, buf[:0])) {
	case "response.completed", "response.incomplete", "response.failed":
		return true
	}
	return false
}

// readFinalResponse walks a final response object as
// observeResponsesObject reads it with counts: its first model string and
// what its usage members set (Read: the object was walked).
func readFinalResponse(obj *jsonscan.Iter) (model []byte, c wire.UsageCounts) {
	c.Read = true
	for obj.IsObject() && obj.Next() {
		switch {
		case obj.KeyIs("model"):
			if v := obj.Value(); model == nil && len(v) > 2 && v[0] == '"' {
				model = v
			}
		case obj.KeyIs("usage"):
			if uo, ok := obj.Enter(); ok {
				wire.ReadTokenCounts(&uo, "input_tokens", "output_tokens", "input_tokens_details", &c)
				obj.Leave(&uo)
			}
		}
	}
	return model, c
}
