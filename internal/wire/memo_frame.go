package wire

import (
	"bytes"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
)

// Framed reads the non-empty JSON string that stands in data at i
// between before and after, a frame a Memo keeps: its raw value and the
// index past after. The dialects' fast paths (Gemini's candidates and
// chunk frames, OpenAI's chunk frame) read a chunk this way.
func Framed(data []byte, i int, before, after []byte) (text []byte, end int, ok bool) {
	if !bytes.HasPrefix(data[i:], before) {
		return nil, 0, false
	}
	t := i + len(before)
	e := jsonscan.StringEnd(data, t)
	if e-t <= 2 || !bytes.HasPrefix(data[e:], after) { // e < 0, or "": the walk decides
		return nil, 0, false
	}
	return data[t:e], e + len(after), true
}

// KeepFrame counts one more frame kept since one was last met (misses)
// and says whether to keep it: not once the stream has kept MemoMisses
// of them, and then split (the frame's, 0 for none) is cleared, since
// the last one kept is not met again either.
func KeepFrame(misses, split *int) bool {
	if *misses >= MemoMisses {
		return false
	}
	*misses++
	if *misses == MemoMisses {
		*split = 0
		return false
	}
	return true
}
