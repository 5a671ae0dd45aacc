package translate

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// responsesWriter writes an OpenAI Responses event stream as a strict
// state machine: response.created and .in_progress once; per output item
// output_item.added, its deltas, its .done events and output_item.done,
// one item at a time; then response.completed (or response.incomplete)
// carrying the whole response. Tool arguments must parse as a JSON object
// when their item is done, else an error, never a clean stop.
type responsesWriter struct {
	seq int64
	writerPhase
	id, model string
	created   int64
	items     []streamItem
	open      int             // index of the open item, -1 when none
	custom    map[string]bool // the request's custom tools
	quoted    []byte          // appendUnescaped's
}

// streamItem is one output item being streamed.
type streamItem struct {
	kind         Kind
	id           string
	callID, name string
	block        int    // the target's block index, for item ids
	buf          []byte // the text or arguments so far, decoded
	custom       bool   // a custom tool call: its input is sent whole at the end
}

func newResponsesWriter(custom map[string]bool) responsesWriter {
	return responsesWriter{open: -1, custom: custom}
}

// event writes the head of one event, up to and including its
// sequence_number; the caller appends the rest of the object.
func (w *responsesWriter) event(dst []byte, typ string) []byte {
	dst = append(dst, "event: "...)
	dst = append(dst, typ...)
	dst = append(dst, "\ndata: {\"type\":\""...)
	dst = append(dst, typ...)
	dst = append(dst, `","sequence_number":`...)
	dst = strconv.AppendInt(dst, w.seq, 10)
	w.seq++
	return dst
}

// eventJSON writes one whole event whose other fields are marshalled.
func (w *responsesWriter) eventJSON(dst []byte, typ string, fields map[string]any) []byte {
	dst = w.event(dst, typ)
	b, _ := json.Marshal(fields)
	if len(b) > 2 {
		dst = append(dst, ',')
		dst = append(dst, b[1:len(b)-1]...)
	}
	return append(dst, "}\n\n"...)
}

func (w *responsesWriter) start(dst []byte, id, model string) ([]byte, error) {
	if w.started {
		return dst, malformed("a second message start")
	}
	w.started, w.id, w.model, w.created = true, id, model, now().Unix()
	resp := &responsesBody{ID: responsesID(id), Object: "response", CreatedAt: w.created, Status: "in_progress",
		Model: model, Output: []responsesOutItem{}, ParallelToolCalls: true, ToolChoice: "auto", Tools: []any{}}
	b, _ := json.Marshal(resp) // one object, in both events
	dst = w.eventRaw(dst, "response.created", `,"response":`, b)
	return w.eventRaw(dst, "response.in_progress", `,"response":`, b), nil
}

// eventRaw writes one whole event whose one other field (name, with its
// leading comma and colon) is the JSON value v.
func (w *responsesWriter) eventRaw(dst []byte, typ, name string, v []byte) []byte {
	dst = w.event(dst, typ)
	dst = append(dst, name...)
	dst = append(dst, v...)
	return append(dst, "}\n\n"...)
}

// The fields of a text item's events, as json.Marshal wrote them from
// maps (keys sorted): item_id and output_index, after content_index.
func (w *responsesWriter) textItemFields(dst []byte, it *streamItem, idx int) []byte {
	dst = append(dst, `,"content_index":0,"item_id":`...)
	dst = appendMarshaledString(dst, it.id)
	if idx < 0 {
		return dst // the caller writes what sorts between
	}
	dst = append(dst, `,"output_index":`...)
	return strconv.AppendInt(dst, int64(idx), 10)
}

// appendTextPart is a text item's output_text part, as json.Marshal
// writes a responsesOutPart.
func appendTextPart(dst, text []byte) []byte {
	dst = append(dst, `{"type":"output_text","text":`...)
	dst = appendMarshaledString(dst, text)
	return append(dst, `,"annotations":[],"logprobs":[]}`...)
}

// appendItem is the item object of it, as json.Marshal writes its
// responsesOutItem: a message by hand, a call through Marshal.
func (w *responsesWriter) appendItem(dst []byte, it *streamItem, status string) []byte {
	if it.kind != KindText {
		b, _ := json.Marshal(w.itemObject(it, status))
		return append(dst, b...)
	}
	dst = append(dst, `{"id":`...)
	dst = appendMarshaledString(dst, it.id)
	dst = append(dst, `,"type":"message","status":`...)
	dst = appendMarshaledString(dst, status)
	dst = append(dst, `,"role":"assistant","content":[`...)
	if status == "completed" {
		dst = appendTextPart(dst, it.buf)
	}
	return append(dst, "]}"...)
}

// itemEvent is output_item.added or .done: the item, then output_index.
func (w *responsesWriter) itemEvent(dst []byte, typ string, it *streamItem, idx int, status string) []byte {
	dst = w.event(dst, typ)
	dst = append(dst, `,"item":`...)
	dst = w.appendItem(dst, it, status)
	dst = append(dst, `,"output_index":`...)
	dst = strconv.AppendInt(dst, int64(idx), 10)
	return append(dst, "}\n\n"...)
}

// itemID is the id of the output item for the target's block: the same
// as the non-stream body's.
func (w *responsesWriter) itemID(block int, kind Kind, toolID string, custom bool) string {
	r := Response{ID: w.id}
	return responsesItemID(&r, block, Block{Kind: kind, ToolID: toolID}, custom)
}

// openItem starts an output item for the target's block.
func (w *responsesWriter) openItem(dst []byte, kind Kind, block int, callID, name string) ([]byte, error) {
	if err := w.live(); err != nil {
		return dst, err
	}
	if w.open >= 0 {
		return dst, malformed("an output item starts while another is open")
	}
	w.open = len(w.items)
	if cap(w.items) > len(w.items) {
		w.items = w.items[:len(w.items)+1]
	} else {
		w.items = append(w.items, streamItem{})
	}
	it := &w.items[w.open]
	custom := kind == KindToolCall && w.custom[name]
	*it = streamItem{kind: kind, id: w.itemID(block, kind, callID, custom), callID: callID, name: name, block: block,
		buf: it.buf[:0], custom: custom}
	dst = w.itemEvent(dst, "response.output_item.added", it, w.open, "in_progress")
	if kind == KindText {
		dst = w.event(dst, "response.content_part.added")
		dst = w.textItemFields(dst, it, w.open)
		dst = append(dst, `,"part":`...)
		dst = appendTextPart(dst, nil)
		dst = append(dst, "}\n\n"...)
	}
	return dst, nil
}

func (w *responsesWriter) itemObject(it *streamItem, status string) responsesOutItem {
	out := responsesOutItem{ID: it.id, Status: status}
	if it.kind == KindText {
		out.Type, out.Role = "message", "assistant"
		out.Content = []responsesOutPart{}
		if status == "completed" {
			out.Content = append(out.Content, responsesOutPart{Type: "output_text", Text: string(it.buf), Annotations: []any{}, Logprobs: []any{}})
		}
		return out
	}
	if it.custom {
		input := ""
		if status == "completed" {
			input, _ = customInput(it.buf)
		}
		out.Type, out.CallID, out.Name, out.Input = "custom_tool_call", it.callID, it.name, &input
		return out
	}
	args := string(it.buf)
	out.Type, out.CallID, out.Name, out.Arguments = "function_call", it.callID, it.name, &args
	return out
}

// delta appends a fragment (the escaped body of a JSON string) to the
// open item: text to a message, arguments to a function call.
func (w *responsesWriter) delta(dst []byte, kind Kind, escaped []byte) ([]byte, error) {
	if err := w.live(); err != nil {
		return dst, err
	}
	if w.open < 0 || w.items[w.open].kind != kind {
		return dst, malformed("a delta outside an output item of its kind")
	}
	if len(escaped) == 0 {
		return dst, nil
	}
	it := &w.items[w.open]
	it.buf = appendUnescaped(it.buf, escaped, &w.quoted)
	if it.custom {
		return dst, nil // the input is inside the arguments' JSON: sent whole when they parse
	}
	if kind == KindText {
		dst = w.event(dst, "response.output_text.delta")
		dst = append(dst, `,"item_id":`...)
		dst = appendJSONString(dst, it.id)
		dst = append(dst, `,"output_index":`...)
		dst = strconv.AppendInt(dst, int64(w.open), 10)
		dst = append(dst, `,"content_index":0,"delta":"`...)
		dst = append(dst, escaped...)
		return append(dst, "\",\"logprobs\":[]}\n\n"...), nil
	}
	dst = w.event(dst, "response.function_call_arguments.delta")
	dst = append(dst, `,"item_id":`...)
	dst = appendJSONString(dst, it.id)
	dst = append(dst, `,"output_index":`...)
	dst = strconv.AppendInt(dst, int64(w.open), 10)
	dst = append(dst, `,"delta":"`...)
	dst = append(dst, escaped...)
	return append(dst, "\"}\n\n"...), nil
}

// closeItem finishes the open item; a function call's arguments must
// parse as an object by then.
func (w *responsesWriter) closeItem(dst []byte) ([]byte, error) {
	if err := w.live(); err != nil {
		return dst, err
	}
	if w.open < 0 {
		return dst, malformed("no output item is open")
	}
	it := &w.items[w.open]
	idx := w.open
	if it.kind == KindToolCall {
		if err := checkArgs(it.buf); err != nil {
			return dst, fmt.Errorf("%w: %w", errMalformed, err)
		}
	}
	switch {
	case it.custom:
		input, err := customInput(it.buf)
		if err != nil {
			return dst, fmt.Errorf("%w: %w", errMalformed, err)
		}
		dst = w.eventJSON(dst, "response.custom_tool_call_input.delta", map[string]any{"item_id": it.id,
			"output_index": idx, "delta": input})
		dst = w.eventJSON(dst, "response.custom_tool_call_input.done", map[string]any{"item_id": it.id,
			"output_index": idx, "input": input})
	case it.kind == KindToolCall:
		dst = w.eventJSON(dst, "response.function_call_arguments.done", map[string]any{"item_id": it.id,
			"output_index": idx, "name": it.name, "arguments": string(it.buf)})
	default:
		dst = w.event(dst, "response.output_text.done")
		dst = w.textItemFields(dst, it, -1)
		dst = append(dst, `,"logprobs":[],"output_index":`...)
		dst = strconv.AppendInt(dst, int64(idx), 10)
		dst = append(dst, `,"text":`...)
		dst = appendMarshaledString(dst, it.buf)
		dst = append(dst, "}\n\n"...)
		dst = w.event(dst, "response.content_part.done")
		dst = w.textItemFields(dst, it, idx)
		dst = append(dst, `,"part":`...)
		dst = appendTextPart(dst, it.buf)
		dst = append(dst, "}\n\n"...)
	}
	w.open = -1
	return w.itemEvent(dst, "response.output_item.done", it, idx, "completed"), nil
}

// finish writes response.completed, or response.incomplete when the stop
// reason says the answer was cut.
func (w *responsesWriter) finish(dst []byte, stop string, u Usage) ([]byte, error) {
	if err := w.live(); err != nil {
		return dst, err
	}
	if w.open >= 0 {
		return dst, malformed("the message ends inside an output item")
	}
	r := &Response{ID: w.id, Model: w.model, Stop: stop, Usage: u}
	for i := range w.items {
		it := &w.items[i]
		b := Block{Kind: it.kind, Text: string(it.buf), ToolID: it.callID, ToolName: it.name, Args: json.RawMessage(it.buf)}
		for len(r.Blocks) < it.block {
			r.Blocks = append(r.Blocks, Block{Kind: KindReasoning}) // a block not shown keeps the numbering
		}
		r.Blocks = append(r.Blocks, b)
	}
	body, err := responsesObject(r, w.created, w.custom)
	if err != nil {
		return dst, fmt.Errorf("%w: %w", errMalformed, err)
	}
	w.finished = true
	typ := "response.completed"
	if body.Status == "incomplete" {
		typ = "response.incomplete"
	}
	b, err := json.Marshal(body)
	if err != nil {
		return w.eventRaw(dst, typ, "", nil), nil // as a map that did not marshal wrote it
	}
	return w.eventRaw(dst, typ, `,"response":`, b), nil
}

// fail writes the Responses error event and ends the stream; after the
// terminal event nothing more is written.
func (w *responsesWriter) fail(dst []byte, err error) []byte {
	if w.finished {
		return dst
	}
	w.finished = true
	e := clientStreamError(err, "server_error")
	code := e.Code
	if code == "" {
		code = e.Type
	}
	return w.eventJSON(dst, "error", map[string]any{"code": code, "message": e.Message, "param": nil})
}
