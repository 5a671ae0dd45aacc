package translate

import (
	"bytes"
	"fmt"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
)

// chatToAnthropicStream reads Chat Completions chunks and writes an
// Anthropic event stream. Chat closes a choice with finish_reason, sends
// usage in a chunk of its own and ends with [DONE]; Anthropic's
// message_delta carries both, so it is written at [DONE], or at the usage
// that follows the finish_reason (the translated request asks for it: it
// is the last chunk), so that a server that then neither sends [DONE] nor
// closes does not hold the answer until the idle timeout.
type chatToAnthropicStream struct {
	w         blockWriter // the client's writer (Anthropic's, or itemBlocks)
	stop      string
	usage     Usage
	done      bool
	early     bool // finished at the usage chunk: one [DONE] may follow
	failed    bool
	refused   bool    // refusal text arrived: a stop is a refusal
	tool      int64   // Chat index of the open tool call, -1 when none
	toolsSeen []int64 // Chat indices of the calls opened so far
	// frame is the last chunk walked that was one text delta and nothing
	// else (stream_frame.go), a refusal's when frameRefusal; fx is what
	// the walk of the chunk at hand did.
	frame        textFrame
	frameRefusal bool
	fx           walkEffects
}

// newChatToAnthropicStream allocates the decoder and its writer together.
func newChatToAnthropicStream() *chatToAnthropicStream {
	p := new(struct {
		s chatToAnthropicStream
		w anthropicWriter
	})
	p.s = chatToAnthropicStream{tool: -1, w: &p.w}
	return &p.s
}

// newChatStream reads a Chat stream for the client w writes.
func newChatStream(w blockWriter) *chatToAnthropicStream {
	return &chatToAnthropicStream{tool: -1, w: w}
}

func (s *chatToAnthropicStream) Event(dst []byte, ev sse.Event) ([]byte, error) {
	data := bytes.TrimSpace(ev.Data)
	if len(data) == 0 {
		return dst, nil // a comment or keep-alive
	}
	if s.done || s.failed {
		if s.early && string(data) == "[DONE]" {
			s.early = false
			return dst, nil
		}
		return dst, ErrAfterEnd
	}
	if string(data) == "[DONE]" {
		if s.stop == "" {
			return dst, malformed("[DONE] before any finish_reason")
		}
		s.done = true
		return s.w.finish(dst, s.stop, "", s.usage)
	}
	if text, ok := s.frame.match(data); ok && s.w.isStarted() {
		return s.content(dst, text, s.frameRefusal)
	}
	started := s.w.isStarted()
	s.fx = walkEffects{}
	// One pass: choices are applied as the scanner reaches them, so a
	// text delta is read once (the id and model precede them in every
	// chunk OpenAI sends; the first chunk looks them up otherwise).
	var id, model, usage, errVal, obf []byte
	it, ok := jsonscan.Open(data, 0, 0)
	if !ok || !it.IsObject() {
		return dst, malformed("chat chunk is not a JSON object")
	}
	var err error
	for it.Next() {
		switch {
		case it.KeyIs("id"):
			id = it.Value()
		case it.KeyIs("model"):
			model = it.Value()
		case it.KeyIs("usage"):
			usage = it.Value()
		case it.KeyIs("error"):
			errVal = it.Value()
		case it.KeyIs("choices"):
			arr, ok := it.Enter()
			if !ok {
				if v := it.Value(); v == nil || !jsonscan.IsNull(v) {
					return dst, malformed("chat choices is not an array")
				}
				continue
			}
			if arr.IsObject() {
				return dst, malformed("chat choices is not an array")
			}
			if dst, err = s.startOnce(dst, data, id, model); err != nil {
				return dst, err
			}
			for arr.Next() {
				c, ok := arr.Enter()
				if !ok || !c.IsObject() {
					return dst, malformed("chat choice is not an object")
				}
				if dst, err = s.choice(dst, &c); err != nil {
					return dst, err
				}
				arr.Leave(&c)
			}
			it.Leave(&arr)
		case string(it.Key) == "obfuscation":
			obf = it.Value() // read for the frame only
		}
	}
	if !it.End() {
		return dst, malformed("chat chunk is not valid JSON")
	}
	if len(errVal) > 0 && !jsonscan.IsNull(errVal) {
		return dst, chatUpstreamError(errVal)
	}
	if dst, err = s.startOnce(dst, data, id, model); err != nil {
		return dst, err
	}
	if len(usage) > 0 && usage[0] == '{' {
		s.usage = chatStreamUsage(usage)
		s.fx.other = true
		if s.stop != "" {
			s.done, s.early = true, true
			return s.w.finish(dst, s.stop, "", s.usage)
		}
	}
	if started && s.fx.texts == 1 && !s.fx.other {
		s.frame.keep(data, s.fx.text, nil, obf)
		s.frameRefusal = s.fx.refusal
	}
	return dst, nil
}

// startOnce writes the message start at the first chunk.
func (s *chatToAnthropicStream) startOnce(dst, data, id, model []byte) ([]byte, error) {
	if s.w.isStarted() {
		return dst, nil
	}
	if e, ok := jsonscan.Lookup(data, "error"); ok && !jsonscan.IsNull(e) {
		return dst, chatUpstreamError(e)
	}
	if id == nil {
		id, _ = jsonscan.Lookup(data, "id")
	}
	if model == nil {
		model, _ = jsonscan.Lookup(data, "model")
	}
	return s.w.start(dst, rawString(id), rawString(model), Usage{})
}

// choice applies one element of choices.
func (s *chatToAnthropicStream) choice(dst []byte, c *jsonscan.Iter) ([]byte, error) {
	var finish []byte
	var err error
	for c.Next() {
		switch {
		case c.KeyIs("index"):
			if n, ok := jsonscan.Int(c.Value()); !ok || n != 0 {
				return dst, malformed("chat choice index other than 0")
			}
		case c.KeyIs("delta"):
			d, ok := c.Enter()
			if !ok {
				if v := c.Value(); v == nil || !jsonscan.IsNull(v) {
					return dst, malformed("chat delta is not an object")
				}
				continue
			}
			if !d.IsObject() {
				return dst, malformed("chat delta is not an object")
			}
			if dst, err = s.delta(dst, &d); err != nil {
				return dst, err
			}
			c.Leave(&d)
		case c.KeyIs("finish_reason"):
			finish = c.Value()
		}
	}
	if len(finish) > 0 && !jsonscan.IsNull(finish) {
		s.fx.other = true
		reason, ok := chatStop[rawString(finish)]
		if !ok {
			return dst, malformed("chat finish_reason %s has no mapping", finish)
		}
		if reason == StopEnd && s.refused {
			reason = StopRefusal // as the non-stream answer's refusal says
		}
		if reason == StopEnd && len(s.toolsSeen) > 0 {
			reason = StopTool // "stop" with calls (OpenAI-compatible servers), as Gemini's STOP
		}
		s.stop = reason
		s.tool = -1
		return s.closeAtStop(dst)
	}
	return dst, nil
}

// closeAtStop closes the open block at finish_reason; arguments cut by
// the token limit are named as such.
func (s *chatToAnthropicStream) closeAtStop(dst []byte) ([]byte, error) {
	dst, err := s.w.closeBlock(dst)
	if err != nil && s.stop == StopMax {
		err = fmt.Errorf("%w (the answer reached max_tokens inside tool arguments)", err)
	}
	return dst, err
}

func (s *chatToAnthropicStream) delta(dst []byte, it *jsonscan.Iter) ([]byte, error) {
	var err error
	for it.Next() {
		switch {
		case it.KeyIs("content"), it.KeyIs("refusal"):
			refusal := it.KeyIs("refusal")
			v := it.Value()
			s.fx.texts++
			s.fx.text, s.fx.refusal = v, refusal
			if dst, err = s.content(dst, v, refusal); err != nil {
				return dst, err
			}
		case it.KeyIs("tool_calls"):
			calls, ok := it.Enter()
			if !ok {
				continue
			}
			for calls.Next() {
				call, ok := calls.Enter()
				if !ok {
					return dst, malformed("chat tool call is not an object")
				}
				if dst, err = s.toolCall(dst, &call); err != nil {
					return dst, err
				}
				calls.Leave(&call)
			}
			it.Leave(&calls)
		}
	}
	return dst, nil
}

// content applies a delta's content (or refusal) value.
func (s *chatToAnthropicStream) content(dst, v []byte, refusal bool) ([]byte, error) {
	if !jsonscan.IsString(v) || len(v) <= 2 {
		return dst, nil
	}
	s.refused = s.refused || refusal
	if s.stop != "" {
		return dst, malformed("chat text after finish_reason")
	}
	s.tool = -1
	return s.w.text(dst, v[1:len(v)-1])
}

// toolCall applies one tool-call delta: the first of an index names the
// function (and usually its id), the rest carry argument fragments. The
// calls of one answer arrive one after another.
func (s *chatToAnthropicStream) toolCall(dst []byte, call *jsonscan.Iter) ([]byte, error) {
	s.fx.other = true
	index := int64(-1)
	var id, name, args []byte
	for call.Next() {
		switch {
		case call.KeyIs("index"):
			index, _ = jsonscan.Int(call.Value())
		case call.KeyIs("id"):
			id = call.Value()
		case call.KeyIs("function"):
			f, ok := call.Enter()
			if !ok {
				continue
			}
			for f.Next() {
				switch {
				case f.KeyIs("name"):
					name = f.Value()
				case f.KeyIs("arguments"):
					args = f.Value()
				}
			}
			call.Leave(&f)
		}
	}
	if index < 0 {
		return dst, malformed("chat tool call without an index")
	}
	if s.stop != "" {
		return dst, malformed("chat tool call after finish_reason")
	}
	var err error
	if index != s.tool {
		for _, seen := range s.toolsSeen {
			if seen == index {
				return dst, malformed("chat tool call %d resumed after another began", index)
			}
		}
		s.toolsSeen = append(s.toolsSeen, index)
		s.tool = index
		if dst, err = s.w.toolStart(dst, rawString(id), rawString(name), len(s.toolsSeen)-1); err != nil {
			return dst, err
		}
	}
	if jsonscan.IsString(args) {
		return s.w.toolArgs(dst, args[1:len(args)-1])
	}
	return dst, nil
}

// End finishes a stream that sent its finish_reason but no [DONE] as
// complete, as the proxy does a native Chat stream (docs/stream-safety.md,
// Terminal handling): OpenAI-compatible servers that omit [DONE] would
// otherwise fail every translated answer. Without a finish_reason the
// stream was cut.
func (s *chatToAnthropicStream) End(dst []byte) ([]byte, error) {
	switch {
	case s.done:
		return dst, nil
	case s.stop != "" && !s.failed:
		s.done = true
		return s.w.finish(dst, s.stop, "", s.usage)
	}
	return dst, malformed("chat stream ended before its finish_reason")
}

// Finished: the finish_reason arrived; the usage chunk and [DONE] may
// still come.
func (s *chatToAnthropicStream) Finished() bool { return s.stop != "" && !s.done && !s.failed }

func (s *chatToAnthropicStream) Fail(dst []byte, err error) []byte {
	s.failed = true
	return s.w.fail(dst, err)
}

// chatStreamUsage reads a usage object without allocating.
func chatStreamUsage(v []byte) Usage {
	var u Usage
	var prompt, cached int64
	it, _ := jsonscan.Open(v, 0, 0)
	for it.Next() {
		switch {
		case it.KeyIs("prompt_tokens"):
			prompt, _ = jsonscan.Int(it.Value())
		case it.KeyIs("completion_tokens"):
			u.Output, _ = jsonscan.Int(it.Value())
		case it.KeyIs("prompt_tokens_details"):
			cached = nestedInt(it.Value(), "cached_tokens")
		case it.KeyIs("completion_tokens_details"):
			u.Reasoning = nestedInt(it.Value(), "reasoning_tokens")
		}
	}
	u.Input, u.CacheRead = prompt-cached, cached
	return u
}

func nestedInt(v []byte, key string) int64 {
	raw, ok := jsonscan.Lookup(v, key)
	if !ok {
		return 0
	}
	n, _ := jsonscan.Int(raw)
	return n
}

// rawString decodes a raw JSON string value; "" for anything else.
func rawString(v []byte) string {
	if !jsonscan.IsString(v) {
		return ""
	}
	if s := v[1 : len(v)-1]; bytes.IndexByte(s, '\\') < 0 {
		return string(s) // nothing to decode: one copy, not two
	}
	return jsonscan.Unquote(v)
}

func chatUpstreamError(errVal []byte) error {
	body := append([]byte(`{"error":`), errVal...)
	body = append(body, '}')
	_, typ, code := openAIErrorFields(body)
	status := 500
	switch {
	case code == "context_length_exceeded":
		status = 400
	case code == "rate_limit_exceeded" || typ == "requests" || typ == "tokens":
		status = 429
	case typ == "invalid_request_error":
		status = 400
	}
	_, out := openAIErrorToAnthropic(status, body)
	t, m := anthropicErrorFields(out)
	return &UpstreamError{Status: status, Type: t, Message: m}
}
