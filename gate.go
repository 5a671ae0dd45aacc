package llmhedge

import (
	"bytes"
	"fmt"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

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

// gateFailure is why the gate failed an attempt.
type gateFailure uint8

const (
	gateOK                    gateFailure = iota // not failed
	gateErrorEvent                               // an error event before any output: a fake 200
	gateMalformed                                // event data that is not what the dialect sends
	gateTerminalBeforeContent                    // the stream ended before any output
	gateRejectedPhrase                           // the output so far holds a reject phrase
	gateBufferFull                               // no output within the first-event buffer
)

// String is the short name of the failure, for logs and metrics.
func (f gateFailure) String() string {
	switch f {
	case gateErrorEvent:
		return "error_event"
	case gateMalformed:
		return "malformed_first_event"
	case gateTerminalBeforeContent:
		return "terminal_before_content"
	case gateRejectedPhrase:
		return "rejected_phrase"
	case gateBufferFull:
		return "buffer_overflow"
	}
	return ""
}

// class is the attempt failure class of a gate failure.
func (f gateFailure) class() wire.FailClass {
	switch f {
	case gateErrorEvent:
		return wire.ClassFake200
	case gateRejectedPhrase:
		return wire.ClassRejected
	case gateTerminalBeforeContent:
		return wire.ClassClosedEarly
	}
	return wire.ClassMalformed
}

// gate is the first-event gate of one streaming attempt (from the
// first upstream event to the commit): it buffers the events that precede the first model output,
// commits at that output, and fails the attempt on a fake 200. After its
// decision, feed changes nothing.
type gate struct {
	d         wire.Dialect
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
	failure  gateFailure
	cause    error
	by       string
	choices  wire.ChoiceSet // OpenAI choices seen in the buffered events
}

// newGate returns a gate for one attempt. reject holds phrases that, found
// (case-insensitively) in the output text up to the committing event, fail
// the attempt. maxBuffer and maxEvents bound what is held before commit;
// non-positive values mean 1 MiB and 1000.
func newGate(d wire.Dialect, reject [][]byte, maxBuffer int, maxEvents int) *gate {
	g := &gate{}
	g.Reset(d, reject, maxBuffer, maxEvents)
	return g
}

// Reset prepares g for a new attempt, keeping its buffers (for pooling).
func (g *gate) Reset(d wire.Dialect, reject [][]byte, maxBuffer int, maxEvents int) {
	if maxBuffer <= 0 {
		maxBuffer = streamDefaultGateBuffer
	}
	if maxEvents <= 0 {
		maxEvents = streamDefaultGateEvents
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
	g.decision, g.failure, g.cause, g.by = gateHold, gateOK, nil, ""
	g.choices = wire.ChoiceSet{}
}

// feed takes the next event of the attempt and returns the decision.
func (g *gate) feed(ev sse.Event) gateDecision {
	if g.decision != gateHold {
		return g.decision
	}
	g.buf = append(g.buf, ev.Raw...)
	g.events++
	info := g.d.Inspect(ev, len(g.reject) > 0, &g.choices)
	switch info.Class {
	case wire.EvError:
		return g.fail(gateErrorEvent, fmt.Errorf("upstream sent an error event: %s", wire.UpstreamErrorMessage(info.ErrVal, ev.Data)))
	case wire.EvMalformed:
		return g.fail(gateMalformed, fmt.Errorf("upstream event data is not a JSON object: %q", wire.ClipData(ev.Data, 200)))
	case wire.EvTerminal:
		return g.fail(gateTerminalBeforeContent, fmt.Errorf("upstream ended the stream (%s) before any output", g.d.TerminalName(ev)))
	case wire.EvOutput, wire.EvFinish:
		if len(g.reject) > 0 && info.Text != nil {
			g.scratch = jsonscan.AppendString(g.scratch[:0], info.Text)
			g.text = wire.AppendLowerText(g.text, g.scratch)
			for i, p := range g.reject {
				if len(p) > 0 && bytes.Contains(g.text, p) { // an empty phrase would match everything
					return g.fail(gateRejectedPhrase, fmt.Errorf("upstream output contains the rejected phrase %q", g.phrases[i]))
				}
			}
			// Providers stream a refusal a word at a time: while the answer
			// so far could still grow into a phrase, keep holding.
			if info.Class == wire.EvOutput && g.mayBecomeRejected() {
				break
			}
		}
		g.by = info.By
		g.decision = gateCommit
		return gateCommit
	}
	if len(g.buf) > g.maxBuffer || g.events > g.maxEvents {
		return g.fail(gateBufferFull, fmt.Errorf("no output after %d events (%d bytes): over the first-event buffer of %d events / %d bytes",
			g.events, len(g.buf), g.maxEvents, g.maxBuffer))
	}
	return gateHold
}

func (g *gate) fail(f gateFailure, err error) gateDecision {
	g.decision, g.failure, g.cause = gateFail, f, err
	return gateFail
}

// buffered returns the raw bytes of every event fed so far, in order,
// including the committing one: what is written to the client at commit.
func (g *gate) buffered() []byte { return g.buf }

// err says why the gate failed; nil unless it did.
func (g *gate) err() error { return g.cause }

// failed says why the gate failed; gateOK unless it did.
func (g *gate) failed() gateFailure { return g.failure }

// failReason is the short name of the failure, for logs and metrics:
// error_event, malformed_first_event, terminal_before_content,
// rejected_phrase or buffer_overflow; "" unless the gate failed.
func (g *gate) failReason() string { return g.failure.String() }

// committedBy names what committed the attempt: "content_block_delta" for
// Anthropic; for OpenAI the delta member ("content", "reasoning_content",
// "reasoning", "tool_calls", "function_call", "refusal") or
// "finish_reason". "" unless the gate committed.
func (g *gate) committedBy() string { return g.by }

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

// The gate's bounds when none is given: stream.max_buffer's default, and
// the events it buffers before the first valid one.
const (
	streamDefaultGateBuffer = 1 << 20
	streamDefaultGateEvents = 1000
)
