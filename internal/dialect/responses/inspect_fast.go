package responses

import (
	"bytes"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// The bulk of a Responses stream is response.output_text.delta events,
// written compactly with "type" first and flat members after it:
// strings, integers and an empty logprobs array, in an order that differs
// between providers (OpenAI puts sequence_number first and adds
// obfuscation). Such an event is read by a flat scan: each key and value is
// checked as the scanner checks it
// (StringEnd for strings, the JSON number grammar for integers), so the
// data is a valid object; without an error, response, code or message
// member and with one string delta, its class, name, text and sequence
// number are those of the walk. Any other spelling takes the walk.
var textDeltaHead = []byte(`{"type":"response.output_text.delta"`)

// inspectTextDelta is InspectResponses of a text delta in its usual
// shape; ok is false for any other event.
func inspectTextDelta(ev sse.Event, withText bool) (info wire.EventInfo, ok bool) {
	if string(ev.Name) == "error" {
		return info, false
	}
	data := ev.Data
	if !bytes.HasPrefix(data, textDeltaHead) {
		return info, false
	}
	var delta, seq []byte
	i := len(textDeltaHead)
	for {
		if i >= len(data) {
			return info, false
		}
		if data[i] == '}' {
			i++
			break
		}
		if data[i] != ',' || i+1 >= len(data) || data[i+1] != '"' {
			return info, false
		}
		keyEnd := jsonscan.StringEnd(data, i+1) // validated as the walk does
		if keyEnd < 0 {
			return info, false
		}
		key := data[i+2 : keyEnd-1]
		i = keyEnd
		if i >= len(data) || data[i] != ':' || bytes.IndexByte(key, '\\') >= 0 {
			return info, false
		}
		i++
		end := flatValueEnd(data, i)
		if end < 0 {
			return info, false
		}
		switch string(key) {
		case "type", "error", "response", "code", "message":
			return info, false // the walk decides what these mean
		case "delta":
			if delta != nil || data[i] != '"' {
				return info, false
			}
			delta = data[i:end]
		case "sequence_number":
			if seq == nil {
				seq = data[i:end] // the first, as the walk keeps it
			}
		}
		i = end
	}
	if delta == nil || jsonscan.SkipSpace(data, i) != len(data) {
		return info, false
	}
	info.Class, info.By, info.Seq = wire.EvOutput, "response.output_text.delta", seq
	if withText {
		info.Text = delta
	}
	return info, true
}

// flatValueEnd returns the index past the value at data[i] when it is a
// string, an integer, [] or null, written without spaces; -1 otherwise.
func flatValueEnd(data []byte, i int) int {
	if i >= len(data) {
		return -1
	}
	switch c := data[i]; {
	case c == '"':
		return jsonscan.StringEnd(data, i)
	case c == '0':
		if i+1 < len(data) && data[i+1] >= '0' && data[i+1] <= '9' {
			return -1 // a leading zero
		}
		return integerEnd(data, i+1)
	case c >= '1' && c <= '9':
		j := i + 1
		for j < len(data) && data[j] >= '0' && data[j] <= '9' {
			j++
		}
		return integerEnd(data, j)
	case c == '[':
		if i+1 < len(data) && data[i+1] == ']' {
			return i + 2
		}
	case c == 'n':
		if bytes.HasPrefix(data[i:], []byte("null")) {
			return i + 4
		}
	}
	return -1
}

// integerEnd accepts the end of an integer at j when no fraction or
// exponent follows (those take the walk).
func integerEnd(data []byte, j int) int {
	if j < len(data) && (data[j] == '.' || data[j] == 'e' || data[j] == 'E') {
		return -1
	}
	return j
}
