package translate

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
)

// anthropicWriter writes an Anthropic Messages event stream as a strict
// state machine: one message_start, blocks opened and closed in pairs
// with indices 0, 1, 2..., one open block at a time, tool arguments that
// must parse as a JSON object when their block stops, then one
// message_delta and message_stop. Anything else is an error, never a
// clean stop. Every decoder of a target stream for an Anthropic client
// writes through it.
type anthropicWriter struct {
	writerPhase
	open     bool
	openKind Kind
	next     int    // index of the next block
	args     []byte // the open tool block's arguments, decoded
	quoted   []byte // appendUnescaped's
	ids      toolIDs
	id       string // the message id, for synthesized tool ids
}

func (w *anthropicWriter) reset() {
	ids := w.ids
	ids.reset()
	*w = anthropicWriter{args: w.args[:0], ids: ids, quoted: w.quoted}
}

func (w *anthropicWriter) start(dst []byte, id, model string, u Usage) ([]byte, error) {
	if w.started {
		return dst, malformed("a second message start")
	}
	w.started, w.id = true, id
	dst = append(dst, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":"...)
	dst = appendJSONString(dst, anthropicMessageID(id))
	dst = append(dst, `,"type":"message","role":"assistant","model":`...)
	dst = appendJSONString(dst, model)
	dst = append(dst, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":`...)
	dst = appendAnthropicUsage(dst, u)
	return append(dst, "}}\n\n"...), nil
}

func appendAnthropicUsage(dst []byte, u Usage) []byte {
	dst = append(dst, `{"input_tokens":`...)
	dst = strconv.AppendInt(dst, u.Input, 10)
	dst = append(dst, `,"cache_creation_input_tokens":`...)
	dst = strconv.AppendInt(dst, u.CacheWrite, 10)
	dst = append(dst, `,"cache_read_input_tokens":`...)
	dst = strconv.AppendInt(dst, u.CacheRead, 10)
	dst = append(dst, `,"output_tokens":`...)
	dst = strconv.AppendInt(dst, u.Output, 10)
	return append(dst, '}')
}

// text appends text (the escaped body of a JSON string) to a text block,
// opening one when the open block is not text.
func (w *anthropicWriter) text(dst, escaped []byte) ([]byte, error) {
	if len(escaped) == 0 {
		return dst, nil
	}
	if err := w.live(); err != nil {
		return dst, err
	}
	if !w.open || w.openKind != KindText {
		var err error
		if dst, err = w.closeBlock(dst); err != nil {
			return dst, err
		}
		dst = w.openBlock(dst, KindText)
		dst = append(dst, `"content_block":{"type":"text","text":""}}`+"\n\n"...)
	}
	dst = append(dst, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":"...)
	dst = strconv.AppendInt(dst, int64(w.next-1), 10)
	dst = append(dst, `,"delta":{"type":"text_delta","text":"`...)
	dst = append(dst, escaped...)
	return append(dst, "\"}}\n\n"...), nil
}

// openBlock writes the head of a content_block_start, up to its block.
func (w *anthropicWriter) openBlock(dst []byte, kind Kind) []byte {
	w.open, w.openKind = true, kind
	dst = append(dst, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":"...)
	dst = strconv.AppendInt(dst, int64(w.next), 10)
	w.next++
	return append(dst, ',')
}

// toolStart opens a tool_use block; n is the call's ordinal in the answer
// (from 0), for an id the target left out or repeated.
func (w *anthropicWriter) toolStart(dst []byte, id, name string, n int) ([]byte, error) {
	if err := w.live(); err != nil {
		return dst, err
	}
	if name == "" {
		return dst, malformed("tool call without a name")
	}
	dst, err := w.closeBlock(dst)
	if err != nil {
		return dst, err
	}
	w.args = w.args[:0]
	dst = w.openBlock(dst, KindToolCall)
	dst = append(dst, `"content_block":{"type":"tool_use","id":`...)
	dst = appendJSONString(dst, w.ids.unique(id, w.id, n))
	dst = append(dst, `,"name":`...)
	dst = appendJSONString(dst, name)
	return append(dst, `,"input":{}}}`+"\n\n"...), nil
}

// toolArgs appends a fragment of the open tool call's arguments (the
// escaped body of a JSON string).
func (w *anthropicWriter) toolArgs(dst, escaped []byte) ([]byte, error) {
	if len(escaped) == 0 {
		return dst, nil
	}
	if err := w.live(); err != nil {
		return dst, err
	}
	if !w.open || w.openKind != KindToolCall {
		return dst, malformed("tool arguments outside a tool call")
	}
	w.args = appendUnescaped(w.args, escaped, &w.quoted)
	dst = append(dst, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":"...)
	dst = strconv.AppendInt(dst, int64(w.next-1), 10)
	dst = append(dst, `,"delta":{"type":"input_json_delta","partial_json":"`...)
	dst = append(dst, escaped...)
	return append(dst, "\"}}\n\n"...), nil
}

// closeBlock stops the open block, if any; a tool call's arguments must
// parse as an object by then.
func (w *anthropicWriter) closeBlock(dst []byte) ([]byte, error) {
	if !w.open {
		return dst, nil
	}
	if w.openKind == KindToolCall {
		if err := checkArgs(w.args); err != nil {
			return dst, fmt.Errorf("%w: %w", errMalformed, err)
		}
	}
	w.open = false
	dst = append(dst, "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":"...)
	dst = strconv.AppendInt(dst, int64(w.next-1), 10)
	return append(dst, "}\n\n"...), nil
}

// finish closes the open block and ends the message.
func (w *anthropicWriter) finish(dst []byte, stop, stopSeq string, u Usage) ([]byte, error) {
	if err := w.live(); err != nil {
		return dst, err
	}
	if !anthropicStopReasons[stop] {
		return dst, malformed("stop reason %q has no Anthropic equivalent", stop)
	}
	dst, err := w.closeBlock(dst)
	if err != nil {
		return dst, err
	}
	w.finished = true
	dst = append(dst, "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\""...)
	dst = append(dst, stop...)
	dst = append(dst, `","stop_sequence":`...)
	if stopSeq == "" {
		dst = append(dst, "null"...)
	} else {
		dst = appendJSONString(dst, stopSeq)
	}
	dst = append(dst, `},"usage":`...)
	dst = appendAnthropicUsage(dst, u)
	return append(dst, "}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"...), nil
}

// fail writes Anthropic's error event for err and ends the stream; after
// message_stop (or an earlier error event) the client's stream is over
// and nothing more is written.
func (w *anthropicWriter) fail(dst []byte, err error) []byte {
	if w.finished {
		return dst
	}
	w.finished = true
	e := clientStreamError(err, "api_error")
	dst = append(dst, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":"...)
	dst = appendJSONString(dst, e.Type)
	dst = append(dst, `,"message":`...)
	dst = appendJSONString(dst, e.Message)
	return append(dst, "}}\n\n"...)
}

// appendUnescaped appends the decoded text of an escaped JSON string body.
// One with an escape is quoted, for the scanner to decode, in *quoted (a
// writer's, reused: no allocation per delta).
func appendUnescaped(dst, escaped []byte, quoted *[]byte) []byte {
	if bytes.IndexByte(escaped, '\\') < 0 {
		return append(dst, escaped...)
	}
	q := append(append(append((*quoted)[:0], '"'), escaped...), '"')
	*quoted = q
	return jsonscan.AppendString(dst, q)
}

// toolArgsJSON gives the open tool call its whole arguments, a raw JSON
// value (Gemini sends a call's arguments as one object).
func (w *anthropicWriter) toolArgsJSON(dst, args []byte) ([]byte, error) {
	quoted := appendJSONString(nil, args)
	return w.toolArgs(dst, quoted[1:len(quoted)-1])
}
