package llmhedge

import (
	"bytes"
	"io"
	"strconv"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
)

// anthropicResumer continues an Anthropic Messages stream: the client has
// one message_start and text blocks; a continuation's deltas go on in the
// client's last text block (or a new one after it, if it was closed).
type anthropicResumer struct {
	textLog
	blocks  int  // content blocks the client has seen start
	open    bool // the last one is still open
	stopped bool // message_delta with a stop_reason reached the client
}

func (anthropicDialect) newResumer(*llmRequest) resumer { return &anthropicResumer{} }

// anthropicEventType is the event's name, or its data's type when it has
// none (switched on as string(...): no copy).
func anthropicEventType(ev sse.Event) []byte {
	if ev.Name != nil {
		return ev.Name
	}
	if t, ok := jsonscan.Lookup(ev.Data, "type"); ok && jsonscan.IsString(t) {
		return t[1 : len(t)-1] // the event types need no unescaping
	}
	return nil
}

// anthropicBlockStart reads a content_block_start: the block's index,
// whether it is a text block, and its initial text (a raw JSON string).
func anthropicBlockStart(data []byte) (index int64, isText bool, text []byte) {
	if v, ok := jsonscan.Lookup(data, "index"); ok {
		index, _ = parseSeq(v)
	}
	typ, _ := jsonscan.Lookup(data, "content_block", "type")
	if text, _ = jsonscan.Lookup(data, "content_block", "text"); !jsonscan.IsString(text) {
		text = nil
	}
	return index, jsonscan.StringIs(typ, "text"), text
}

// anthropicStopReason is a message_delta's stop_reason (a raw JSON string),
// or nil when it has none yet.
func anthropicStopReason(data []byte) []byte {
	v, ok := jsonscan.Lookup(data, "delta", "stop_reason")
	if !ok || !jsonscan.IsString(v) || len(v) == 2 {
		return nil
	}
	return v
}

func (r *anthropicResumer) track(ev sse.Event, info eventInfo) {
	switch string(anthropicEventType(ev)) {
	case "content_block_delta":
		if info.text == nil {
			r.fail("a delta that is not text")
			return
		}
		r.appendJSON(info.text)
	case "content_block_start":
		index, isText, text := anthropicBlockStart(ev.Data)
		if !isText {
			r.fail("a content block that is not text")
			return
		}
		r.blocks, r.open = int(index)+1, true
		if text != nil {
			r.appendJSON(text)
		}
	case "content_block_stop":
		r.open = false
	case "message_delta":
		if anthropicStopReason(ev.Data) != nil {
			r.stopped = true
		}
	}
}

func (r *anthropicResumer) finished() bool { return r.stopped }

func (r *anthropicResumer) prefill(body []byte, text string) ([]byte, error) {
	return appendTurn(body, "messages", mergeAssistantTurn, func(t string) any {
		return map[string]string{"role": "assistant", "content": t}
	}, text)
}

func (r *anthropicResumer) read(ev sse.Event, info eventInfo) contEvent {
	switch string(anthropicEventType(ev)) {
	case "content_block_delta":
		if info.text == nil {
			return contEvent{kind: contOther}
		}
		return contEvent{kind: contText, text: jsonscan.Unquote(info.text)}
	case "content_block_start":
		_, isText, text := anthropicBlockStart(ev.Data)
		if !isText {
			return contEvent{kind: contOther}
		}
		return contEvent{kind: contText, text: jsonscan.Unquote(text)}
	case "message_delta":
		if v := anthropicStopReason(ev.Data); v != nil {
			return contEvent{kind: contFinish, finish: jsonscan.Unquote(v)}
		}
	case "message_stop":
		return contEvent{kind: contTerminal}
	case "error":
		return contEvent{kind: contError}
	}
	if info.class == evError {
		return contEvent{kind: contError}
	}
	return contEvent{kind: contSkip}
}

func (r *anthropicResumer) writeText(w io.Writer, text string) error {
	if text == "" {
		return nil
	}
	var b bytes.Buffer
	if !r.open {
		b.WriteString("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":")
		b.WriteString(strconv.Itoa(r.blocks))
		b.WriteString(",\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
		r.blocks, r.open = r.blocks+1, true
	}
	b.WriteString("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":")
	b.WriteString(strconv.Itoa(r.blocks - 1))
	b.WriteString(",\"delta\":{\"type\":\"text_delta\",\"text\":")
	b.Write(jsonText(text))
	b.WriteString("}}\n\n")
	r.appendText(text)
	_, err := w.Write(b.Bytes())
	return err
}

func (r *anthropicResumer) writeEnd(w io.Writer, end contEnd) error {
	var b bytes.Buffer
	if r.open {
		b.WriteString("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":")
		b.WriteString(strconv.Itoa(r.blocks - 1))
		b.WriteString("}\n\n")
		r.open = false
	}
	if !r.stopped {
		reason := end.finish
		if reason == "" {
			reason = "end_turn"
		}
		b.WriteString("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":")
		b.Write(jsonText(reason))
		b.WriteString(",\"stop_sequence\":null},\"usage\":{\"output_tokens\":")
		b.WriteString(strconv.FormatInt(end.output, 10))
		b.WriteString("}}\n\n")
	}
	b.WriteString("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	_, err := w.Write(b.Bytes())
	return err
}
