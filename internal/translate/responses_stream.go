package translate

import (
	"bytes"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
)

// responsesToAnthropicStream reads an OpenAI Responses event stream and
// writes an Anthropic one: a message item's text deltas fill one text
// block, a function_call item is one tool_use block, reasoning items are
// not shown; response.completed or .incomplete ends the message.
type responsesToAnthropicStream struct {
	w        blockWriter // the client's writer (Anthropic's, or Chat's)
	item     int         // output_index of the open item, -1 when none
	itemKind Kind        // its kind; KindReasoning is an item not shown
	argsSeen bool
	calls    int
	refused  bool
	done     bool
	// frame is the last text or arguments delta walked
	// (stream_frame.go), of the item frameItem of the kind frameKind, a
	// refusal's when frameRefusal.
	frame        textFrame
	frameItem    int
	frameKind    Kind
	frameRefusal bool
}

// newResponsesToAnthropicStream allocates the decoder and its writer
// together.
func newResponsesToAnthropicStream() *responsesToAnthropicStream {
	p := new(struct {
		s responsesToAnthropicStream
		w anthropicWriter
	})
	p.s = responsesToAnthropicStream{w: &p.w, item: -1}
	return &p.s
}

// newResponsesStream reads a Responses stream for the client w writes.
func newResponsesStream(w blockWriter) *responsesToAnthropicStream {
	return &responsesToAnthropicStream{w: w, item: -1}
}

// responsesIgnored are events that carry nothing an Anthropic client
// reads: the .done events repeat the deltas, reasoning stays OpenAI's.
var responsesIgnored = map[string]bool{
	"response.in_progress": true, "response.queued": true,
	"response.content_part.added": true, "response.content_part.done": true,
	"response.output_text.done": true, "response.refusal.done": true,
	"response.reasoning_summary_part.added": true, "response.reasoning_summary_part.done": true,
	"response.reasoning_summary_text.delta": true, "response.reasoning_summary_text.done": true,
	"response.reasoning_text.delta": true, "response.reasoning_text.done": true,
}

func (s *responsesToAnthropicStream) Event(dst []byte, ev sse.Event) ([]byte, error) {
	data := bytes.TrimSpace(ev.Data)
	if len(data) == 0 {
		return dst, nil
	}
	if s.done {
		return dst, ErrAfterEnd
	}
	if text, ok := s.frame.match(data); ok && s.item == s.frameItem && s.itemKind == s.frameKind {
		// The walk's checks (at) pass, as for the frame: its text.
		if s.frameKind == KindToolCall {
			return s.args(dst, text)
		}
		s.refused = s.refused || s.frameRefusal
		return s.w.text(dst, text[1:len(text)-1])
	}
	var typ, delta, index, item, resp, args, seq, obf []byte
	it, ok := jsonscan.Open(data, 0, 0)
	if !ok || !it.IsObject() {
		return dst, malformed("responses event is not a JSON object")
	}
	for it.Next() {
		switch {
		case it.KeyIs("type"):
			typ = it.Value()
		case it.KeyIs("delta"):
			delta = it.Value()
		case it.KeyIs("output_index"):
			index = it.Value()
		case it.KeyIs("item"):
			item = it.Value()
		case it.KeyIs("response"):
			resp = it.Value()
		case it.KeyIs("arguments"):
			args = it.Value()
		case string(it.Key) == "sequence_number":
			seq = it.Value() // read for the frame only
		case string(it.Key) == "obfuscation":
			obf = it.Value()
		}
	}
	if !it.End() || !jsonscan.IsString(typ) {
		return dst, malformed("responses event is not valid JSON with a type")
	}
	name := typ[1 : len(typ)-1]
	switch string(name) {
	case "response.output_text.delta", "response.refusal.delta":
		if err := s.at(index, KindText); err != nil || !jsonscan.IsString(delta) {
			return dst, malformed("text delta outside its message item")
		}
		s.refused = s.refused || name[9] == 'r'
		s.frame.keep(data, delta, seq, obf)
		s.frameItem, s.frameKind, s.frameRefusal = s.item, KindText, name[9] == 'r'
		return s.w.text(dst, delta[1:len(delta)-1])
	case "response.function_call_arguments.delta":
		if err := s.at(index, KindToolCall); err != nil || !jsonscan.IsString(delta) {
			return dst, malformed("arguments delta outside its function_call item")
		}
		s.frame.keep(data, delta, seq, obf)
		s.frameItem, s.frameKind = s.item, KindToolCall
		return s.args(dst, delta)
	case "response.function_call_arguments.done":
		if err := s.at(index, KindToolCall); err != nil || !jsonscan.IsString(args) {
			return dst, malformed("arguments done outside its function_call item")
		}
		if !s.argsSeen { // the arguments came whole
			s.argsSeen = true
			return s.w.toolArgs(dst, args[1:len(args)-1])
		}
		return dst, nil
	case "response.created":
		id, _ := jsonscan.Lookup(resp, "id")
		model, _ := jsonscan.Lookup(resp, "model")
		rid := rawString(id)
		if len(rid) > 5 && rid[:5] == "resp_" {
			rid = rid[5:]
		}
		return s.w.start(dst, rid, rawString(model), Usage{})
	case "response.output_item.added":
		return s.itemAdded(dst, index, item)
	case "response.output_item.done":
		if err := s.at(index, s.itemKind); err != nil {
			return dst, err
		}
		s.item = -1
		if s.itemKind == KindReasoning {
			return dst, nil
		}
		return s.w.closeBlock(dst)
	case "response.completed", "response.incomplete":
		return s.finish(dst, resp)
	case "response.failed":
		e, _ := jsonscan.Lookup(resp, "error")
		return dst, responsesUpstreamError(e)
	case "error":
		return dst, responsesUpstreamError(data)
	}
	if responsesIgnored[string(name)] {
		return dst, nil
	}
	return dst, malformed("responses event %s has no mapping", typ)
}

// args applies a fragment of the open function call's arguments (a raw
// string).
func (s *responsesToAnthropicStream) args(dst, delta []byte) ([]byte, error) {
	s.argsSeen = s.argsSeen || len(delta) > 2
	return s.w.toolArgs(dst, delta[1:len(delta)-1])
}

// at checks that an event addresses the open item, of the kind given.
func (s *responsesToAnthropicStream) at(index []byte, kind Kind) error {
	n, ok := jsonscan.Int(index)
	if !ok || int(n) != s.item || s.itemKind != kind {
		return malformed("event for output item %s, open %d", index, s.item)
	}
	return nil
}

func (s *responsesToAnthropicStream) itemAdded(dst []byte, index, item []byte) ([]byte, error) {
	n, ok := jsonscan.Int(index)
	if !ok || s.item >= 0 {
		return dst, malformed("output item %s added while %d is open", index, s.item)
	}
	s.item = int(n)
	typ, _ := jsonscan.Lookup(item, "type")
	switch {
	case jsonscan.StringIs(typ, "message"):
		s.itemKind = KindText
		return dst, nil // the text block opens with the first delta
	case jsonscan.StringIs(typ, "function_call"):
		s.itemKind, s.argsSeen = KindToolCall, false
		callID, _ := jsonscan.Lookup(item, "call_id")
		name, _ := jsonscan.Lookup(item, "name")
		dst, err := s.w.toolStart(dst, rawString(callID), rawString(name), s.calls)
		s.calls++
		return dst, err
	case jsonscan.StringIs(typ, "reasoning"):
		s.itemKind = KindReasoning // OpenAI's own state: not shown
		return dst, nil
	}
	return dst, malformed("output item type %s has no mapping", typ)
}

func (s *responsesToAnthropicStream) finish(dst []byte, resp []byte) ([]byte, error) {
	if s.item >= 0 {
		return dst, malformed("the response ends inside output item %d", s.item)
	}
	status, _ := jsonscan.Lookup(resp, "status")
	reason, _ := jsonscan.Lookup(resp, "incomplete_details", "reason")
	stop, err := responsesStop(rawString(status), rawString(reason), s.calls > 0)
	if err != nil {
		return dst, malformed("%v", err)
	}
	if s.refused && stop == StopEnd {
		stop = StopRefusal
	}
	var u Usage
	if raw, ok := jsonscan.Lookup(resp, "usage"); ok && len(raw) > 0 && raw[0] == '{' {
		var ru responsesUsage
		ru.InputTokens = lookupInt(raw, "input_tokens")
		ru.InputTokensDetails.CachedTokens = lookupInt(raw, "input_tokens_details", "cached_tokens")
		ru.OutputTokens = lookupInt(raw, "output_tokens")
		ru.OutputTokensDetails.ReasoningTokens = lookupInt(raw, "output_tokens_details", "reasoning_tokens")
		u = ru.usage()
	}
	s.done = true
	return s.w.finish(dst, stop, "", u)
}

func lookupInt(v []byte, path ...string) int64 {
	raw, ok := jsonscan.Lookup(v, path...)
	if !ok {
		return 0
	}
	n, _ := jsonscan.Int(raw)
	return n
}

func (s *responsesToAnthropicStream) End(dst []byte) ([]byte, error) {
	if !s.done {
		return dst, malformed("responses stream ended before response.completed")
	}
	return dst, nil
}

func (s *responsesToAnthropicStream) Fail(dst []byte, err error) []byte {
	s.done = true
	return s.w.fail(dst, err)
}

// responsesUpstreamError maps an error event or a response's error
// object ({"code","message"}) to Anthropic's error type.
func responsesUpstreamError(v []byte) error {
	code, _ := jsonscan.Lookup(v, "code")
	msg, _ := jsonscan.Lookup(v, "message")
	body := []byte(`{"error":{"message":` + string(msg) + `,"code":` + string(code) + `}}`)
	if !jsonscan.IsString(msg) {
		body = []byte(`{"error":{"message":"upstream error","code":null}}`)
	}
	status := 500
	switch rawString(code) {
	case "context_length_exceeded", "invalid_prompt":
		status = 400
	case "rate_limit_exceeded", "insufficient_quota":
		status = 429
	case "server_is_overloaded", "slow_down":
		status = 503
	}
	st, out := openAIErrorToAnthropic(status, body)
	t, m := anthropicErrorFields(out)
	return &UpstreamError{Status: st, Type: t, Message: m}
}
