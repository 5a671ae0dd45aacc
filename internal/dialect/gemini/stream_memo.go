package gemini

// What a Gemini stream's chunks repeat, read once (wire.Memo): the
// usageMetadata object and the frame around a plain candidate's text.

import (
	"bytes"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// memo is what the stream's chunks repeat; nil without a stream.
func (s *Stream) memo() *wire.Memo {
	if s == nil {
		return nil
	}
	return s.candidates.Memo
}

// ownMemo is the stream's memo, made on first use.
func (s *Stream) ownMemo() *wire.Memo {
	if s.candidates.Memo == nil {
		s.candidates.Memo = new(wire.Memo)
	}
	return s.candidates.Memo
}

// remember keeps the usageMetadata object of a valid chunk for the next.
func (s *Stream) remember(usage []byte, c wire.UsageCounts) { s.ownMemo().Remember(usage, c) }

// rememberFrame keeps what stood around the text of plain candidates.
func (s *Stream) rememberFrame(before, after []byte) { s.ownMemo().RememberFrame(before, after) }

// framedText reads the candidates value at data[i] when it is the last
// plain candidates' frame around another text (a non-empty string, as
// plainCandidates takes it): that is what plainCandidates would read.
func (s *Stream) framedText(data []byte, i int) (text []byte, end int, ok bool) {
	m := s.memo()
	if m == nil || m.FrameSplit == 0 {
		return nil, 0, false
	}
	before, after := m.Frame[:m.FrameSplit], m.Frame[m.FrameSplit:]
	if !bytes.HasPrefix(data[i:], before) {
		return nil, 0, false
	}
	t := i + len(before)
	e := jsonscan.StringEnd(data, t)
	if e < 0 || e-t <= 2 || !bytes.HasPrefix(data[e:], after) {
		return nil, 0, false
	}
	return data[t:e], e + len(after), true
}
