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
	for ok && it.IsObject() && it.Next() {
		switch {
		case it.KeyIs("model"):
			if v := it.Value(); u.Model == "" && len(v) > 2 && v[0] == '"' {
				u.Model = wire.JSONStringValue(v)
			}
			if !counts && u.Model != "" {
				return // the first model read is the one kept
			}
		case counts && it.KeyIs("usage"):
			if uo, ok := it.Enter(); ok {
				u.ReadTokenCounts(&uo, "input_tokens", "output_tokens", "input_tokens_details")
				it.Leave(&uo)
			}
		}
	}
}
