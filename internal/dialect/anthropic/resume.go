package anthropic

import (
	"bytes"
	"io"
	"strconv"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// anthropicResumer continues an Anthropic Messages stream: the client has
// one message_start and text blocks; a continuation's deltas go on in the
// client's last text block (or a new one after it, if it was closed).
type Resumer struct {
	wire.TextLog
	blocks  int  // content blocks the client has seen start
	open    bool // the last one is still open
	stopped bool // message_delta with a stop_reason reached the client
}

func (Dialect) NewResumer(*wire.Request) wire.Resumer { return &Resumer{} }

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
		index, _ = wire.ParseSeq(v)
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

func (r *Resumer) Track(ev sse.Event, info wire.EventInfo) {
	switch string(anthropicEventType(ev)) {
	case "content_block_delta":
		if info.Text == nil {
			r.Fail("a delta that is not text")
			return
		}
		r.AppendJSON(info.Text)
	case "content_block_start":
		index, isText, text := anthropicBlockStart(ev.Data)
		if !isText {
			r.Fail("a content block that is not text")
			return
		}
		r.blocks, r.open = int(index)+1, true
		if text != nil {
			r.AppendJSON(text)
		}
	case "content_block_stop":
		r.open = false
	case "message_delta":
		if anthropicStopReason(ev.Data) != nil {
			r.stopped = true
		}
	}
}

func (r *Resumer) Finished() bool { return r.stopped }

func (r *Resumer) Prefill(body []byte, text string) ([]byte, error) {
	return wire.AppendTurn(body, "messages", wire.MergeAssistantTurn, func(t string) any {
		return map[string]string{"role": "assistant", "content": t}
	}, text)
}

func (r *Resumer) Read(ev sse.Event, info wire.EventInfo) wire.ContEvent {
	switch string(anthropicEventType(ev)) {
	case "content_block_delta":
		if info.Text == nil {
			return wire.ContEvent{Kind: wire.ContOther}
		}
		return wire.ContEvent{Kind: wire.ContText, Text: jsonscan.Unquote(info.Text)}
	case "content_block_start":
		_, isText, text := anthropicBlockStart(ev.Data)
		if !isText {
			return wire.ContEvent{Kind: wire.ContOther}
		}
		return wire.ContEvent{Kind: wire.ContText, Text: jsonscan.Unquote(text)}
	case "message_delta":
		if v := anthropicStopReason(ev.Data); v != nil {
			return wire.ContEvent{Kind: wire.ContFinish, Finish: jsonscan.Unquote(v)}
		}
	case "message_stop":
		return wire.ContEvent{Kind: wire.ContTerminal}
	case "error":
		return wire.ContEvent{Kind: wire.ContError}
	}
	if info.Class == wire.EvError {
		return wire.ContEvent{Kind: wire.ContError}
	}
	return wire.ContEvent{Kind: wire.ContSkip}
}

func (r *Resumer) WriteText(w io.Writer, text string) error {
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
	b.Write(wire.JSONText(text))
	b.WriteString("}}\n\n")
	r.AppendText(text)
	_, err := w.Write(b.Bytes())
	return err
}

func (r *Resumer) WriteEnd(w io.Writer, end wire.ContEnd) error {
	var b bytes.Buffer
	if r.open {
		b.WriteString("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":")
		b.WriteString(strconv.Itoa(r.blocks - 1))
		b.WriteString("}\n\n")
		r.open = false
	}
	if !r.stopped {
		reason := end.Finish
		if reason == "" {
			reason = "end_turn"
		}
		b.WriteString("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":")
		b.Write(wire.JSONText(reason))
		b.WriteString(",\"stop_sequence\":null},\"usage\":{\"output_tokens\":")
		b.WriteString(strconv.FormatInt(end.Output, 10))
		b.WriteString("}}\n\n")
	}
	b.WriteString("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	_, err := w.Write(b.Bytes())
	return err
}
