package engine

import (
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/genai"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/stream"
	"github.com/llmhedge/caddy-llm-hedge/internal/translate"
)

// errFinishGrace ends a translated attempt whose target finished its
// answer and then held it past the grace (xlBody).
var errFinishGrace = errors.New("the target held its finished answer past the finish grace")

// xlBody is a translated event stream: the target's events in, the
// client's SSE bytes out. A target stream that cannot be carried on ends
// with the client's error event (translate's Fail), never a clean stop;
// a read error of the upstream is returned as is (the relay reports it).
// A target stream that ends before its terminal event (End's error: every
// translator's End fails only for that) just ends, unfinished: the relay
// reports it as it does a native one, upstream_cut, and writes the
// client's error event; a Fail event there would read, in the log, as an
// error event the provider sent.
type xlBody struct {
	rd     *sse.Reader // from sse's pool, given back at the target's end
	s      translate.Stream
	body   io.Closer
	buf    []byte
	pooled *[]byte // buf's, from xlBufs, given back once the client has it all
	off    int
	err    error
	// finish, when the attempt is traced, takes the finish reasons of the
	// target's events, in the target's dialect.
	finish *genai.FinishReasons
	target string
	// readOn: read on for the rest of an event cut at the end of a read
	// that filled the reader's room, holding what is translated. Only
	// where the relay keeps its own such shortcut (an HTTP/2 or
	// Content-Length body): over a cleartext connection the relay is told
	// at the wait and flushes there, and an HTTP/1.x chunked body may
	// wait inside that read, so there the translated events go to the
	// relay first, not held across a wait.
	readOn bool
	// grace is how long a target that finished its answer (Chat's
	// finish_reason, Gemini's finishReason) may hold it before what ends
	// it (the usage chunk, [DONE], the end of the body), as the relay
	// gives a native one (FinishGrace): then abort ends the pending read
	// and the client's answer is finished as at the body's end, not held
	// until the idle timeout. 0: no grace.
	grace      time.Duration
	abort      func()
	graceTimer *time.Timer
	graceOver  atomic.Bool // abort was the grace's
}

func (x *xlBody) Read(p []byte) (int, error) {
	for x.off >= len(x.buf) {
		if x.err != nil {
			x.releaseBuf()
			return 0, x.err
		}
		x.buf, x.off = x.buf[:0], 0
		x.waitGrace()
		x.translate(x.rd.Next())
		// The events read with it are translated too, and (readOn) an
		// event cut at the end of that read is read on (its rest is
		// arriving, as the relay's reader sees it), up to a bound (a
		// backlog is handed over in parts): the relay then writes the
		// burst to the client at once, as it does a native one, instead of
		// flushing each event.
		for x.err == nil {
			if ev, ok := x.rd.Buffered(); ok {
				x.translate(ev, nil)
			} else if x.readOn && x.rd.Arriving() && len(x.buf) < stream.CoalesceMax {
				x.waitGrace()
				x.translate(x.rd.Next())
			} else {
				break
			}
		}
	}
	n := copy(p, x.buf[x.off:])
	x.off += n
	return n, nil
}

// translate appends the client's bytes for one target event (or the end
// of the target's stream, or its read error) to x.buf.
func (x *xlBody) translate(ev sse.Event, err error) {
	switch {
	case errors.Is(err, io.EOF), err != nil && x.graceOver.Load():
		// The body's end, or the grace passed after the target finished
		// its answer (its read was given up): the answer is complete.
		x.err = io.EOF
		if x.buf, err = x.s.End(x.buf); err != nil {
			x.err = io.ErrUnexpectedEOF
		}
	case err != nil:
		x.err = err
	default:
		if x.finish != nil {
			x.finish.ObserveEvent(x.target, ev.Data)
		}
		if x.buf, err = x.s.Event(x.buf, ev); errors.Is(err, translate.ErrAfterEnd) {
			x.err = io.EOF
		} else if err != nil {
			x.buf = x.s.Fail(x.buf, err)
			x.err = io.EOF
		}
	}
	if x.err != nil && x.rd != nil {
		// The target's stream is over: nothing reads it again, and the
		// event just translated was copied into x.buf.
		sse.Put(x.rd)
		x.rd = nil
	}
	if x.graceTimer != nil && (x.err != nil || !x.s.(translate.Finisher).Finished()) {
		x.graceTimer.Stop() // the answer ended (at the usage chunk, say): the attempt is left alone
	}
}

// waitGrace starts the grace before the first read after the target
// finished its answer (the client's wait for what precedes it is not the
// target's).
func (x *xlBody) waitGrace() {
	if x.graceTimer != nil || x.grace <= 0 {
		return
	}
	if f, ok := x.s.(translate.Finisher); ok && f.Finished() {
		x.graceTimer = time.AfterFunc(x.grace, func() {
			x.graceOver.Store(true)
			x.abort()
		})
	}
}

func (x *xlBody) Close() error { return x.body.Close() }

// xlBufs holds the buffers translated bytes wait in for the relay: a
// stream's grows to its largest burst, and would otherwise be made anew,
// in steps, for every translated answer. Not bufpool's: the translators
// grow it by append, to capacities that are seldom bufpool's classes,
// and this pool takes any of them back (with bufpool,
// openai-anthropic allocated 24.6 KiB per request instead of 22.5).
var xlBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// maxPooledXL is the largest buffer given back to xlBufs: a stream that
// translated a burst larger than that keeps it to itself.
const maxPooledXL = 64 << 10

// newXLBody reads the target's stream body, translated by s.
func newXLBody(body io.ReadCloser, s translate.Stream) *xlBody {
	bp := xlBufs.Get().(*[]byte)
	return &xlBody{rd: sse.Get(body, 0), s: s, body: body, buf: (*bp)[:0], pooled: bp}
}

// releaseBuf gives buf back once the client's bytes were all read and
// the stream is over (Read returns its end from then on).
func (x *xlBody) releaseBuf() {
	if x.pooled == nil {
		return
	}
	if cap(x.buf) <= maxPooledXL {
		*x.pooled = x.buf[:0]
		xlBufs.Put(x.pooled)
	}
	x.buf, x.pooled, x.off = nil, nil, 0
}

// translationReadsOn is xlBody's readOn for this answer: the relay's rule
// for its own reads of this body.
func (a *attempt) translationReadsOn() bool {
	return stream.ReadsOnForRest(a.directConn(), a.bodyReadsAhead())
}
