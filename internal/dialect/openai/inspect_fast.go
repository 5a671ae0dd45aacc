package openai

import (
	"bytes"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// The bulk of a Chat Completions stream is content deltas that repeat
// their chunk byte for byte around the text: id, object, created, model,
// system_fingerprint, the one choice's index, logprobs and finish_reason,
// and "usage":null with include_usage. OpenAI also ends each chunk with an
// "obfuscation" string that changes every time. The first such chunk of a
// stream is walked; what stands before and after its text is kept in the
// stream's memo (wire.Memo.Frame, read with the text, as the relay and the
// gate read). A chunk that is that frame around another non-empty string
// (and, where the walked one ended in an obfuscation member, another
// string there) is the same valid object with the same members but the
// text, so it reads as the walk reads it, without the walk.

var (
	obfuscationMember = []byte(`,"obfuscation":`)
	jsonNull          = []byte("null")
)

// inspectFramed reads data when it is the memo's frame around a non-empty
// string; ok is false for anything else (the walk then reads it). Without
// withText it reads as the walk does then: no text, not plain.
func inspectFramed(data []byte, withText bool, cs *wire.ChoiceSet) (info wire.EventInfo, ok bool) {
	if cs == nil || cs.Memo == nil || cs.Memo.FrameSplit == 0 {
		return info, false
	}
	m := cs.Memo
	text, end, ok := wire.Framed(data, 0, m.Frame[:m.FrameSplit], m.Frame[m.FrameSplit:])
	if !ok { // another frame, or "" (no output: the walk says so)
		return info, false
	}
	rest := data[end:]
	if m.FrameOdd {
		if !bytes.HasPrefix(rest, obfuscationMember) {
			return info, false
		}
		j := jsonscan.StringEnd(rest, len(obfuscationMember))
		if j < 0 || j >= len(rest) || rest[j] != '}' {
			return info, false
		}
		rest = rest[j+1:]
	}
	if jsonscan.SkipSpace(rest, 0) != len(rest) {
		return info, false
	}
	m.FrameMisses = 0
	cs.Note(0, false)
	info.Class, info.By, info.UsageRead = wire.EvOutput, "content", true
	switch {
	case m.FrameBy != "": // another member's hole: no text, not plain, as the walk reads it
		info.By = m.FrameBy
	case withText:
		info.Text, info.Plain = text, true
	}
	if m.FrameNull {
		info.Usage = jsonNull
	}
	return info, true
}

// rememberFrame keeps the frame of a chunk the walk read (with the text)
// as one choice's content delta and nothing else: choice 0, unfinished,
// no error, no usage but null. single says the chunk is one such choice
// whatever its delta holds: then a chunk whose output is a tool call's
// arguments, or a reasoning or refusal string, with no content string,
// leaves its frame too, around that string (holeIn: byVal is the value of
// the member info.By names).
func rememberFrame(data []byte, info *wire.EventInfo, cs *wire.ChoiceSet, single bool, byVal []byte) {
	if info.Class != wire.EvOutput || info.ErrVal != nil || !info.UsageRead ||
		info.Usage != nil && !jsonscan.IsNull(info.Usage) || cs == nil {
		return
	}
	t, e, by := -1, -1, ""
	switch {
	case info.By == "content" && info.Plain && len(info.Text) > 2:
		if t = jsonscan.OffsetOf(data, info.Text); t >= 0 {
			e = t + len(info.Text)
		}
	case single && info.Text == nil:
		h, k := holeIn(info.By, byVal)
		at := jsonscan.OffsetOf(data, byVal)
		if h < 0 || at < 0 {
			return // a call's first chunk (its id and name), or another output
		}
		t, e, by = at+h, at+k, info.By
	default:
		return
	}
	if cs.Memo == nil {
		cs.Memo = new(wire.Memo)
	}
	m := cs.Memo
	if !wire.KeepFrame(&m.FrameMisses, &m.FrameSplit) {
		return // this stream's chunks do not repeat
	}
	if t < 0 {
		m.FrameSplit = 0
		return
	}
	m.FrameBy = by
	before, after := data[:t], data[e:]
	odd := false
	if k := bytes.LastIndex(after, obfuscationMember); k >= 0 {
		j := jsonscan.StringEnd(after, k+len(obfuscationMember))
		if j > 0 && j < len(after) && after[j] == '}' && jsonscan.SkipSpace(after, j+1) == len(after) {
			after, odd = after[:k], true
		}
	}
	m.RememberFrame(before, after)
	m.FrameOdd, m.FrameNull = odd, info.Usage != nil
}

var (
	toolHead = []byte(`[{"index":`)
	toolMid  = []byte(`,"function":{"arguments":`)
	toolEnd  = []byte(`}}]`)
)

// holeIn returns where, in v (the value of the delta member by), stands
// the string a run of such chunks repeats their frame around: a reasoning
// or refusal string itself, or the arguments of one tool call,
// [{"index":n,"function":{"arguments":"..."}}] (a call's later chunks);
// -1, -1 for any other member or shape, or an empty string. Whatever that
// string holds, the walk reads the chunk alike.
func holeIn(by string, v []byte) (h, k int) {
	switch by {
	case "reasoning_content", "reasoning", "refusal":
		if jsonscan.IsString(v) && len(v) > 2 {
			return 0, len(v)
		}
	case "tool_calls":
		if !bytes.HasPrefix(v, toolHead) {
			break
		}
		i := len(toolHead)
		for i < len(v) && v[i] >= '0' && v[i] <= '9' {
			i++
		}
		if i == len(toolHead) || !bytes.HasPrefix(v[i:], toolMid) {
			break
		}
		h = i + len(toolMid)
		k = jsonscan.StringEnd(v, h)
		if k-h > 2 && string(v[k:]) == string(toolEnd) {
			return h, k
		}
	}
	return -1, -1
}
