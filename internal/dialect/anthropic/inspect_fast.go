package anthropic

import (
	"bytes"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// The bulk of an Anthropic stream (and of Bedrock's, converted) is
// content deltas written exactly so: text, and in an agent's turn the
// thinking before it and the tool calls' arguments after it. Such an
// event is read by its shape: the prefix, the index digits, the delta's
// type and its one string (validated as the scanner validates it) and
// the closing braces make it a valid object with no error member, so the
// class, the committing name and the text (a text delta's: the walk reads
// no other) are known without walking it. Any other spelling takes the
// walk.
var (
	textDeltaHead = []byte(`{"type":"content_block_delta","index":`)
	textDeltaMid  = []byte(`,"delta":{"type":"text_delta","text":`)
	deltaHead     = []byte(`,"delta":{"type":"`)
	// otherDeltas are the other delta types read by their shape: the rest
	// of the type and the member holding the string.
	otherDeltas = [...][]byte{
		[]byte(`input_json_delta","partial_json":`),
		[]byte(`thinking_delta","thinking":`),
		[]byte(`signature_delta","signature":`),
	}
)

// inspectContentDelta is inspectAnthropic of a content delta in its usual
// shape; ok is false for any other event.
func inspectContentDelta(ev sse.Event, withText bool) (info wire.EventInfo, ok bool) {
	if ev.Name != nil && string(ev.Name) != "content_block_delta" {
		return info, false
	}
	data := ev.Data
	if !bytes.HasPrefix(data, textDeltaHead) {
		return info, false
	}
	i := len(textDeltaHead)
	digits := i
	for i < len(data) && data[i] >= '0' && data[i] <= '9' {
		i++
	}
	if i == digits || i-digits > 1 && data[digits] == '0' {
		return info, false
	}
	text := bytes.HasPrefix(data[i:], textDeltaMid)
	switch {
	case text:
		i += len(textDeltaMid)
	case bytes.HasPrefix(data[i:], deltaHead):
		i += len(deltaHead)
		k := 0
		for k < len(otherDeltas) && !bytes.HasPrefix(data[i:], otherDeltas[k]) {
			k++
		}
		if k == len(otherDeltas) {
			return info, false
		}
		i += len(otherDeltas[k])
	default:
		return info, false
	}
	end := jsonscan.StringEnd(data, i)
	if end < 0 || len(data)-end < 2 || data[end] != '}' || data[end+1] != '}' || jsonscan.SkipSpace(data, end+2) != len(data) {
		return info, false
	}
	info.Class, info.By = wire.EvOutput, "content_block_delta"
	if withText && text {
		info.Text = data[i:end]
	}
	return info, true
}
