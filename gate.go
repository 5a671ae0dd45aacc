package llmhedge

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// eventClass is what one upstream event means for the attempt.
type eventClass uint8

const (
	evPrelude   eventClass = iota // buffered, not committed: message_start, content_block_start, ping, comments, role-only/empty OpenAI deltas, usage-only chunks, content_block_stop, message_delta
	evOutput                      // carries model output: Anthropic content_block_delta; OpenAI chunk whose choices[].delta has non-empty content, reasoning_content, reasoning, tool_calls, function_call or refusal
	evFinish                      // OpenAI chunk with a finish_reason set (not null, not ""): output for the gate (SPEC), and the answer is done
	evTerminal                    // Anthropic message_stop; OpenAI [DONE]
	evError                       // `event: error`, or data whose JSON has a non-null top-level "error" (or Anthropic "type":"error")
	evMalformed                   // data that is not a JSON object (other than OpenAI's [DONE])
)

func (c eventClass) String() string {
	switch c {
	case evPrelude:
		return "prelude"
	case evOutput:
		return "output"
	case evFinish:
		return "finish"
	case evTerminal:
		return "terminal"
	case evError:
		return "error"
	case evMalformed:
		return "malformed"
	}
	return "unknown"
}

// eventInfo is what inspectEvent learned from one event.
type eventInfo struct {
	class  eventClass
	by     string // the payload that made it output or finish, for the commit log
	text   []byte // raw JSON string of the output text (only when asked for)
	errVal []byte // raw value of the top-level "error" member, if any
}

// classifyEvent tells what an event means for the gate and the relay. It
// looks at the event name and walks the JSON once, without allocating.
func classifyEvent(d dialect, ev sseEvent) eventClass {
	return inspectEvent(d, ev, false).class
}

// inspectEvent classifies ev; withText also returns the output text of
// the event, which the gate checks for rejected phrases.
func inspectEvent(d dialect, ev sseEvent, withText bool) eventInfo {
	return inspectEventChoices(d, ev, withText, nil)
}

// inspectEventChoices is inspectEvent that also notes, in cs (when not
// nil), the OpenAI choices the event carries and which of them finished.
func inspectEventChoices(d dialect, ev sseEvent, withText bool, cs *choiceSet) eventInfo {
	if d == dialectOpenAI {
		return inspectOpenAI(ev, withText, cs)
	}
	return inspectAnthropic(ev, withText)
}

// choiceSet tracks the choices of an OpenAI stream (n > 1 streams several,
// interleaved, each with its own finish_reason): which indexes were seen
// and which of them finished. Indexes 0..255 are bits (OpenAI caps n at
// 128); any other index is never taken as finished, so such a stream ends
// cleanly only with [DONE].
type choiceSet struct {
	seen, finished [4]uint64
	other          bool // a choice with an index outside 0..255 (or not an integer)
}

// note records one choice of a chunk; index is -1 when it is not usable.
func (cs *choiceSet) note(index int64, finished bool) {
	if index < 0 || index >= 256 {
		cs.other = true
		return
	}
	w, bit := index>>6, uint64(1)<<(index&63)
	cs.seen[w] |= bit
	if finished {
		cs.finished[w] |= bit
	}
}

// allFinished reports whether a choice was seen and every choice seen has
// its finish_reason: only then is the answer complete without [DONE].
func (cs *choiceSet) allFinished() bool {
	if cs.other {
		return false
	}
	seen := false
	for i := range cs.seen {
		if cs.seen[i]&^cs.finished[i] != 0 {
			return false
		}
		seen = seen || cs.seen[i] != 0
	}
	return seen
}

// Anthropic events name themselves; the data is still validated, and a
// data "type" stands in for a missing event name.
func inspectAnthropic(ev sseEvent, withText bool) eventInfo {
	var info eventInfo
	named := string(ev.Name) == "error"
	data := ev.Data
	start := jsonWS(data, 0)
	if start == len(data) {
		// No payload (a comment, or a bare keepalive): the name decides.
		switch {
		case named:
			info.class = evError
		case string(ev.Name) == "message_stop":
			info.class = evTerminal
		}
		return info
	}
	var typ []byte
	it, ok := jsonOpen(data, start, 0)
	if ok && it.isObject() {
		for it.next() {
			switch {
			case it.keyIs("type"):
				typ = it.value()
			case it.keyIs("error"):
				info.errVal = it.value()
			case withText && it.keyIs("delta"):
				if d, ok := it.enter(); ok {
					for d.isObject() && d.next() {
						if d.keyIs("text") {
							if v := d.value(); jsonIsString(v) {
								info.text = v
							}
						}
					}
					it.leave(&d)
				}
			}
		}
	}
	switch {
	case named:
		info.class = evError
		return info
	case !ok || !it.isObject() || !it.end():
		info.class = evMalformed
		return info
	case info.errVal != nil && !jsonIsNull(info.errVal) || jsonStringIs(typ, "error"):
		info.class = evError
		return info
	}
	var isDelta, isStop bool
	if ev.Name != nil {
		isDelta = string(ev.Name) == "content_block_delta"
		isStop = string(ev.Name) == "message_stop"
	} else {
		isDelta = jsonStringIs(typ, "content_block_delta")
		isStop = jsonStringIs(typ, "message_stop")
	}
	switch {
	case isDelta:
		info.class, info.by = evOutput, "content_block_delta"
	case isStop:
		info.class = evTerminal
	}
	if info.class != evOutput {
		info.text = nil
	}
	return info
}

// OpenAI chunks carry no event name: the choices say what they hold.
func inspectOpenAI(ev sseEvent, withText bool, cs *choiceSet) eventInfo {
	var info eventInfo
	data := ev.Data
	start := jsonWS(data, 0)
	if string(ev.Name) == "error" {
		info.class = evError
		info.errVal, _ = jsonLookup(data, "error")
		return info
	}
	if start == len(data) {
		return info // no payload: a comment or keepalive
	}
	if data[start] == '[' && isDoneMarker(data[start:]) {
		info.class = evTerminal
		return info
	}
	it, ok := jsonOpen(data, start, 0)
	if !ok || !it.isObject() {
		info.class = evMalformed
		return info
	}
	finish := false
	for it.next() {
		switch {
		case it.keyIs("error"):
			info.errVal = it.value()
		case it.keyIs("choices"):
			choices, ok := it.enter()
			if !ok {
				continue
			}
			for !choices.isObject() && choices.next() {
				choice, ok := choices.enter()
				index, finished := int64(0), false // a choice without an index is choice 0
				for ok && choice.isObject() && choice.next() {
					switch {
					case choice.keyIs("finish_reason"):
						if jsonNonEmpty(choice.value()) {
							finish, finished = true, true
						}
					case choice.keyIs("index"):
						if n, isInt := jsonInt(choice.value()); isInt {
							index = n
						} else {
							index = -1
						}
					case choice.keyIs("delta"):
						if delta, ok := choice.enter(); ok {
							openAIDelta(&delta, &info, withText)
							choice.leave(&delta)
						}
					}
				}
				if ok {
					choices.leave(&choice)
					if cs != nil && choice.isObject() {
						cs.note(index, finished)
					}
				}
			}
			it.leave(&choices)
		}
	}
	switch {
	case !it.end():
		info.class = evMalformed
	case info.errVal != nil && !jsonIsNull(info.errVal):
		info.class = evError
	case finish:
		info.class = evFinish
		if info.by == "" {
			info.by = "finish_reason"
		}
	case info.by != "":
		info.class = evOutput
	}
	return info
}

// openAIDelta notes which member of a choice's delta carries output (the
// first one, for the commit log) and the raw content string.
func openAIDelta(delta *jsonIter, info *eventInfo, withText bool) {
	for delta.isObject() && delta.next() {
		var name string
		switch {
		case delta.keyIs("content"):
			name = "content"
		case delta.keyIs("reasoning_content"):
			name = "reasoning_content"
		case delta.keyIs("reasoning"):
			name = "reasoning"
		case delta.keyIs("tool_calls"):
			name = "tool_calls"
		case delta.keyIs("function_call"):
			name = "function_call"
		case delta.keyIs("refusal"):
			name = "refusal"
		default:
			continue
		}
		v := delta.value()
		if info.by == "" && jsonNonEmpty(v) {
			info.by = name
		}
		if withText && name == "content" && info.text == nil && jsonIsString(v) {
			info.text = v
		}
	}
}

func isDoneMarker(b []byte) bool {
	return len(b) >= 6 && string(b[:6]) == "[DONE]" && jsonWS(b, 6) == len(b)
}

// jsonStringIs reports whether the raw value v is the JSON string want.
func jsonStringIs(v []byte, want string) bool {
	return len(v) >= 2 && v[0] == '"' && jsonKeyIs(v[1:len(v)-1], want)
}

// gateDecision is the gate's verdict after an event.
type gateDecision uint8

const (
	gateHold   gateDecision = iota // keep buffering: nothing proves the attempt good yet
	gateCommit                     // the first output arrived: write the buffer, the provider is locked
	gateFail                       // a fake 200: drop the attempt, fail over
)

func (d gateDecision) String() string {
	switch d {
	case gateHold:
		return "hold"
	case gateCommit:
		return "commit"
	case gateFail:
		return "fail"
	}
	return "unknown"
}

// gate is the first-event gate of one streaming attempt (SPEC section 2,
// t2..t3): it buffers the events that precede the first model output,
// commits at that output, and fails the attempt on a fake 200. After its
// decision, feed changes nothing.
type gate struct {
	d         dialect
	phrases   [][]byte // as configured, for messages
	reject    [][]byte // phrases lower-cased
	rejectBuf []byte   // backing store of reject
	rejectEnd []int
	maxBuffer int
	maxEvents int

	buf     []byte // raw bytes of every event fed: the only copy
	events  int
	text    []byte // lower-cased output text seen, for the reject check
	scratch []byte

	decision gateDecision
	reason   string
	cause    error
	by       string
	choices  choiceSet // OpenAI choices seen in the buffered events
}

// newGate returns a gate for one attempt. reject holds phrases that, found
// (case-insensitively) in the output text up to the committing event, fail
// the attempt. maxBuffer and maxEvents bound what is held before commit;
// non-positive values mean 1 MiB and 1000.
func newGate(d dialect, reject [][]byte, maxBuffer int, maxEvents int) *gate {
	g := &gate{}
	g.Reset(d, reject, maxBuffer, maxEvents)
	return g
}

// Reset prepares g for a new attempt, keeping its buffers (for pooling).
func (g *gate) Reset(d dialect, reject [][]byte, maxBuffer int, maxEvents int) {
	if maxBuffer <= 0 {
		maxBuffer = defaultGateBuffer
	}
	if maxEvents <= 0 {
		maxEvents = defaultGateEvents
	}
	g.d, g.maxBuffer, g.maxEvents = d, maxBuffer, maxEvents
	// Lower-case the phrases into one reused buffer, then slice it: the
	// buffer may move while it grows.
	g.phrases = reject
	g.rejectBuf, g.rejectEnd = g.rejectBuf[:0], g.rejectEnd[:0]
	for _, p := range reject {
		g.rejectBuf = appendLowerText(g.rejectBuf, p)
		g.rejectEnd = append(g.rejectEnd, len(g.rejectBuf))
	}
	g.reject = g.reject[:0]
	from := 0
	for _, end := range g.rejectEnd {
		g.reject = append(g.reject, g.rejectBuf[from:end:end])
		from = end
	}
	g.buf, g.events = g.buf[:0], 0
	g.text, g.scratch = g.text[:0], g.scratch[:0]
	g.decision, g.reason, g.cause, g.by = gateHold, "", nil, ""
	g.choices = choiceSet{}
}

// feed takes the next event of the attempt and returns the decision.
func (g *gate) feed(ev sseEvent) gateDecision {
	if g.decision != gateHold {
		return g.decision
	}
	g.buf = append(g.buf, ev.Raw...)
	g.events++
	info := inspectEventChoices(g.d, ev, len(g.reject) > 0, &g.choices)
	switch info.class {
	case evError:
		return g.fail("error_event", fmt.Errorf("upstream sent an error event: %s", upstreamErrorMessage(info.errVal, ev.Data)))
	case evMalformed:
		return g.fail("malformed_first_event", fmt.Errorf("upstream event data is not a JSON object: %q", clipData(ev.Data, 200)))
	case evTerminal:
		return g.fail("terminal_before_content", fmt.Errorf("upstream ended the stream (%s) before any output", terminalName(g.d, ev)))
	case evOutput, evFinish:
		if len(g.reject) > 0 && info.text != nil {
			g.scratch = jsonAppendString(g.scratch[:0], info.text)
			g.text = appendLowerText(g.text, g.scratch)
			for i, p := range g.reject {
				if len(p) > 0 && bytes.Contains(g.text, p) { // an empty phrase would match everything
					return g.fail("rejected_phrase", fmt.Errorf("upstream output contains the rejected phrase %q", g.phrases[i]))
				}
			}
			// Providers stream a refusal a word at a time: while the answer
			// so far could still grow into a phrase, keep holding.
			if info.class == evOutput && g.mayBecomeRejected() {
				break
			}
		}
		g.by = info.by
		g.decision = gateCommit
		return gateCommit
	}
	if len(g.buf) > g.maxBuffer || g.events > g.maxEvents {
		return g.fail("buffer_overflow", fmt.Errorf("no output after %d events (%d bytes): over the first-event buffer of %d events / %d bytes",
			g.events, len(g.buf), g.maxEvents, g.maxBuffer))
	}
	return gateHold
}

// mayBecomeRejected reports whether the output text so far, leading
// whitespace aside, is the beginning of a reject phrase.
func (g *gate) mayBecomeRejected() bool {
	text := bytes.TrimLeft(g.text, " \t\r\n")
	for _, p := range g.reject {
		if p = bytes.TrimLeft(p, " \t\r\n"); len(text) < len(p) && bytes.HasPrefix(p, text) {
			return true
		}
	}
	return false
}

func (g *gate) fail(reason string, err error) gateDecision {
	g.decision, g.reason, g.cause = gateFail, reason, err
	return gateFail
}

// buffered returns the raw bytes of every event fed so far, in order,
// including the committing one: what is written to the client at commit.
func (g *gate) buffered() []byte { return g.buf }

// err says why the gate failed; nil unless it did.
func (g *gate) err() error { return g.cause }

// failReason is the short class of the failure, for logs and metrics:
// error_event, malformed_first_event, terminal_before_content,
// rejected_phrase or buffer_overflow; "" unless the gate failed.
func (g *gate) failReason() string { return g.reason }

// committedBy names what committed the attempt: "content_block_delta" for
// Anthropic; for OpenAI the delta member ("content", "reasoning_content",
// "reasoning", "tool_calls", "function_call", "refusal") or
// "finish_reason". "" unless the gate committed.
func (g *gate) committedBy() string { return g.by }

func terminalName(d dialect, ev sseEvent) string {
	if d == dialectOpenAI {
		return "[DONE]"
	}
	if ev.Name != nil {
		return string(ev.Name)
	}
	return "message_stop"
}

// upstreamErrorMessage renders the upstream's own words from a raw "error"
// value (an object with type and message, or a string), falling back to
// the clipped event data.
func upstreamErrorMessage(errVal, data []byte) string {
	if jsonIsString(errVal) {
		return string(jsonAppendString(nil, errVal))
	}
	if it, ok := jsonOpen(errVal, 0, 0); ok && it.isObject() {
		var typ, msg []byte
		for it.next() {
			switch {
			case it.keyIs("type"), it.keyIs("code") && typ == nil:
				if v := it.value(); jsonIsString(v) {
					typ = jsonAppendString(nil, v)
				}
			case it.keyIs("message"):
				if v := it.value(); jsonIsString(v) {
					msg = jsonAppendString(nil, v)
				}
			}
		}
		switch {
		case len(typ) > 0 && len(msg) > 0:
			return string(typ) + ": " + string(msg)
		case len(msg) > 0:
			return string(msg)
		case len(typ) > 0:
			return string(typ)
		}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return "(no details)"
	}
	return strconv.Quote(string(clipData(data, 200)))
}

// clipData shortens b for an error message.
func clipData(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// appendLowerText appends s lower-cased (Unicode simple folding to lower case)
// to dst; the reject check compares both sides through it.
func appendLowerText(dst, s []byte) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			dst = append(dst, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(s[i:])
		dst = utf8.AppendRune(dst, unicode.ToLower(r))
		i += n
	}
	return dst
}

// checkBody detects a fake 200 in a complete non-stream JSON body. It
// returns the reason ("malformed_body", "error_body", "empty_content" for
// Anthropic, "empty_choices" for OpenAI) and an error naming it, or "", nil
// when the body looks like a real answer. Rejected phrases are checked
// separately by checkBodyReject.
func checkBody(d dialect, body []byte) (reason string, err error) {
	it, ok := jsonOpen(body, 0, 0)
	if !ok || !it.isObject() {
		return "malformed_body", fmt.Errorf("upstream 200 body is not a JSON object: %q", clipData(body, 200))
	}
	var typ, errVal, content, choices []byte
	for it.next() {
		switch {
		case it.keyIs("type"):
			typ = it.value()
		case it.keyIs("error"):
			errVal = it.value()
		case it.keyIs("content"):
			content = it.value()
		case it.keyIs("choices"):
			choices = it.value()
		}
	}
	if !it.end() {
		return "malformed_body", fmt.Errorf("upstream 200 body is not valid JSON: %q", clipData(body, 200))
	}
	if errVal != nil && !jsonIsNull(errVal) || d == dialectAnthropic && jsonStringIs(typ, "error") {
		return "error_body", fmt.Errorf("upstream 200 body is an error: %s", upstreamErrorMessage(errVal, body))
	}
	if d == dialectOpenAI {
		if len(choices) == 0 || choices[0] != '[' || !jsonNonEmpty(choices) {
			return "empty_choices", fmt.Errorf("upstream 200 body has no choices")
		}
		return "", nil
	}
	if len(content) == 0 || content[0] != '[' || !jsonNonEmpty(content) {
		return "empty_content", fmt.Errorf("upstream 200 body has no content")
	}
	return "", nil
}

// checkBodyReject fails a complete non-stream body whose answer text
// (Anthropic content[].text, OpenAI choices[].message.content) contains one
// of the reject phrases, case-insensitively.
func checkBodyReject(d dialect, body []byte, reject [][]byte) error {
	if len(reject) == 0 {
		return nil
	}
	var text []byte
	appendText := func(raw []byte) {
		if jsonIsString(raw) {
			text = appendLowerText(text, jsonAppendString(nil, raw))
			text = append(text, '\n')
		}
	}
	if d == dialectOpenAI {
		choices, _ := jsonLookup(body, "choices")
		arr, ok := jsonOpen(choices, 0, 0)
		for ok && !arr.isObject() && arr.next() {
			if c, ok := jsonLookup(arr.value(), "message", "content"); ok {
				appendText(c)
			}
		}
	} else {
		content, _ := jsonLookup(body, "content")
		arr, ok := jsonOpen(content, 0, 0)
		for ok && !arr.isObject() && arr.next() {
			if t, ok := jsonLookup(arr.value(), "text"); ok {
				appendText(t)
			}
		}
	}
	var lp []byte
	for _, p := range reject {
		lp = appendLowerText(lp[:0], p)
		if len(lp) > 0 && bytes.Contains(text, lp) {
			return fmt.Errorf("upstream answer contains the rejected phrase %q", p)
		}
	}
	return nil
}

// Minimal JSON scanning.
//
// The payload of an event is inspected with a small validating pull
// scanner rather than encoding/json: it walks the bytes once, descends
// only into the members the proxy needs, and allocates nothing. Its notion
// of valid JSON is encoding/json.Valid's (FuzzJSONScanner holds it to that).

// jsonMaxDepth is encoding/json's nesting limit.
const jsonMaxDepth = 10000

func jsonWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// jsonValid reports whether b is exactly one JSON value.
func jsonValid(b []byte) bool {
	i := jsonSkip(b, 0, 0)
	return i >= 0 && jsonWS(b, i) == len(b)
}

// jsonSkip returns the index just past the value that starts at b[i]
// (after whitespace), or -1 when there is no valid value there. depth is
// the nesting of that value (0 at the top).
func jsonSkip(b []byte, i, depth int) int {
	i = jsonWS(b, i)
	if i >= len(b) {
		return -1
	}
	switch c := b[i]; c {
	case '"':
		return jsonSkipString(b, i)
	case '{':
		if depth >= jsonMaxDepth {
			return -1
		}
		if i = jsonWS(b, i+1); i < len(b) && b[i] == '}' {
			return i + 1
		}
		for {
			if i >= len(b) || b[i] != '"' {
				return -1
			}
			if i = jsonSkipString(b, i); i < 0 {
				return -1
			}
			if i = jsonWS(b, i); i >= len(b) || b[i] != ':' {
				return -1
			}
			if i = jsonSkip(b, i+1, depth+1); i < 0 {
				return -1
			}
			if i = jsonWS(b, i); i >= len(b) {
				return -1
			}
			switch b[i] {
			case ',':
				i = jsonWS(b, i+1)
			case '}':
				return i + 1
			default:
				return -1
			}
		}
	case '[':
		if depth >= jsonMaxDepth {
			return -1
		}
		if i = jsonWS(b, i+1); i < len(b) && b[i] == ']' {
			return i + 1
		}
		for {
			if i = jsonSkip(b, i, depth+1); i < 0 {
				return -1
			}
			if i = jsonWS(b, i); i >= len(b) {
				return -1
			}
			switch b[i] {
			case ',':
				i++
			case ']':
				return i + 1
			default:
				return -1
			}
		}
	case 't':
		return jsonSkipLiteral(b, i, "true")
	case 'f':
		return jsonSkipLiteral(b, i, "false")
	case 'n':
		return jsonSkipLiteral(b, i, "null")
	default:
		if c == '-' || c >= '0' && c <= '9' {
			return jsonSkipNumber(b, i)
		}
	}
	return -1
}

func jsonSkipLiteral(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// SWAR constants: a byte of ones, and the high bit of every byte.
const (
	swarOnes = 0x0101010101010101
	swarHigh = 0x8080808080808080
)

// jsonSkipString returns the index past the string whose opening quote is
// at b[i], or -1.
func jsonSkipString(b []byte, i int) int {
	end, _ := jsonScanString(b, i)
	return end
}

// jsonScanString returns the index past the string whose opening quote is
// at b[i] (or -1) and whether it holds an escape. Eight bytes are checked
// at a time for a quote, a backslash or a control character (the lowest
// flagged byte of each test is exact, so the lowest of the three is the
// first special byte).
func jsonScanString(b []byte, i int) (end int, escaped bool) {
	i++
	for i < len(b) {
		for len(b)-i >= 8 {
			x := binary.LittleEndian.Uint64(b[i:])
			q := x ^ (swarOnes * '"')
			s := x ^ (swarOnes * '\\')
			t := (x-swarOnes*0x20)&^x | (q-swarOnes)&^q | (s-swarOnes)&^s
			if t &= swarHigh; t != 0 {
				i += bits.TrailingZeros64(t) >> 3
				break
			}
			i += 8
		}
		if i >= len(b) {
			return -1, false
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, escaped
		case c < 0x20:
			return -1, false
		case c != '\\':
			i++
			continue
		}
		escaped = true
		if i+1 >= len(b) {
			return -1, false
		}
		switch b[i+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i += 2
		case 'u':
			if jsonHex4(b[i+2:]) < 0 {
				return -1, false
			}
			i += 6
		default:
			return -1, false
		}
	}
	return -1, false
}

func jsonUnhex(c byte) rune {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0')
	case c >= 'a' && c <= 'f':
		return rune(c - 'a' + 10)
	case c >= 'A' && c <= 'F':
		return rune(c - 'A' + 10)
	}
	return -1
}

// jsonHex4 decodes four hex digits, or returns -1.
func jsonHex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	// Any invalid digit is -1, which makes the whole result negative.
	return jsonUnhex(b[0])<<12 | jsonUnhex(b[1])<<8 | jsonUnhex(b[2])<<4 | jsonUnhex(b[3])
}

func jsonSkipNumber(b []byte, i int) int {
	if b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return -1
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		i = jsonDigits(b, i+1)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		j := jsonDigits(b, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := jsonDigits(b, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func jsonDigits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// jsonIter walks the members of an object or the elements of an array,
// validating as it goes. After next reports a member, its value starts at
// i and is pending: take it with value, descend into it with enter (and
// give the child back with leave), or let the following next skip it.
type jsonIter struct {
	b       []byte
	i       int
	depth   int  // nesting of this container
	close   byte // '}' or ']'
	key     []byte
	keyEsc  bool // key holds an escape
	first   bool
	pending bool // a value starts at i and was not consumed
	bad     bool // not valid JSON
	done    bool // the container ended; i is past its close
}

// jsonOpen starts walking the object or array at b[i:] (after whitespace).
func jsonOpen(b []byte, i, depth int) (jsonIter, bool) {
	i = jsonWS(b, i)
	if i >= len(b) || depth >= jsonMaxDepth {
		return jsonIter{}, false
	}
	it := jsonIter{b: b, i: i + 1, depth: depth, first: true}
	switch b[i] {
	case '{':
		it.close = '}'
	case '[':
		it.close = ']'
	default:
		return jsonIter{}, false
	}
	return it, true
}

// isObject reports whether the iterator walks an object.
func (it *jsonIter) isObject() bool { return it.close == '}' }

// next moves to the next member (setting key, for an object) or element,
// skipping a pending value. It is false at the end of the container or on
// invalid JSON (then bad is set).
func (it *jsonIter) next() bool {
	if it.pending && it.value() == nil {
		return false
	}
	if it.bad || it.done {
		return false
	}
	b := it.b
	i := jsonWS(b, it.i)
	switch {
	case i >= len(b):
		it.bad = true
		return false
	case b[i] == it.close: // "{}", or after a member (a trailing comma fails below)
		it.i, it.done = i+1, true
		return false
	case it.first:
		it.first = false
	case b[i] != ',':
		it.bad = true
		return false
	default:
		i = jsonWS(b, i+1)
	}
	if it.close == '}' {
		if i >= len(b) || b[i] != '"' {
			it.bad = true
			return false
		}
		ke, esc := jsonScanString(b, i)
		if ke < 0 {
			it.bad = true
			return false
		}
		it.key, it.keyEsc = b[i+1:ke-1], esc
		i = jsonWS(b, ke)
		if i >= len(b) || b[i] != ':' {
			it.bad = true
			return false
		}
		i = jsonWS(b, i+1)
	}
	it.i, it.pending = i, true
	return true
}

// value consumes the pending value and returns its raw bytes; nil when
// nothing is pending or the value is not valid JSON.
func (it *jsonIter) value() []byte {
	if !it.pending {
		return nil
	}
	it.pending = false
	vs := it.i
	ve := jsonSkip(it.b, vs, it.depth+1)
	if ve < 0 {
		it.bad = true
		return nil
	}
	it.i = ve
	return it.b[vs:ve]
}

// enter descends into the pending value when it is an object or array; the
// parent resumes after leave. When it is neither, the value stays pending.
func (it *jsonIter) enter() (jsonIter, bool) {
	if !it.pending {
		return jsonIter{}, false
	}
	c, ok := jsonOpen(it.b, it.i, it.depth+1)
	if ok {
		it.pending = false
	}
	return c, ok
}

// leave finishes the child from enter and continues after it.
func (it *jsonIter) leave(c *jsonIter) {
	for c.next() {
	}
	if c.bad {
		it.bad = true
		return
	}
	it.i = c.i
}

// end reports whether the walk of a top-level container succeeded and
// nothing but whitespace follows it.
func (it *jsonIter) end() bool {
	for it.next() {
	}
	return !it.bad && jsonWS(it.b, it.i) == len(it.b)
}

// keyIs reports whether the current member's key is the ASCII name want.
func (it *jsonIter) keyIs(want string) bool {
	if string(it.key) == want {
		return true
	}
	return it.keyEsc && jsonKeyIs(it.key, want)
}

// jsonKeyIs compares a raw object key with an ASCII name, decoding escapes
// (a key spelled "con\u0074ent" is "content").
func jsonKeyIs(key []byte, want string) bool {
	if string(key) == want {
		return true
	}
	if len(key) <= len(want) || bytes.IndexByte(key, '\\') < 0 {
		return false
	}
	j := 0
	for i := 0; i < len(key); {
		c := key[i]
		i++
		if c == '\\' {
			if i >= len(key) {
				return false
			}
			e := key[i]
			i++
			switch e {
			case 'b':
				c = '\b'
			case 'f':
				c = '\f'
			case 'n':
				c = '\n'
			case 'r':
				c = '\r'
			case 't':
				c = '\t'
			case 'u':
				r := jsonHex4(key[i:])
				i += 4
				if r < 0 || r >= 0x80 {
					return false // want is ASCII
				}
				c = byte(r)
			default:
				c = e
			}
		}
		if j >= len(want) || want[j] != c {
			return false
		}
		j++
	}
	return j == len(want)
}

// keyFold reports whether the current member's key names want (ASCII
// lower-case letters) as encoding/json matches a key to a struct field.
func (it *jsonIter) keyFold(want string) bool {
	if !it.keyEsc && len(it.key) == len(want) {
		for i, c := range it.key {
			// want holds only letters: c|0x20 folds an upper-case
			// letter, and nothing else lands on a lower-case one.
			if c|0x20 != want[i] {
				return false
			}
		}
		return true
	}
	return jsonKeyFold(it.key, want)
}

// jsonKeyFold compares a raw object key with want (ASCII lower-case
// letters) the way encoding/json matches a key to a field name: escapes
// decoded, invalid UTF-8 and lone surrogates read as U+FFFD, then simple
// Unicode case folding, so "MODEL", "mod\u0065l" and "\u017ftream" (the
// long s folds to s; the Kelvin sign to k) all match.
func jsonKeyFold(key []byte, want string) bool {
	j := 0
	for i := 0; i < len(key); {
		r, n := jsonKeyRune(key[i:])
		if j >= len(want) || foldRuneASCII(r) != rune(want[j]) {
			return false
		}
		i += n
		j++
	}
	return j == len(want)
}

// jsonKeyRune decodes the first character of a raw (validated) JSON string
// body as encoding/json does; n is the bytes it takes.
func jsonKeyRune(s []byte) (r rune, n int) {
	switch c := s[0]; {
	case c < utf8.RuneSelf && c != '\\':
		return rune(c), 1
	case c >= utf8.RuneSelf:
		return utf8.DecodeRune(s) // invalid UTF-8 is U+FFFD, one byte
	case len(s) < 2:
		return utf8.RuneError, 1
	}
	switch e := s[1]; e {
	case 'u':
		return jsonDecodeU(s)
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	default:
		return rune(e), 2
	}
}

// foldRuneASCII maps r to the lower-case ASCII letter of its case-fold
// class, as encoding/json's fold (the smallest rune of the class) does, or
// to -1 when the class has no ASCII letter.
func foldRuneASCII(r rune) rune {
	if r < utf8.RuneSelf {
		if 'A' <= r && r <= 'Z' {
			r += 'a' - 'A'
		}
		return r
	}
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f < utf8.RuneSelf {
			return foldRuneASCII(f)
		}
	}
	return -1
}

// jsonLookup returns the raw value at the path of object keys inside the
// JSON value b.
func jsonLookup(b []byte, path ...string) ([]byte, bool) {
	if len(path) == 0 {
		return b, true
	}
	it, ok := jsonOpen(b, 0, 0)
	for ok && it.isObject() && it.next() {
		if !it.keyIs(path[0]) {
			continue
		}
		if path = path[1:]; len(path) == 0 {
			v := it.value()
			return v, v != nil
		}
		if it, ok = it.enter(); !ok {
			return nil, false
		}
	}
	return nil, false
}

// jsonIsNull reports whether a raw value is the literal null.
func jsonIsNull(v []byte) bool { return string(v) == "null" }

// jsonNonEmpty reports whether a raw value carries something: a non-empty
// string, array or object, or any number or boolean.
func jsonNonEmpty(v []byte) bool {
	if len(v) == 0 || jsonIsNull(v) {
		return false
	}
	switch v[0] {
	case '"':
		return len(v) > 2
	case '[', '{':
		it, _ := jsonOpen(v, 0, 0)
		return it.next()
	}
	return true
}

// jsonIsString reports whether a raw value is a string.
func jsonIsString(v []byte) bool { return len(v) >= 2 && v[0] == '"' }

// jsonAppendString appends the decoded text of the raw JSON string v
// (quotes included, already validated) to dst.
func jsonAppendString(dst, v []byte) []byte {
	if len(v) < 2 || v[0] != '"' {
		return dst
	}
	s := v[1 : len(v)-1]
	for len(s) > 0 {
		i := bytes.IndexByte(s, '\\')
		if i < 0 {
			return append(dst, s...)
		}
		dst = append(dst, s[:i]...)
		s = s[i:]
		if len(s) < 2 {
			return dst
		}
		switch e := s[1]; e {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, n := jsonDecodeU(s)
			dst = utf8.AppendRune(dst, r)
			s = s[n:]
			continue
		default:
			dst = append(dst, e)
		}
		s = s[2:]
	}
	return dst
}

// jsonDecodeU decodes the \uXXXX escape (with its low surrogate, if any)
// at the start of s; n is the bytes consumed. Like encoding/json, a lone
// surrogate becomes U+FFFD.
func jsonDecodeU(s []byte) (r rune, n int) {
	r = jsonHex4(s[2:])
	if r < 0 {
		return utf8.RuneError, min(len(s), 6)
	}
	if utf16.IsSurrogate(r) {
		if len(s) >= 12 && s[6] == '\\' && s[7] == 'u' {
			if d := utf16.DecodeRune(r, jsonHex4(s[8:])); d != utf8.RuneError {
				return d, 12
			}
		}
		return utf8.RuneError, 6
	}
	return r, 6
}

// jsonInt reads a raw JSON number as an int64 (a fraction is truncated);
// ok is false for anything else or out of range.
func jsonInt(v []byte) (int64, bool) {
	if len(v) == 0 || jsonSkipNumber(v, 0) != len(v) {
		return 0, false
	}
	i := 0
	neg := v[0] == '-'
	if neg {
		i++
	}
	var n int64
	for ; i < len(v) && v[i] >= '0' && v[i] <= '9'; i++ {
		if n > (math.MaxInt64-9)/10 {
			return 0, false
		}
		n = n*10 + int64(v[i]-'0')
	}
	if i < len(v) { // a fraction or an exponent: rare enough for ParseFloat
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil || f >= math.MaxInt64 || f <= math.MinInt64 {
			return 0, false
		}
		return int64(f), true
	}
	if neg {
		n = -n
	}
	return n, true
}
