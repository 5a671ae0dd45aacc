package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
)

// resumer is one dialect's side of a mid-stream continuation (resume.go):
// it follows what the client of a committed stream received, builds the
// continuation's request, reads the continuation's events, and writes the
// client's next events in the committed stream's own ids and indexes. A
// dialect that cannot continue a stream returns nil from newResumer.
type Resumer interface {
	// track notes one event the client received; info is its inspect
	// with the text.
	Track(ev sse.Event, info EventInfo)
	// ineligible says why the stream cannot be continued ("" when it
	// can): output that is not text (a tool call, thinking, reasoning, a
	// refusal), several choices, or more text than is kept.
	Ineligible() string
	// text is the output text the client has.
	Text() string
	// finished reports that the client already has the whole answer
	// but its terminal event: writeEnd alone completes it.
	Finished() bool
	// prefill is the request body with an assistant turn holding text
	// last (or the client's own last assistant turn extended by it).
	Prefill(body []byte, text string) ([]byte, error)
	// read interprets one event of a continuation.
	Read(ev sse.Event, info EventInfo) ContEvent
	// writeText writes the client's next text delta.
	WriteText(w io.Writer, text string) error
	// writeEnd closes the client's stream: the open block or item, the
	// finish with the usage, the terminal event.
	WriteEnd(w io.Writer, end ContEnd) error
}

// TokenCounter is the capability of a resumer that knows how many tokens
// the client's text took: a Chat Completions stream carries one token per
// content chunk.
type TokenCounter interface{ Tokens() int64 }

// contKind is what one continuation event means for the splice.
type ContKind uint8

const (
	ContSkip     ContKind = iota // framing of the continuation's own message or block: dropped
	ContText                     // a text delta
	ContOther                    // output that is not text: the continuation cannot be spliced
	ContFinish                   // the answer is finished (more framing, usage or the terminal may follow)
	ContTerminal                 // the stream's terminal event
	ContError                    // an error event
)

// contEvent is one continuation event as the splice sees it.
type ContEvent struct {
	Kind   ContKind
	Text   string
	Finish string // the dialect's stop reason, with contFinish or contTerminal (or contText with ends)
	// ends, with contText, says the event also finishes the answer (a
	// chunk with the last text and its finish reason, as Gemini and some
	// OpenAI-compatible servers send): the text, then contFinish.
	Ends bool
}

// contEnd is how a spliced stream ends: the continuation's finish and the
// usage the client is told.
type ContEnd struct {
	Finish        string
	Input, Output int64
}

// maxResumeText bounds the text a stream keeps for a continuation: past
// it the stream is no longer eligible (its prefill would be huge).
const MaxResumeText = 4 << 20

// errResumeTextBound is a resumer's writeText past maxResumeText when its
// end needs the whole text (Responses): the splice cannot complete.
var ErrResumeTextBound = errors.New("more text than a continuation keeps")

// reasonTextBound ends a splice whose text passed maxResumeText.
const ReasonTextBound = "resume_text_bound"

// textLog accumulates the text the client has; the part every dialect's
// resumer shares.
type TextLog struct {
	Buf []byte
	Bad string
}

// initialTranscript is the first capacity of a transcript: a short answer
// fits, a long one doubles from there rather than from a few bytes (an
// idle stream holds it: it stays small).
const initialTranscript = 256

// appendJSON appends the decoded JSON string raw.
func (t *TextLog) AppendJSON(raw []byte) {
	if t.Bad != "" {
		return
	}
	if t.Buf == nil {
		t.Buf = make([]byte, 0, initialTranscript)
	}
	t.Buf = jsonscan.AppendString(t.Buf, raw)
	t.checkSize()
}

func (t *TextLog) AppendText(s string) {
	if t.Bad != "" {
		return
	}
	t.Buf = append(t.Buf, s...)
	t.checkSize()
}

func (t *TextLog) checkSize() {
	if len(t.Buf) > MaxResumeText {
		t.Fail("more text than a continuation keeps")
	}
}

// fail makes the stream ineligible; the first reason stays.
func (t *TextLog) Fail(why string) {
	if t.Bad == "" {
		t.Bad = why
		t.Buf = nil
	}
}

func (t *TextLog) Ineligible() string { return t.Bad }

func (t *TextLog) Text() string { return string(t.Buf) }

// jsonText encodes s as a JSON string.
func JSONText(s string) []byte {
	b, _ := json.Marshal(s) // a string always encodes
	return b
}

// errNoTurns is a body a prefill cannot extend: no conversation array.
var ErrNoTurns = errors.New("the request has no conversation to extend")

// appendTurn returns body with its conversation array (member key) ending
// in an assistant turn holding text: merge extends the client's own last
// assistant turn and reports whether it did; turn renders a new one.
func AppendTurn(body []byte, key string, merge func(last json.RawMessage, text string) (json.RawMessage, bool), turn func(text string) any, text string) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, err
	}
	var turns []json.RawMessage
	if raw, ok := top[key]; !ok || json.Unmarshal(raw, &turns) != nil || len(turns) == 0 {
		return nil, ErrNoTurns
	}
	if merged, ok := merge(turns[len(turns)-1], text); ok {
		turns[len(turns)-1] = merged
	} else {
		t, err := json.Marshal(turn(text))
		if err != nil {
			return nil, err
		}
		turns = append(turns, t)
	}
	raw, err := json.Marshal(turns)
	if err != nil {
		return nil, err
	}
	top[key] = raw
	return json.Marshal(top)
}

// splicer holds back the start of a continuation until it reproduced what
// it must: for replay-match the whole text the client has (strict: a
// difference is a divergence), for prefill the whitespace the prefill
// left out (lenient: a difference just ends the hold).
type Splicer struct {
	hold    string
	matched int
	lenient bool
	// restart, for a prefill, is the start of the delivered text: a
	// continuation that begins with it answered from the start (its target
	// does not continue an assistant turn), and splicing it would repeat
	// the client's text. What may still be that start is held (probed).
	restart   string
	probed    int
	Restarted bool
}

// restartProbe bounds the start of the delivered text that, repeated at
// the start of a prefill continuation, shows a target answering anew: the
// whole text when it is shorter. A restart that changes a word within it
// is not seen (and a genuine continuation that begins with the answer's
// first restartProbe bytes is taken for a restart).
const restartProbe = 32

// replaySplicer holds a replay-match continuation until it reproduced the
// delivered text.
func ReplaySplicer(text string) Splicer { return Splicer{hold: text} }

// prefillSplicer holds a prefill continuation until it is known to go on
// from the delivered text rather than start the answer again, and drops
// the whitespace the prefill left out when the continuation repeats it.
func PrefillSplicer(text string) Splicer {
	pre, ws := TrimPrefill(text)
	n := min(len(pre), restartProbe)
	for n < len(pre) && !utf8.RuneStart(pre[n]) {
		n--
	}
	return Splicer{hold: ws, lenient: true, restart: pre[:n]}
}

// feed takes the continuation's next text and returns the part the client
// does not have yet, or diverged when it contradicts (or, for a prefill,
// repeats) the client's text.
func (s *Splicer) Feed(t string) (out string, diverged bool) {
	if s.restart != "" {
		rest := s.restart[s.probed:]
		n := commonPrefix(rest, t)
		switch {
		case n == len(rest):
			s.Restarted = true // the answer again, from its start
			return "", true
		case n == len(t):
			s.probed += n // it may still be: held
			return "", false
		}
		t = s.restart[:s.probed] + t // it says something else: all of it is new
		s.restart, s.probed = "", 0
	}
	if s.matched >= len(s.hold) {
		return t, false
	}
	rest := s.hold[s.matched:]
	n := commonPrefix(rest, t)
	if n == len(t) { // all of it is text the client has
		s.matched += n
		return "", false
	}
	if n == len(rest) { // it reproduced the rest, and goes on
		s.matched = len(s.hold)
		return t[n:], false
	}
	if !s.lenient {
		return "", true
	}
	s.matched = len(s.hold) // the prefill's whitespace did not come back: go on
	return t[n:], false
}

// done reports whether the hold is over: whatever comes now is new. A
// prefill continuation that ended on a held start of the delivered text
// is not done: it may have been a restart.
func (s *Splicer) Done() bool { return s.probed == 0 && s.matched >= len(s.hold) }

// commonPrefix is the length of the longest common prefix of a and b that
// does not split a UTF-8 character.
func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	for n > 0 && n < len(a) && !utf8.RuneStart(a[n]) {
		n--
	}
	return n
}

// trimPrefill splits the text for a prefill: the text without its trailing
// whitespace (Anthropic refuses an assistant turn that ends in it) and the
// whitespace.
func TrimPrefill(text string) (prefill, ws string) {
	p := strings.TrimRightFunc(text, func(r rune) bool { return r == ' ' || r == '\n' || r == '\t' || r == '\r' })
	return p, text[len(p):]
}

// isPrefillRejection reports whether an error body says the target does
// not accept an assistant turn last, or not one like this.
func IsPrefillRejection(body []byte) bool {
	b := bytes.ToLower(body)
	return bytes.Contains(b, []byte("prefill")) ||
		bytes.Contains(b, []byte("final assistant content")) ||
		bytes.Contains(b, []byte("must end with a user message"))
}

// parseSeq reads a sequence_number: a non-negative integer, without
// allocating (track runs on every delta).
func ParseSeq(n []byte) (int64, bool) {
	if len(n) == 0 || len(n) > 18 {
		return 0, false
	}
	var v int64
	for _, c := range n {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	return v, true
}

// mergeAssistantTurn extends the client's own last assistant turn (a
// client prefill) with the text: its string content, or its content
// blocks (parts) by a text one. Anthropic and Chat Completions share it.
func MergeAssistantTurn(last json.RawMessage, text string) (json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(last, &m) != nil || string(m["role"]) != `"assistant"` {
		return nil, false
	}
	var s string
	if json.Unmarshal(m["content"], &s) == nil {
		m["content"] = JSONText(s + text)
	} else {
		var blocks []json.RawMessage
		if json.Unmarshal(m["content"], &blocks) != nil {
			return nil, false
		}
		b, _ := json.Marshal(map[string]string{"type": "text", "text": text})
		m["content"], _ = json.Marshal(append(blocks, b))
	}
	out, err := json.Marshal(m)
	return out, err == nil
}
