package gemini

// What a Gemini stream's chunks repeat, read once (wire.Memo): the
// usageMetadata object and the frame around a plain candidate's text (or
// thought).

import (
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

// rememberFrame keeps what stood around the text of plain candidates,
// and whether that text was a thought (the frame holds the "thought"
// member that says so: a chunk in the frame is a thought too).
func (s *Stream) rememberFrame(before, after []byte, thought bool) {
	m := s.ownMemo()
	m.RememberFrame(before, after)
	m.FrameBy = thoughtBy(thought)
}

// framedText reads the candidates value at data[i] when it is the last
// plain candidates' frame around another text (a non-empty string, as
// plainCandidates takes it): that is what plainCandidates would read.
func (s *Stream) framedText(data []byte, i int) (text []byte, thought bool, end int, ok bool) {
	m := s.memo()
	if m == nil || m.FrameSplit == 0 {
		return nil, false, 0, false
	}
	text, end, ok = wire.Framed(data, i, m.Frame[:m.FrameSplit], m.Frame[m.FrameSplit:])
	return text, m.FrameBy != "", end, ok
}

// thoughtBy is what a frame's memo names its text by: "thought" for a
// thought's, "" for the answer's.
func thoughtBy(thought bool) string {
	if thought {
		return "thought"
	}
	return ""
}

// framedChunk reads data when it is the stream's last plain chunk (one
// candidate's text or thought and nothing else, with its usage and model
// after the text) around another text, a non-empty string as framedText
// takes it. That is the same valid object with the same members but the
// text: the walk would read the same usage, counts and model at the same
// places, and a thought again.
func (s *Stream) framedChunk(data []byte) (text, usage, model []byte, thought bool, counts wire.UsageCounts, ok bool) {
	m := s.memo()
	if m == nil || m.ChunkSplit == 0 {
		return nil, nil, nil, false, counts, false
	}
	text, end, ok := wire.Framed(data, 0, m.Chunk[:m.ChunkSplit], m.Chunk[m.ChunkSplit:])
	if !ok || end != len(data) {
		return nil, nil, nil, false, counts, false
	}
	e := end - (len(m.Chunk) - m.ChunkSplit)
	m.ChunkMisses = 0
	if m.ChunkUsage[1] > 0 {
		usage = data[e+m.ChunkUsage[0] : e+m.ChunkUsage[1]]
	}
	if m.ChunkModel[1] > 0 {
		model = data[e+m.ChunkModel[0] : e+m.ChunkModel[1]]
	}
	return text, usage, model, m.ChunkBy != "", m.ChunkCounts, true
}

// rememberChunk keeps a plain chunk the walk read: data around its text
// at [t, e), where its usage and model stand after the text (a chunk with
// either before it is not kept), the counts read from the usage, and
// whether the text is a thought.
func (s *Stream) rememberChunk(data []byte, t, e int, usage, model []byte, thought bool, counts wire.UsageCounts) {
	u, md := jsonscan.OffsetOf(data, usage), jsonscan.OffsetOf(data, model)
	if usage != nil && u < e || model != nil && md < e {
		return
	}
	m := s.ownMemo()
	if !wire.KeepFrame(&m.ChunkMisses, &m.ChunkSplit) {
		return // this stream's chunks do not repeat
	}
	m.Chunk = append(append(m.Chunk[:0], data[:t]...), data[e:]...)
	m.ChunkSplit, m.ChunkCounts, m.ChunkBy = t, counts, thoughtBy(thought)
	m.ChunkUsage, m.ChunkModel = [2]int{}, [2]int{}
	if usage != nil {
		m.ChunkUsage = [2]int{u - e, u - e + len(usage)}
	}
	if model != nil {
		m.ChunkModel = [2]int{md - e, md - e + len(model)}
	}
}
