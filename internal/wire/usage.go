package wire

import (
	"github.com/llmhedge/caddy-llm-hedge/internal/genai"
	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
)

// usage is the token accounting of one response, as the provider reported
// it.
type Usage struct {
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
	// Finish is why the response stopped, read when its attempt is traced
	// (trace.go). A translated stream's are read from the target's events
	// before translation (xlBody), and On is then off for the client's.
	Finish genai.FinishReasons
}

var UsageKey = []byte(`"usage"`)

// observeEvent records what a stream event says about usage. Each
// dialect skips the events that cannot carry usage by name or by a
// substring check, so it is cheap to call for every event.
func (u *Usage) ObserveEvent(d Dialect, ev sse.Event) {
	if u == nil || len(ev.Data) == 0 {
		return
	}
	d.ObserveEvent(u, ev)
	if u.Finish.On {
		u.Finish.ObserveEvent(d.String(), ev.Data)
	}
}

// observeBody records the usage of a complete non-stream response body.
func (u *Usage) ObserveBody(d Dialect, body []byte) {
	if u == nil {
		return
	}
	d.ObserveBody(u, body)
	if u.Finish.On {
		u.Finish.ObserveBody(d.String(), body)
	}
}

// observeModel takes the "model" member of obj, if none was seen yet,
// clipped to maxModelLen bytes: it goes to the log line.
func (u *Usage) ObserveModel(obj []byte) {
	if u.Model != "" {
		return
	}
	if m, ok := jsonscan.Lookup(obj, "model"); ok && len(m) > 2 && m[0] == '"' {
		name := jsonscan.AppendString(nil, m)
		if len(name) > MaxModelLen {
			name = name[:MaxModelLen]
		}
		u.Model = string(name)
	}
}

// ApplyCounts records the counts a walk read (those it has).
func (u *Usage) ApplyCounts(c UsageCounts) {
	if c.HasInput {
		u.Input = c.Input
	}
	if c.HasOutput {
		u.Output = c.Output
	}
	if c.HasCacheRead {
		u.CacheRead = c.CacheRead
	}
}

// readTokenCounts reads an OpenAI-style usage object (Chat Completions and
// Responses name the same three counts differently): the input and output
// counts, and cached_tokens inside the details object.
func (u *Usage) ReadTokenCounts(uo *jsonscan.Iter, input, output, details string) {
	var c UsageCounts
	ReadTokenCounts(uo, input, output, details, &c)
	u.ApplyCounts(c)
}

// ReadTokenCounts is Usage.ReadTokenCounts into c: what the object sets,
// and the Has* of each count it sets (a later member overrides).
func ReadTokenCounts(uo *jsonscan.Iter, input, output, details string, c *UsageCounts) {
	for uo.IsObject() && uo.Next() {
		switch {
		case uo.KeyIs(input):
			if n, ok := jsonscan.Int(uo.Value()); ok {
				c.Input, c.HasInput = n, true
			}
		case uo.KeyIs(output):
			if n, ok := jsonscan.Int(uo.Value()); ok {
				c.Output, c.HasOutput = n, true
			}
		case uo.KeyIs(details):
			if v, ok := jsonscan.Lookup(uo.Value(), "cached_tokens"); ok {
				if n, ok := jsonscan.Int(v); ok {
					c.CacheRead, c.HasCacheRead = n, true
				}
			}
		}
	}
}
