package translate

import "github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"

// The bulk of a target's stream is text deltas that repeat their event
// byte for byte around the text, but for a number and a string that change
// from event to event and that no decoder reads: Responses' top-level
// sequence_number and OpenAI's top-level obfuscation. A decoder walks an
// event; when the walk read it as one text delta and nothing else, it
// keeps the event as a textFrame, with holes where the text and those
// values stand. A later event that is the frame around another valid
// string (and another unsigned integer or string in each other hole) is,
// byte for byte outside the holes, the same valid object: the walk would
// read the same members, skip the same values, reach the same text and
// make the same checks, so the decoder applies the new text as the walk
// would, without the walk. Anything else (another frame, a value of
// another kind, a number with a sign, fraction or exponent) is walked.

// walkEffects is what a decoder's walk of one event did: its text
// deltas (the last one's value, a refusal's or not), and whether it did
// anything else (a tool call, a finish, usage). Only a walk of one text
// delta and nothing else is kept as a frame.
type walkEffects struct {
	texts   int
	text    []byte
	refusal bool
	other   bool
}

// frameMisses is how many frames a stream keeps, one after another,
// without meeting any of them again before it stops keeping them: the
// copies would cost a stream whose events never repeat more than they save.
const frameMisses = 3

// textFrame is a walked event's data but its holes' values: raw, where
// each hole stands at its offset (in the order they stand). It is kept in
// buf when it fits, so a stream's frames allocate nothing.
type textFrame struct {
	raw    []byte
	holes  [3]frameHole
	n      int // holes in use; 0: no frame
	text   int // holes[text] is the text
	misses int // frames kept since one was last met
	buf    [320]byte
}

// frameHole is where a value (a string, or an unsigned integer) stands in
// the frame's raw.
type frameHole struct {
	at  int
	str bool
}

// match returns the text of data when data is the frame around it.
func (f *textFrame) match(data []byte) (text []byte, ok bool) {
	if f.n == 0 {
		return nil, false
	}
	i, p := 0, 0
	for k, h := range f.holes[:f.n] {
		lit := f.raw[p:h.at]
		if len(data)-i < len(lit) || string(data[i:i+len(lit)]) != string(lit) {
			return nil, false
		}
		i += len(lit)
		var e int
		if h.str {
			e = jsonscan.StringEnd(data, i)
		} else {
			e = uintEnd(data, i)
		}
		if e < 0 {
			return nil, false
		}
		if k == f.text {
			text = data[i:e]
		}
		i, p = e, h.at
	}
	if string(data[i:]) != string(f.raw[p:]) {
		return nil, false
	}
	f.misses = 0
	return text, true
}

// keep remembers data, which the walk read as the text delta text (a
// string in data) and nothing else, as the frame; seq and obf (each nil
// or a value in data) are top-level members' values the walk skipped that
// change from event to event: holes when seq is an unsigned integer and
// obf a string.
func (f *textFrame) keep(data, text, seq, obf []byte) {
	if f.misses >= frameMisses {
		return // this stream's events do not repeat
	}
	if f.misses++; f.misses == frameMisses {
		f.n = 0
		return
	}
	f.n = 0
	at := jsonscan.OffsetOf(data, text)
	if at < 0 || !jsonscan.IsString(text) {
		return
	}
	type span struct {
		at, end int
		str     bool
	}
	holes := [3]span{{at, at + len(text), true}}
	n := 1
	add := func(v []byte, str bool) {
		at := jsonscan.OffsetOf(data, v)
		if at < 0 || str && !jsonscan.IsString(v) || !str && uintEnd(v, 0) != len(v) {
			return
		}
		k := n
		for ; k > 0 && holes[k-1].at > at; k-- {
			holes[k] = holes[k-1]
		}
		holes[k] = span{at, at + len(v), str}
		n++
	}
	add(seq, false)
	add(obf, true)
	if f.raw == nil {
		f.raw = f.buf[:0]
	}
	raw, p := f.raw[:0], 0
	for k, h := range holes[:n] {
		raw = append(raw, data[p:h.at]...)
		f.holes[k] = frameHole{len(raw), h.str}
		if h.at == at {
			f.text = k
		}
		p = h.end
	}
	f.raw, f.n = append(raw, data[p:]...), n
}

// uintEnd returns the index past the unsigned integer (no leading zero,
// sign, fraction or exponent) at b[i], or -1.
func uintEnd(b []byte, i int) int {
	j := i
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		j++
	}
	if j == i || b[i] == '0' && j > i+1 {
		return -1
	}
	return j
}
