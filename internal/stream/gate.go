package stream

import (
	"bytes"
	"fmt"

	"github.com/llmhedge/caddy-llm-hedge/internal/bufpool"
	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// gateDecision is the gate's verdict after an event.
type GateDecision uint8

const (
	GateHold   GateDecision = iota // keep buffering: nothing proves the attempt good yet
	GateCommit                     // the first output arrived: write the buffer, the provider is locked
	GateFail                       // a fake 200: drop the attempt, fail over
)

func (d GateDecision) String() string {
	switch d {
	case GateHold:
		return "hold"
	case GateCommit:
		return "commit"
	case GateFail:
		return "fail"
	}
	return "unknown"
}

// gateFailure is why the gate failed an attempt.
type GateFailure uint8

const (
	GateOK                    GateFailure = iota // not failed
	GateErrorEvent                               // an error event before any output: a fake 200
	GateMalformed                                // event data that is not what the dialect sends
	GateTerminalBeforeContent                    // the stream ended before any output
	GateRejectedPhrase                           // the output so far holds a reject phrase
	GateBufferFull                               // no output within the first-event buffer
)

// String is the short name of the failure, for logs and metrics.
func (f GateFailure) String() string {
	switch f {
	case GateErrorEvent:
		return "error_event"
	case GateMalformed:
		return "malformed_first_event"
	case GateTerminalBeforeContent:
		return "terminal_before_content"
	case GateRejectedPhrase:
		return "rejected_phrase"
	case GateBufferFull:
		return "buffer_overflow"
	}
	return ""
}

// class is the attempt failure class of a gate failure.
func (f GateFailure) Class() wire.FailClass {
	switch f {
	case GateErrorEvent:
		return wire.ClassFake200
	case GateRejectedPhrase:
		return wire.ClassRejected
	case GateTerminalBeforeContent:
		return wire.ClassClosedEarly
	}
	return wire.ClassMalformed
}

// gate is the first-event gate of one streaming attempt (from the
// first upstream event to the commit): it buffers the events that precede the first model output,
// commits at that output, and fails the attempt on a fake 200. After its
// decision, feed changes nothing.
type Gate struct {
	d         wire.Dialect
	phrases   [][]byte // as configured, for messages
	reject    [][]byte // phrases lower-cased
	rejectBuf []byte   // backing store of reject
	rejectEnd []int
	maxBuffer int
	maxEvents int

	buf     []byte  // raw bytes of every event fed: the only copy
	pooled  *[]byte // buf's array when it came from the pool
	events  int
	text    []byte // lower-cased output text seen, for the reject check
	scratch []byte

	decision GateDecision
	failure  GateFailure
	cause    error
	by       string
	ended    bool           // the committing event was the stream's terminal one
	Choices  wire.ChoiceSet // OpenAI choices seen in the buffered events
	// Track, if set, is told every event fed with its inspection (the
	// text included): the resumer of the stream, should it commit, set
	// up without reading the buffer again.
	Track wire.Resumer
	// Usage, if set, records what each event fed says about usage, from
	// the inspection when the dialect reads usage there (InfoObserver).
	Usage *wire.Usage
}

// newGate returns a gate for one attempt. reject holds phrases that, found
// (case-insensitively) in the output text up to the committing event, fail
// the attempt. maxBuffer and maxEvents bound what is held before commit;
// non-positive values mean 1 MiB and 1000.
func NewGate(d wire.Dialect, reject [][]byte, maxBuffer int, maxEvents int) *Gate {
	g := &Gate{}
	g.Reset(d, reject, maxBuffer, maxEvents)
	return g
}

// Reset prepares g for a new attempt, keeping its buffers (for pooling).
func (g *Gate) Reset(d wire.Dialect, reject [][]byte, maxBuffer int, maxEvents int) {
	if maxBuffer <= 0 {
		maxBuffer = DefaultGateBuffer
	}
	if maxEvents <= 0 {
		maxEvents = DefaultGateEvents
	}
	g.d, g.maxBuffer, g.maxEvents = d, maxBuffer, maxEvents
	// Lower-case the phrases into one reused buffer, then slice it: the
	// buffer may move while it grows.
	g.phrases = reject
	g.rejectBuf, g.rejectEnd = g.rejectBuf[:0], g.rejectEnd[:0]
	for _, p := range reject {
		g.rejectBuf = wire.AppendLowerText(g.rejectBuf, p)
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
	g.decision, g.failure, g.cause, g.by, g.ended = GateHold, GateOK, nil, "", false
	memo := g.Choices.Memo // a reused gate keeps its memo's buffers, emptied
	if memo != nil {
		memo.Reset()
	}
	g.Choices = wire.ChoiceSet{Memo: memo}
	g.Track, g.Usage = nil, nil
}

// feed takes the next event of the attempt and returns the decision.
func (g *Gate) Feed(ev sse.Event) GateDecision {
	if g.decision != GateHold {
		return g.decision
	}
	g.room(len(ev.Raw))
	g.buf = append(g.buf, ev.Raw...)
	g.events++
	info := g.d.Inspect(ev, len(g.reject) > 0 || g.Track != nil, &g.Choices)
	if g.Track != nil {
		g.Track.Track(ev, info)
	}
	if g.Usage != nil {
		if obs, ok := g.d.(wire.InfoObserver); ok {
			obs.ObserveInfo(g.Usage, ev, info)
		} else {
			g.Usage.ObserveEvent(g.d, ev)
		}
	}
	switch info.Class {
	case wire.EvError:
		return g.fail(GateErrorEvent, fmt.Errorf("upstream sent an error event: %s", wire.UpstreamErrorMessage(info.ErrVal, ev.Data)))
	case wire.EvMalformed:
		return g.fail(GateMalformed, fmt.Errorf("upstream event data is not a JSON object: %q", wire.ClipData(ev.Data, 200)))
	case wire.EvTerminal:
		if info.By != "" {
			// A terminal that is an answer of its own (Responses'
			// response.incomplete: a content filter, or max_output_tokens
			// spent before any output): delivered, as the non-stream body
			// is, never failed over to bill the prompt again elsewhere.
			g.by, g.ended = info.By, true
			g.decision = GateCommit
			return GateCommit
		}
		return g.fail(GateTerminalBeforeContent, fmt.Errorf("upstream ended the stream (%s) before any output", g.d.TerminalName(ev)))
	case wire.EvOutput, wire.EvFinish:
		if len(g.reject) > 0 && info.Text != nil {
			g.scratch = jsonscan.AppendString(g.scratch[:0], info.Text)
			g.text = wire.AppendLowerText(g.text, g.scratch)
			for i, p := range g.reject {
				if len(p) > 0 && bytes.Contains(g.text, p) { // an empty phrase would match everything
					return g.fail(GateRejectedPhrase, fmt.Errorf("upstream output contains the rejected phrase %q", g.phrases[i]))
				}
			}
			// Providers stream a refusal a word at a time: while the answer
			// so far could still grow into a phrase, keep holding.
			if info.Class == wire.EvOutput && g.mayBecomeRejected() {
				break
			}
		}
		g.by = info.By
		g.decision = GateCommit
		return GateCommit
	}
	if len(g.buf) > g.maxBuffer || g.events > g.maxEvents {
		return g.fail(GateBufferFull, fmt.Errorf("no output after %d events (%d bytes): over the first-event buffer of %d events / %d bytes",
			g.events, len(g.buf), g.maxEvents, g.maxBuffer))
	}
	return GateHold
}

func (g *Gate) fail(f GateFailure, err error) GateDecision {
	g.decision, g.failure, g.cause = GateFail, f, err
	return GateFail
}

// buffered returns the raw bytes of every event fed so far, in order,
// including the committing one: what is written to the client at commit.
func (g *Gate) Buffered() []byte { return g.buf }

// Release drops what the gate buffered, once it was written to the
// client and read by the resumer: an idle committed stream holds none of it,
// and its buffer goes back to bufpool (the gate's events were copied by
// whoever kept anything of them: the resumer, the usage).
func (g *Gate) Release() {
	bufpool.Put(g.pooled)
	g.buf, g.text, g.scratch, g.pooled = nil, nil, nil, nil
}

// room makes room in buf for n more bytes: the events before the first
// content usually fit the pool's 4 KiB; past it (a Responses stream's
// response.created and response.in_progress echo the request's tools and
// instructions, 20-50 KB each for an agent) buf moves to a bufpool buffer
// of twice what it needs, up to bufpool.Max, and grows as any slice past
// that.
func (g *Gate) room(n int) {
	need := len(g.buf) + n
	switch {
	case need <= cap(g.buf):
		return
	case g.buf == nil && n <= gateBufSize:
		g.pooled = bufpool.Get(gateBufSize)
		g.buf = (*g.pooled)[:0]
		return
	case 2*need > bufpool.Max:
		return // append grows it
	}
	nb := bufpool.Get(2 * need)
	buf := append((*nb)[:0], g.buf...)
	bufpool.Put(g.pooled)
	g.pooled, g.buf = nb, buf
}

// gateBufSize is the buffer a gate takes first: the events before the
// first content usually fit one.
const gateBufSize = 4 << 10

// err says why the gate failed; nil unless it did.
func (g *Gate) Err() error { return g.cause }

// failed says why the gate failed; gateOK unless it did.
func (g *Gate) Failed() GateFailure { return g.failure }

// failReason is the short name of the failure, for logs and metrics:
// error_event, malformed_first_event, terminal_before_content,
// rejected_phrase or buffer_overflow; "" unless the gate failed.
func (g *Gate) FailReason() string { return g.failure.String() }

// committedBy names what committed the attempt: the By of the committing
// event's inspection. Anthropic: "content_block_delta", or the stop reason
// of an answer with no content ("refusal", "max_tokens",
// "model_context_window_exceeded"); OpenAI: the delta member ("content",
// "reasoning_content", "reasoning", "tool_calls", "function_call",
// "refusal") or "finish_reason"; Responses: the event type
// ("response.output_text.delta", "response.incomplete", ...); Gemini: the
// part, "finishReason" or "prompt_feedback". "" unless the gate committed.
func (g *Gate) CommittedBy() string { return g.by }

// Events is how many events the gate was fed.
func (g *Gate) Events() int { return g.events }

// Ended reports whether the committing event also ended the stream: the
// buffered events are the whole answer, and there is nothing to relay.
func (g *Gate) Ended() bool { return g.ended }

// mayBecomeRejected reports whether the output text so far, leading
// whitespace aside, is the beginning of a reject phrase.
func (g *Gate) mayBecomeRejected() bool {
	text := bytes.TrimLeft(g.text, " \t\r\n")
	for _, p := range g.reject {
		if p = bytes.TrimLeft(p, " \t\r\n"); len(text) < len(p) && bytes.HasPrefix(p, text) {
			return true
		}
	}
	return false
}

// The gate's bounds when none is given: stream.max_buffer's default, and
// the events it buffers before the first valid one.
const (
	DefaultGateBuffer = 1 << 20
	DefaultGateEvents = 1000
)
