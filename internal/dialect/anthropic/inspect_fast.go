package anthropic

import (
	"bytes"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// The bulk of an Anthropic stream (and of Bedrock's, converted) is text
// deltas written exactly so. Such an event is read by its shape: the
// prefix, the index digits, the text string (validated as the scanner
// validates it) and the closing braces make it a valid object with no
// error member, so the class, the committing name and the text are
// known without walking it. Any other spelling takes the walk.
var (
	textDeltaHead = []byte(`{"type":"content_block_delta","index":`)
	textDeltaMid  = []byte(`,"delta":{"type":"text_delta","text":`)
)

// inspectTextDelta is inspectAnthropic of a text delta in its usual
// shape; ok is false for any other event.
func inspectTextDelta(ev sse.Event, withText bool) (info wire.EventInfo, ok bool) {
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
	if i == digits || i-digits > 1 && data[digits] == '0' || !bytes.HasPrefix(data[i:], textDeltaMid) {
		return info, false
	}
	i += len(textDeltaMid)
	end := jsonscan.StringEnd(data, i)
	if end < 0 || len(data)-end < 2 || data[end] != '}' || data[end+1] != '}' || jsonscan.SkipSpace(data, end+2) != len(data) {
		return info, false
	}
	info.Class, info.By = wire.EvOutput, "content_block_delta"
	if withText {
		info.Text = data[i:end]
	}
	return info, true
}
