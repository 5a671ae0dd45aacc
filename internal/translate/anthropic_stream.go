package translate

import (
	"bytes"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
)

// anthropicToResponsesStream reads an Anthropic Messages event stream and
// writes a Responses one, holding the target to its own grammar: one
// message_start, blocks at indices 0, 1, 2... started, filled and stopped
// in turn, message_delta with the stop reason, then message_stop.
type anthropicToResponsesStream struct {
	w        itemWriter // the client's writer (Responses', or Gemini's)
	next     int        // the index the next block must have
	open     int        // the open block's index, -1 when none
	openKind Kind       // its kind; KindReasoning is a block not shown
	argsSeen bool       // the open tool block received argument bytes
	stop     string
	usage    Usage
	delta    bool // message_delta arrived
	done     bool // message_stop arrived
	// frame is the last content_block_delta walked (stream_frame.go),
	// for the block frameIndex (each index is opened once: while it is
	// open, the block is the frame's, of the frame's kind).
	frame      textFrame
	frameIndex int
}

func newAnthropicToResponsesStream(custom map[string]bool) *anthropicToResponsesStream {
	w := newResponsesWriter(custom)
	return newAnthropicStream(&w)
}

// newAnthropicStream reads an Anthropic stream for the client w writes.
func newAnthropicStream(w itemWriter) *anthropicToResponsesStream {
	return &anthropicToResponsesStream{w: w, open: -1}
}

// anthropicEvent is what one event carries, as raw slices of its data.
type anthropicEvent struct {
	data                                             []byte
	typ, index, message, block, delta, usage, errVal []byte
}

func (s *anthropicToResponsesStream) Event(dst []byte, ev sse.Event) ([]byte, error) {
	data := bytes.TrimSpace(ev.Data)
	if len(data) == 0 {
		return dst, nil
	}
	if s.done {
		return dst, ErrAfterEnd
	}
	if text, ok := s.frame.match(data); ok && s.open == s.frameIndex {
		// The walk's checks (atOpenBlock, the delta's type) pass, as for
		// the frame: its text.
		return s.blockText(dst, text)
	}
	e := anthropicEvent{data: data}
	it, ok := jsonscan.Open(data, 0, 0)
	if !ok || !it.IsObject() {
		return dst, malformed("anthropic event is not a JSON object")
	}
	for it.Next() {
		switch {
		case it.KeyIs("type"):
			e.typ = it.Value()
		case it.KeyIs("index"):
			e.index = it.Value()
		case it.KeyIs("message"):
			e.message = it.Value()
		case it.KeyIs("content_block"):
			e.block = it.Value()
		case it.KeyIs("delta"):
			e.delta = it.Value()
		case it.KeyIs("usage"):
			e.usage = it.Value()
		case it.KeyIs("error"):
			e.errVal = it.Value()
		}
	}
	if !it.End() || !jsonscan.IsString(e.typ) {
		return dst, malformed("anthropic event is not valid JSON with a type")
	}
	typ := e.typ[1 : len(e.typ)-1]
	switch string(typ) {
	case "content_block_delta":
		return s.blockDelta(dst, &e)
	case "message_start":
		return s.messageStart(dst, &e)
	case "content_block_start":
		return s.blockStart(dst, &e)
	case "content_block_stop":
		return s.blockStop(dst, &e)
	case "message_delta":
		return s.messageDelta(dst, &e)
	case "message_stop":
		if !s.delta {
			return dst, malformed("message_stop before message_delta")
		}
		s.done = true
		return s.w.finish(dst, s.stop, s.usage)
	case "ping":
		return dst, nil
	case "error":
		return dst, anthropicUpstreamError(e.errVal)
	}
	return dst, malformed("anthropic event type %s", e.typ)
}

func (s *anthropicToResponsesStream) messageStart(dst []byte, e *anthropicEvent) ([]byte, error) {
	id, _ := jsonscan.Lookup(e.message, "id")
	model, _ := jsonscan.Lookup(e.message, "model")
	if u, ok := jsonscan.Lookup(e.message, "usage"); ok {
		s.usage = anthropicStreamUsage(u, s.usage)
	}
	return s.w.start(dst, rawString(id), rawString(model))
}

func (s *anthropicToResponsesStream) index(e *anthropicEvent) (int, error) {
	n, ok := jsonscan.Int(e.index)
	if !ok {
		return 0, malformed("anthropic block event without an index")
	}
	return int(n), nil
}

// atOpenBlock is an error unless the delta or stop event names the open block.
func (s *anthropicToResponsesStream) atOpenBlock(e *anthropicEvent, event string) error {
	n, err := s.index(e)
	if err != nil {
		return err
	}
	if n != s.open {
		return malformed("%s for block %d, open %d", event, n, s.open)
	}
	return nil
}

func (s *anthropicToResponsesStream) blockStart(dst []byte, e *anthropicEvent) ([]byte, error) {
	n, err := s.index(e)
	if err != nil {
		return dst, err
	}
	if n != s.next || s.open >= 0 || s.delta {
		return dst, malformed("content_block_start %d out of order", n)
	}
	s.next++
	s.open, s.argsSeen = n, false
	typ, _ := jsonscan.Lookup(e.block, "type")
	switch {
	case jsonscan.StringIs(typ, "text"):
		s.openKind = KindText
		if dst, err = s.w.openItem(dst, KindText, n, "", ""); err != nil {
			return dst, err
		}
		if text, _ := jsonscan.Lookup(e.block, "text"); jsonscan.IsString(text) {
			return s.w.delta(dst, KindText, text[1:len(text)-1])
		}
		return dst, nil
	case jsonscan.StringIs(typ, "tool_use"):
		s.openKind = KindToolCall
		id, _ := jsonscan.Lookup(e.block, "id")
		name, _ := jsonscan.Lookup(e.block, "name")
		if rawString(id) == "" || rawString(name) == "" {
			return dst, malformed("tool_use block without id or name")
		}
		return s.w.openItem(dst, KindToolCall, n, rawString(id), rawString(name))
	case jsonscan.StringIs(typ, "thinking"), jsonscan.StringIs(typ, "redacted_thinking"):
		// Signed thinking is Anthropic's own state: not shown to this client.
		s.openKind = KindReasoning
		return dst, nil
	}
	return dst, malformed("content block type %s has no Responses equivalent", typ)
}

func (s *anthropicToResponsesStream) blockDelta(dst []byte, e *anthropicEvent) ([]byte, error) {
	if err := s.atOpenBlock(e, "content_block_delta"); err != nil {
		return dst, err
	}
	var typ, text []byte
	it, ok := jsonscan.Open(e.delta, 0, 0)
	if !ok {
		return dst, malformed("content_block_delta without a delta")
	}
	for it.Next() {
		switch {
		case it.KeyIs("type"):
			typ = it.Value()
		case it.KeyIs("text"), it.KeyIs("partial_json"):
			text = it.Value()
		default:
			it.Value()
		}
	}
	switch {
	case s.openKind == KindText && jsonscan.StringIs(typ, "text_delta") && jsonscan.IsString(text),
		s.openKind == KindToolCall && jsonscan.StringIs(typ, "input_json_delta") && jsonscan.IsString(text):
		s.frame.keep(e.data, text, nil, nil)
		s.frameIndex = s.open
		return s.blockText(dst, text)
	case s.openKind == KindReasoning && (jsonscan.StringIs(typ, "thinking_delta") || jsonscan.StringIs(typ, "signature_delta")):
		return dst, nil
	}
	return dst, malformed("delta %s does not fit the open block", typ)
}

// blockText applies the text (or the arguments) of a delta to the open
// text (or tool) block.
func (s *anthropicToResponsesStream) blockText(dst, text []byte) ([]byte, error) {
	if s.openKind == KindToolCall {
		s.argsSeen = s.argsSeen || len(text) > 2
	}
	return s.w.delta(dst, s.openKind, text[1:len(text)-1])
}

func (s *anthropicToResponsesStream) blockStop(dst []byte, e *anthropicEvent) ([]byte, error) {
	if err := s.atOpenBlock(e, "content_block_stop"); err != nil {
		return dst, err
	}
	s.open = -1
	switch s.openKind {
	case KindReasoning:
		return dst, nil
	case KindToolCall:
		if !s.argsSeen {
			// Anthropic streams no argument bytes for an empty input: its
			// documented start value {} stands.
			var err error
			if dst, err = s.w.delta(dst, KindToolCall, []byte("{}")); err != nil {
				return dst, err
			}
		}
	}
	// Arguments that do not parse fail here, before message_delta could
	// say whether max_tokens cut them.
	return s.w.closeItem(dst)
}

func (s *anthropicToResponsesStream) messageDelta(dst []byte, e *anthropicEvent) ([]byte, error) {
	if s.open >= 0 || s.delta || !s.w.isStarted() {
		return dst, malformed("message_delta out of order")
	}
	s.delta = true
	reason, _ := jsonscan.Lookup(e.delta, "stop_reason")
	s.stop = rawString(reason)
	if _, ok := responsesStatus[s.stop]; !ok {
		return dst, malformed("stop_reason %s has no Responses equivalent", reason)
	}
	if len(e.usage) > 0 && e.usage[0] == '{' {
		s.usage = anthropicStreamUsage(e.usage, s.usage)
	}
	return dst, nil
}

func (s *anthropicToResponsesStream) End(dst []byte) ([]byte, error) {
	if !s.done {
		return dst, malformed("anthropic stream ended before message_stop")
	}
	return dst, nil
}

func (s *anthropicToResponsesStream) Fail(dst []byte, err error) []byte {
	s.done = true
	return s.w.fail(dst, err)
}

// anthropicStreamUsage updates u with the counts a usage object holds:
// message_delta's are running totals that override message_start's.
func anthropicStreamUsage(v []byte, u Usage) Usage {
	it, _ := jsonscan.Open(v, 0, 0)
	for it.Next() {
		var dst *int64
		switch {
		case it.KeyIs("input_tokens"):
			dst = &u.Input
		case it.KeyIs("output_tokens"):
			dst = &u.Output
		case it.KeyIs("cache_read_input_tokens"):
			dst = &u.CacheRead
		case it.KeyIs("cache_creation_input_tokens"):
			dst = &u.CacheWrite
		default:
			continue
		}
		if n, ok := jsonscan.Int(it.Value()); ok {
			*dst = n
		}
	}
	return u
}

func anthropicUpstreamError(errVal []byte) error {
	body := append([]byte(`{"type":"error","error":`), errVal...)
	body = append(body, '}')
	typ, msg := anthropicErrorFields(body)
	k := anthropicToOpenAIKind(500, typ, msg)
	code := k.code
	if code == "" {
		code = k.typ
	}
	return &UpstreamError{Status: k.status, Type: k.typ, Code: code, Message: msg}
}
