package llmhedge

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
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

// anthropicFrame is the part of an Anthropic event a resumer reads.
type anthropicFrame struct {
	Type         string `json:"type"`
	Index        int    `json:"index"`
	ContentBlock *struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content_block"`
	Delta *struct {
		Type       string  `json:"type"`
		StopReason *string `json:"stop_reason"`
	} `json:"delta"`
}

// anthropicEventType is the event's name, or its data's type when it has
// none (switched on as string(...): no copy).
func anthropicEventType(ev sseEvent) []byte {
	if ev.Name != nil {
		return ev.Name
	}
	var f anthropicFrame
	_ = json.Unmarshal(ev.Data, &f)
	return []byte(f.Type)
}

func (r *anthropicResumer) track(ev sseEvent, info eventInfo) {
	switch string(anthropicEventType(ev)) {
	case "content_block_delta":
		if info.text == nil {
			r.fail("a delta that is not text")
			return
		}
		r.appendJSON(info.text)
	case "content_block_start":
		var f anthropicFrame
		if json.Unmarshal(ev.Data, &f) != nil || f.ContentBlock == nil || f.ContentBlock.Type != "text" {
			r.fail("a content block that is not text")
			return
		}
		r.blocks, r.open = f.Index+1, true
		r.appendText(f.ContentBlock.Text)
	case "content_block_stop":
		r.open = false
	case "message_delta":
		var f anthropicFrame
		if json.Unmarshal(ev.Data, &f) == nil && f.Delta != nil && f.Delta.StopReason != nil && *f.Delta.StopReason != "" {
			r.stopped = true
		}
	}
}

func (r *anthropicResumer) finished() bool { return r.stopped }

func (r *anthropicResumer) prefill(body []byte, text string) ([]byte, error) {
	return appendTurn(body, "messages", mergeAnthropicTurn, func(t string) any {
		return map[string]string{"role": "assistant", "content": t}
	}, text)
}

// mergeAnthropicTurn extends the client's own last assistant turn (a
// client prefill) with the text.
func mergeAnthropicTurn(last json.RawMessage, text string) (json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(last, &m) != nil || string(m["role"]) != `"assistant"` {
		return nil, false
	}
	var s string
	if json.Unmarshal(m["content"], &s) == nil {
		m["content"] = jsonText(s + text)
	} else {
		var blocks []json.RawMessage
		if json.Unmarshal(m["content"], &blocks) != nil {
			return nil, false
		}
		b, _ := json.Marshal(map[string]string{"type": "text", "text": text})
		m["content"], _ = json.Marshal(append(blocks, b))
	}
	out, err := json.Marshal(m)
	return out, err == nil
}

func (r *anthropicResumer) read(ev sseEvent, info eventInfo) contEvent {
	switch string(anthropicEventType(ev)) {
	case "content_block_delta":
		if info.text == nil {
			return contEvent{kind: contOther}
		}
		return contEvent{kind: contText, text: string(jsonAppendString(nil, info.text))}
	case "content_block_start":
		var f anthropicFrame
		if json.Unmarshal(ev.Data, &f) != nil || f.ContentBlock == nil || f.ContentBlock.Type != "text" {
			return contEvent{kind: contOther}
		}
		return contEvent{kind: contText, text: f.ContentBlock.Text}
	case "message_delta":
		var f anthropicFrame
		if json.Unmarshal(ev.Data, &f) == nil && f.Delta != nil && f.Delta.StopReason != nil {
			return contEvent{kind: contFinish, finish: *f.Delta.StopReason}
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
