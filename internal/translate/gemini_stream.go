package translate

import (
	"bytes"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
)

// geminiToAnthropicStream reads streamGenerateContent?alt=sse chunks (each
// a GenerateContentResponse holding the next parts) and writes an
// Anthropic event stream. Gemini sends a function call whole in one part,
// and ends with a chunk whose candidate has a finishReason, then the end
// of the body: message_delta and message_stop are written at End.
type geminiToAnthropicStream struct {
	w      blockWriter // the client's writer (Anthropic's, or itemBlocks)
	finish string      // the mapped finishReason, "" until it arrives
	usage  Usage
	calls  int
	ended  bool
	// frame is the last chunk walked that was one text part and nothing
	// else (stream_frame.go), whose usageMetadata, an object when
	// frameUsed, read frameUsage; fx is what the walk of the chunk at
	// hand did.
	frame      textFrame
	frameUsed  bool
	frameUsage Usage
	fx         walkEffects
}

func (s *geminiToAnthropicStream) Event(dst []byte, ev sse.Event) ([]byte, error) {
	data := bytes.TrimSpace(ev.Data)
	if len(data) == 0 {
		return dst, nil
	}
	if s.ended {
		return dst, ErrAfterEnd
	}
	if s.finish != "" {
		return dst, malformed("gemini chunk after the finishReason")
	}
	if text, ok := s.frame.match(data); ok && s.w.isStarted() {
		dst, err := s.w.text(dst, text[1:len(text)-1])
		if err == nil && s.frameUsed {
			s.usage = s.frameUsage
		}
		return dst, err
	}
	var err error
	started := s.w.isStarted()
	s.fx = walkEffects{}
	if !started {
		if dst, err = s.start(dst, data); err != nil {
			return dst, err
		}
	}
	// One pass: candidates are applied as the scanner reaches them, so a
	// text part is read once.
	var usage, errVal, feedback []byte
	candidates := false
	it, ok := jsonscan.Open(data, 0, 0)
	if !ok || !it.IsObject() {
		return dst, malformed("gemini chunk is not a JSON object")
	}
	for it.Next() {
		switch {
		case it.KeyIs("candidates"):
			candidates = true
			arr, ok := it.Enter()
			if !ok || arr.IsObject() {
				return dst, malformed("gemini candidates is not an array")
			}
			for n := 0; arr.Next(); n++ {
				c, ok := arr.Enter()
				if n > 0 || !ok || !c.IsObject() {
					return dst, malformed("gemini chunk with a second candidate, or one that is not an object")
				}
				if dst, err = s.candidate(dst, &c); err != nil {
					return dst, err
				}
				arr.Leave(&c)
			}
			it.Leave(&arr)
		case it.KeyIs("usageMetadata"):
			usage = it.Value()
		case it.KeyIs("error"):
			errVal = it.Value()
		case it.KeyIs("promptFeedback"):
			feedback = it.Value()
		}
	}
	if !it.End() {
		return dst, malformed("gemini chunk is not valid JSON")
	}
	if len(errVal) > 0 && !jsonscan.IsNull(errVal) {
		return dst, geminiUpstreamError(errVal)
	}
	if reason, _ := jsonscan.Lookup(feedback, "blockReason"); !candidates && rawString(reason) != "" {
		// The prompt was blocked: the truth about it, a refusal, as the
		// non-stream answer says (and never a reason to fail over).
		s.finish = StopRefusal
	}
	used := len(usage) > 0 && usage[0] == '{'
	if used {
		s.usage = geminiStreamUsage(usage)
	}
	if started && s.fx.texts == 1 && !s.fx.other && s.finish == "" {
		s.frame.keep(data, s.fx.text, nil, nil)
		s.frameUsed, s.frameUsage = used, s.usage
	}
	return dst, nil
}

// start writes the message start from the first chunk, whose id, model
// and usage follow its candidates.
func (s *geminiToAnthropicStream) start(dst, data []byte) ([]byte, error) {
	if !jsonscan.Valid(data) {
		return dst, malformed("gemini chunk is not valid JSON")
	}
	if e, ok := jsonscan.Lookup(data, "error"); ok && !jsonscan.IsNull(e) {
		return dst, geminiUpstreamError(e)
	}
	id, _ := jsonscan.Lookup(data, "responseId")
	model, _ := jsonscan.Lookup(data, "modelVersion")
	if u, ok := jsonscan.Lookup(data, "usageMetadata"); ok && len(u) > 0 && u[0] == '{' {
		s.usage = geminiStreamUsage(u)
	}
	return s.w.start(dst, rawString(id), rawString(model), Usage{Input: s.usage.Input, CacheRead: s.usage.CacheRead})
}

func (s *geminiToAnthropicStream) candidate(dst []byte, c *jsonscan.Iter) ([]byte, error) {
	var finish []byte
	var err error
	for c.Next() {
		switch {
		case c.KeyIs("content"):
			content, ok := c.Enter()
			if !ok || !content.IsObject() {
				return dst, malformed("gemini content is not an object")
			}
			for content.Next() {
				if !content.KeyIs("parts") {
					continue
				}
				parts, ok := content.Enter()
				if !ok || parts.IsObject() {
					return dst, malformed("gemini parts is not an array")
				}
				for parts.Next() {
					p, ok := parts.Enter()
					if !ok || !p.IsObject() {
						return dst, malformed("gemini part is not an object")
					}
					if dst, err = s.part(dst, &p); err != nil {
						return dst, err
					}
					parts.Leave(&p)
				}
				content.Leave(&parts)
			}
			c.Leave(&content)
		case c.KeyIs("finishReason"):
			finish = c.Value()
		case c.KeyIs("index"):
			if n, ok := jsonscan.Int(c.Value()); !ok || n != 0 {
				return dst, malformed("gemini candidate index other than 0")
			}
		}
	}
	// The finish is applied after the parts, whichever comes first.
	if len(finish) > 0 && !jsonscan.IsNull(finish) {
		s.fx.other = true
		stop, ok := geminiFinish[rawString(finish)]
		if !ok {
			return dst, malformed("gemini finishReason %s has no mapping", finish)
		}
		if stop == StopEnd && s.calls > 0 {
			stop = StopTool
		}
		s.finish = stop
	}
	return dst, nil
}

func (s *geminiToAnthropicStream) part(dst []byte, it *jsonscan.Iter) ([]byte, error) {
	var text, call []byte
	thought := false
	for it.Next() {
		switch {
		case it.KeyIs("text"):
			text = it.Value()
		case it.KeyIs("functionCall"):
			call = it.Value()
		case it.KeyIs("thought"):
			thought = string(it.Value()) == "true"
		}
	}
	switch {
	case thought:
		return dst, nil // Gemini's thinking carries no Anthropic signature: not shown
	case len(call) > 0:
		s.fx.other = true
		name, _ := jsonscan.Lookup(call, "name")
		args, ok := jsonscan.Lookup(call, "args")
		if !ok || jsonscan.IsNull(args) {
			args = []byte("{}") // Gemini omits args of a call without parameters
		}
		dst, err := s.w.toolStart(dst, "", rawString(name), s.calls)
		if err != nil {
			return dst, err
		}
		s.calls++
		if dst, err = s.w.toolArgsJSON(dst, args); err != nil {
			return dst, err
		}
		return s.w.closeBlock(dst)
	case jsonscan.IsString(text):
		s.fx.texts++
		s.fx.text = text
		return s.w.text(dst, text[1:len(text)-1])
	}
	return dst, malformed("gemini part has no mapping")
}

// newGeminiToAnthropicStream allocates the decoder and its writer
// together.
func newGeminiToAnthropicStream() *geminiToAnthropicStream {
	p := new(struct {
		s geminiToAnthropicStream
		w anthropicWriter
	})
	p.s = geminiToAnthropicStream{w: &p.w}
	return &p.s
}

// newGeminiStream reads a Gemini stream for the client w writes.
func newGeminiStream(w blockWriter) *geminiToAnthropicStream {
	return &geminiToAnthropicStream{w: w}
}

func (s *geminiToAnthropicStream) End(dst []byte) ([]byte, error) {
	if s.ended {
		return dst, nil
	}
	if s.finish == "" {
		return dst, malformed("gemini stream ended without a finishReason")
	}
	s.ended = true
	return s.w.finish(dst, s.finish, "", s.usage)
}

// Finished: the finishReason arrived; the body's end should follow.
func (s *geminiToAnthropicStream) Finished() bool { return s.finish != "" && !s.ended }

func (s *geminiToAnthropicStream) Fail(dst []byte, err error) []byte {
	s.ended = true
	return s.w.fail(dst, err)
}

func geminiStreamUsage(v []byte) Usage {
	var u geminiUsage
	it, _ := jsonscan.Open(v, 0, 0)
	for it.Next() {
		var dst *int64
		switch {
		case it.KeyIs("promptTokenCount"):
			dst = &u.PromptTokenCount
		case it.KeyIs("candidatesTokenCount"):
			dst = &u.CandidatesTokenCount
		case it.KeyIs("cachedContentTokenCount"):
			dst = &u.CachedContentTokenCount
		case it.KeyIs("thoughtsTokenCount"):
			dst = &u.ThoughtsTokenCount
		default:
			continue
		}
		*dst, _ = jsonscan.Int(it.Value())
	}
	return u.usage()
}

func geminiUpstreamError(errVal []byte) error {
	body := append([]byte(`{"error":`), errVal...)
	body = append(body, '}')
	code, _ := jsonscan.Lookup(errVal, "code")
	status, _ := jsonscan.Int(code)
	if status == 0 {
		status = 500
	}
	st, out := geminiErrorToAnthropic(int(status), body)
	t, m := anthropicErrorFields(out)
	return &UpstreamError{Status: st, Type: t, Message: m}
}
