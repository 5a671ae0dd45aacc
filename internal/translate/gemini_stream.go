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
	w      anthropicWriter
	finish string // the mapped finishReason, "" until it arrives
	usage  Usage
	calls  int
	ended  bool
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
	var cands, usage, errVal, id, model []byte
	it, ok := jsonscan.Open(data, 0, 0)
	if !ok || !it.IsObject() {
		return dst, malformed("gemini chunk is not a JSON object")
	}
	for it.Next() {
		switch {
		case it.KeyIs("candidates"):
			cands = it.Value()
		case it.KeyIs("usageMetadata"):
			usage = it.Value()
		case it.KeyIs("error"):
			errVal = it.Value()
		case it.KeyIs("responseId"):
			id = it.Value()
		case it.KeyIs("modelVersion"):
			model = it.Value()
		}
	}
	if !it.End() {
		return dst, malformed("gemini chunk is not valid JSON")
	}
	if len(errVal) > 0 && !jsonscan.IsNull(errVal) {
		return dst, geminiUpstreamError(errVal)
	}
	if len(usage) > 0 && usage[0] == '{' {
		s.usage = geminiStreamUsage(usage)
	}
	var err error
	if !s.w.started {
		if dst, err = s.w.start(dst, rawString(id), rawString(model), Usage{Input: s.usage.Input, CacheRead: s.usage.CacheRead}); err != nil {
			return dst, err
		}
	}
	if len(cands) == 0 {
		return dst, nil
	}
	arr, ok := jsonscan.Open(cands, 0, 0)
	if !ok || arr.IsObject() {
		return dst, malformed("gemini candidates is not an array")
	}
	n := 0
	for arr.Next() {
		if n++; n > 1 {
			return dst, malformed("gemini chunk with more than one candidate")
		}
		c, ok := arr.Enter()
		if !ok {
			return dst, malformed("gemini candidate is not an object")
		}
		if dst, err = s.candidate(dst, &c); err != nil {
			return dst, err
		}
		arr.Leave(&c)
	}
	return dst, nil
}

func (s *geminiToAnthropicStream) candidate(dst []byte, c *jsonscan.Iter) ([]byte, error) {
	var parts, finish []byte
	for c.Next() {
		switch {
		case c.KeyIs("content"):
			content := c.Value()
			parts, _ = jsonscan.Lookup(content, "parts")
		case c.KeyIs("finishReason"):
			finish = c.Value()
		case c.KeyIs("index"):
			if n, ok := jsonscan.Int(c.Value()); !ok || n != 0 {
				return dst, malformed("gemini candidate index other than 0")
			}
		}
	}
	var err error
	if len(parts) > 0 {
		it, ok := jsonscan.Open(parts, 0, 0)
		if !ok || it.IsObject() {
			return dst, malformed("gemini parts is not an array")
		}
		for it.Next() {
			if dst, err = s.part(dst, it.Value()); err != nil {
				return dst, err
			}
		}
	}
	if len(finish) > 0 && !jsonscan.IsNull(finish) {
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

func (s *geminiToAnthropicStream) part(dst []byte, p []byte) ([]byte, error) {
	var text, call []byte
	thought := false
	it, ok := jsonscan.Open(p, 0, 0)
	if !ok || !it.IsObject() {
		return dst, malformed("gemini part is not an object")
	}
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
		return s.w.text(dst, text[1:len(text)-1])
	}
	return dst, malformed("gemini part has no mapping")
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
