package llmhedge

import "bytes"

// usage is the token accounting of one response, as the provider reported
// it.
type usage struct {
	// Input is the prompt tokens. For OpenAI it is prompt_tokens as
	// reported, which already INCLUDES the cached tokens counted again in
	// CacheRead; for Anthropic input_tokens, which excludes them.
	Input      int64
	Output     int64
	CacheRead  int64 // Anthropic cache_read_input_tokens; OpenAI prompt_tokens_details.cached_tokens
	CacheWrite int64 // Anthropic cache_creation_input_tokens
	// Model is the model the provider reported (message_start.message.model,
	// chunk.model, body.model), the first one seen.
	Model string
}

var usageKey = []byte(`"usage"`)

// observeEvent records what a stream event says about usage. Events that
// cannot carry usage are skipped by name (Anthropic) or by a substring
// check (OpenAI), so it is cheap to call for every event.
func (u *usage) observeEvent(d dialect, ev sseEvent) {
	if u == nil || len(ev.Data) == 0 {
		return
	}
	if d == dialectOpenAI {
		if u.Model == "" || mayCarryUsage(ev.Data) {
			u.observeOpenAI(ev.Data)
		}
		return
	}
	var start, delta bool
	if ev.Name != nil {
		start = string(ev.Name) == "message_start"
		delta = string(ev.Name) == "message_delta"
	} else if bytes.Contains(ev.Data, usageKey) { // unnamed: the data's "type" says what it is
		typ, _ := jsonLookup(ev.Data, "type")
		start = jsonStringIs(typ, "message_start")
		delta = jsonStringIs(typ, "message_delta")
	}
	switch {
	case start:
		msg, _ := jsonLookup(ev.Data, "message")
		u.observeModel(msg)
		if v, ok := jsonLookup(msg, "usage"); ok {
			u.observeAnthropicUsage(v, false)
		}
	case delta:
		if v, ok := jsonLookup(ev.Data, "usage"); ok {
			u.observeAnthropicUsage(v, true)
		}
	}
}

// mayCarryUsage is true unless the chunk has no "usage" member or only a
// "usage":null (which OpenAI sends on every chunk with include_usage).
func mayCarryUsage(data []byte) bool {
	i := bytes.Index(data, usageKey)
	if i < 0 {
		return false
	}
	j := jsonWS(data, i+len(usageKey))
	if j < len(data) && data[j] == ':' {
		j = jsonWS(data, j+1)
		if len(data)-j >= 4 && string(data[j:j+4]) == "null" {
			return bytes.Contains(data[j:], usageKey)
		}
	}
	return true
}

// observeBody records the usage of a complete non-stream response body.
func (u *usage) observeBody(d dialect, body []byte) {
	if u == nil {
		return
	}
	if d == dialectOpenAI {
		u.observeOpenAI(body)
		return
	}
	u.observeModel(body)
	if v, ok := jsonLookup(body, "usage"); ok {
		u.observeAnthropicUsage(v, false)
	}
}

// observeModel takes the "model" member of obj, if none was seen yet,
// clipped to maxModelLen bytes: it goes to the log line.
func (u *usage) observeModel(obj []byte) {
	if u.Model != "" {
		return
	}
	if m, ok := jsonLookup(obj, "model"); ok && len(m) > 2 && m[0] == '"' {
		name := jsonAppendString(nil, m)
		if len(name) > maxModelLen {
			name = name[:maxModelLen]
		}
		u.Model = string(name)
	}
}

// observeAnthropicUsage reads an Anthropic usage object. message_start
// sets every count; a later message_delta carries the final output count
// and, when non-zero, corrected input and cache counts.
func (u *usage) observeAnthropicUsage(v []byte, delta bool) {
	it, ok := jsonOpen(v, 0, 0)
	for ok && it.isObject() && it.next() {
		n, ok := jsonInt(it.value())
		if !ok {
			continue
		}
		switch {
		case it.keyIs("output_tokens"):
			u.Output = n
		case delta && n == 0:
		case it.keyIs("input_tokens"):
			u.Input = n
		case it.keyIs("cache_read_input_tokens"):
			u.CacheRead = n
		case it.keyIs("cache_creation_input_tokens"):
			u.CacheWrite = n
		}
	}
}

// observeOpenAI reads the model and the usage of a chunk or a body:
// prompt_tokens, completion_tokens, prompt_tokens_details.cached_tokens.
func (u *usage) observeOpenAI(obj []byte) {
	it, ok := jsonOpen(obj, 0, 0)
	for ok && it.isObject() && it.next() {
		switch {
		case it.keyIs("model"):
			if v := it.value(); u.Model == "" && len(v) > 2 && v[0] == '"' {
				u.Model = string(jsonAppendString(nil, v))
			}
		case it.keyIs("usage"):
			uo, ok := it.enter()
			for ok && uo.isObject() && uo.next() {
				switch {
				case uo.keyIs("prompt_tokens"):
					if n, ok := jsonInt(uo.value()); ok {
						u.Input = n
					}
				case uo.keyIs("completion_tokens"):
					if n, ok := jsonInt(uo.value()); ok {
						u.Output = n
					}
				case uo.keyIs("prompt_tokens_details"):
					if c, ok := jsonLookup(uo.value(), "cached_tokens"); ok {
						if n, ok := jsonInt(c); ok {
							u.CacheRead = n
						}
					}
				}
			}
			if ok {
				it.leave(&uo)
			}
		}
	}
}
