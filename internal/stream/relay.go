package stream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// relayOptions tune relayStream.
type RelayOptions struct {
	// Idle is the longest wait for the next complete upstream event after
	// commit (pings and comments count as events); 0 means no limit. The
	// wait is measured from when the relay asks for the next event, so a
	// slow client does not count against the upstream.
	Idle time.Duration
	// FinishGrace is, for OpenAI, how long to wait for [DONE] after a
	// finish_reason chunk before ending as a success (the answer is
	// complete; a usage chunk may still come). 0 means 1s.
	FinishGrace time.Duration
	// Choices are the OpenAI choices the events before the relay (the
	// gate's buffer, already written) showed; the grace starts only once
	// every choice seen has finished.
	Choices wire.ChoiceSet
	// DropMalformed drops (and counts) events whose data is not valid JSON
	// instead of forwarding them.
	DropMalformed bool
	// OnStall, if set, is called once, from the watchdog goroutine, when no
	// event arrived for Idle/2. It must return promptly (log, count).
	OnStall func(gap time.Duration)
	// Coalesce flushes once the upstream has no complete event buffered
	// (just before the relay would wait on it) instead of after every
	// event, as reverse_proxy flushes once per upstream read: a burst of
	// events costs one write to the client, not one each, and no event
	// waits in the buffer while the upstream is quiet.
	Coalesce bool
	// Unflushed says w holds bytes the client must still get (the
	// committing events the caller wrote): they go with the relay's first
	// flush, together with any event already read after them, before the
	// relay first waits on the upstream.
	Unflushed bool
	// Track, if set, is told every event the client receives (resume.go).
	Track wire.Resumer
	// HoldError keeps the error event that would end an incomplete stream
	// in the result (Held) instead of writing it, an upstream error event
	// included: the caller may still continue the stream.
	HoldError bool
	// ReadEndsWithCtx says a pending read of rd already fails once ctx
	// ends (rd reads the body of a request made with a context derived
	// from ctx): abort is then called only for the idle limit, and the
	// relay does not hold a registration on ctx (and a channel) for the
	// stream's whole life.
	ReadEndsWithCtx bool
	// Upstream, if set, is the connection rd's reads wait on (a decoder
	// between them reads it only inside those reads): it tells the Waiter
	// set by BeforeWait when a read of rd finds the network has nothing
	// yet and is about to wait (internal/upconn). The relay then reads on without flushing,
	// and flushes from there: exactly when waiting would hold back what it
	// has read, and never for a read that returns at once.
	Upstream Upstream
	// ReadsAhead says rd reads an HTTP/1.x chunked body, whose reader
	// goes on into every chunk whose size line it holds and waits for
	// that chunk's data: a read that only takes the rest of an event may
	// still wait, so without Upstream each read is preceded by a flush.
	ReadsAhead bool
	// EndUnflushed leaves the terminal event (or, for an answer that ends
	// with its body, the last burst) written but not flushed when
	// coalescing: the caller flushes it, or the server does when the
	// handler returns, together with the end of the response (an
	// HTTP/1.1 chunked body's last chunk), in one write to the client
	// instead of two. The caller must flush before anything that may
	// wait.
	EndUnflushed bool
}

// relayResult is how a committed stream ended.
type RelayResult struct {
	Complete bool   // the terminal event (or finish_reason then end/grace for OpenAI) was relayed
	Reason   string // "" when complete; else idle_timeout, total_timeout, upstream_cut, upstream_error_event, event_too_large, read_error, client_gone, shutdown
	Err      error
	Events   int // events written after commit (a synthesized [DONE] included)
	Dropped  int // malformed events dropped
	Bytes    int64
	Held     string // the error event not written (HoldError)
}

// relayStream copies a committed stream to the client (from the commit to
// the end of the answer): each complete event is written unchanged and flushed at once,
// until the terminal event. A stream that ends any other way, except by
// the client leaving, gets one error event in the client's dialect
// (section 6), never a silent end.
//
// ctx is the request context: its deadline is the total timeout, its
// cancellation the client leaving. abort must unblock a pending read of rd
// (cancel the attempt or close the upstream body); it is called when ctx
// ends (unless opts.ReadEndsWithCtx) or the idle limit passes, possibly
// more than once. u, flush and abort may be nil.
func Relay(ctx context.Context, w io.Writer, flush func() error, rd *sse.Reader, d wire.Dialect, u *wire.Usage, opts RelayOptions, abort func()) RelayResult {
	if abort == nil {
		abort = func() {}
	}
	var res RelayResult

	wd := NewRelayWatchdog(opts, abort)
	defer wd.Stop()
	if !opts.ReadEndsWithCtx {
		aborted := make(chan struct{})
		stopAbort := context.AfterFunc(ctx, func() {
			defer close(aborted)
			abort()
		})
		defer func() {
			if !stopAbort() {
				<-aborted // abort runs in its own goroutine: do not outlive it
			}
		}()
	}

	write := flush // flush after each event, unless coalescing
	var flushErr error
	var cw *coalescer
	if opts.Coalesce && flush != nil {
		cw = &coalescer{w: w, flush: flush, rd: rd}
		defer func() {
			if cw.pending && flushErr == nil {
				_ = cw.flushOut() // an upstream error event, relayed as is
			}
			cw.release()
		}()
		w, flush, write = cw, cw.flushOut, nil
		cw.pending = opts.Unflushed
	} else if opts.Unflushed && flush != nil {
		if err := flush(); err != nil {
			res.Reason, res.Err = "client_gone", fmt.Errorf("writing to the client: %w", err)
			return res
		}
	}
	// The wait for an event starts when the reader has no complete event
	// left and reads the upstream (the watchdog's clock is read once per
	// upstream read, not per event; with the connection's word, once per
	// read that waits); a burst is flushed to the client first, and a
	// slow client is not an idle upstream. A read that only
	// takes the rest of an event already arriving (rest) does not end the
	// burst: it is kept, out of the reader's buffer, for one write after,
	// unless the body's reader may read on past that rest (ReadsAhead).
	// With the connection's word (Upstream) every read goes on without a
	// flush, the burst kept the same way, and the connection flushes it
	// if the read has to wait. Its Waiter is set at the relay's first
	// read of the body, which is then still open (a body the gate read to
	// its end is never read again, and the connection may be another
	// request's by then), and kept for the relay's life: while the body is
	// open only the relay's reads touch the connection, and the transport
	// clears it at the body's end, before its own next read
	// (upconn.Conn.Idle, from the attempt's trace).
	var atWait *flushAtWait // told by the connection when a read waits
	armed := false
	if cw != nil && opts.Upstream != nil {
		atWait = &flushAtWait{cw: cw, wd: wd, err: &flushErr}
		defer opts.Upstream.StopWaiting(atWait) // only its own: the connection may serve another request by now
	}
	rd.BeforeFill = func(rest bool) {
		if atWait != nil {
			// The wait starts where the connection says a read waits
			// (flushAtWait), not at every read: most return at once, and
			// a clock read per event is not free.
			if cw.pending && flushErr == nil {
				cw.detach()
			}
			if !armed {
				armed = true
				opts.Upstream.BeforeWait(atWait)
			}
			return
		}
		if cw != nil && cw.pending && flushErr == nil {
			if rest && ReadsOnForRest(opts.Upstream, opts.ReadsAhead) {
				cw.detach()
			} else {
				flushErr = cw.flushOut()
			}
		}
		if !wd.reading {
			wd.reading = true
			wd.WaitStart()
		}
	}
	defer func() { rd.BeforeFill = nil }()

	// OpenAI: every choice seen has sent its finish_reason, so the answer
	// is complete and the grace runs (a stream of n > 1 choices is not
	// complete while one of them is mid-sentence).
	finishing := false
	grace := d.FinishGrace()
	var cs *wire.ChoiceSet // passed through the dialect interface: on the heap
	if grace || opts.Choices.Memo != nil {
		cs = new(wire.ChoiceSet)
		*cs = opts.Choices // the choices, and the memo of what the events repeat
	}
	if grace {
		if cs.AllFinished() { // the committing chunk finished it
			finishing = true
			wd.setLimit(finishGraceOf(opts))
		}
	}
	obs, _ := d.(wire.InfoObserver)
	for {
		wd.reading = false
		ev, err := rd.Next()
		if wd.reading {
			wd.WaitEnd()
		}
		if flushErr != nil {
			res.Reason, res.Err = "client_gone", fmt.Errorf("writing to the client: %w", flushErr)
			return res
		}
		if err != nil {
			res = endRelay(ctx, w, flush, d, opts, wd, finishing, err, res)
			if res.Complete && cw != nil && cw.pending && opts.EndUnflushed {
				// An answer whose end is its body's (Gemini): its last
				// burst goes with the response's end, as a terminal
				// event does.
				if err := cw.writeUnflushed(); err != nil {
					res.Complete, res.Reason, res.Err = false, "client_gone", fmt.Errorf("writing to the client: %w", err)
				}
			}
			return res
		}
		info := d.Inspect(ev, opts.Track != nil, cs)
		class := info.Class
		if class == wire.EvMalformed && opts.DropMalformed {
			res.Dropped++
			continue
		}
		if class == wire.EvError && opts.HoldError {
			res.Held = string(ev.Raw)
			res.Reason = "upstream_error_event"
			res.Err = fmt.Errorf("upstream sent an error event after commit: %s", wire.UpstreamErrorMessage(info.ErrVal, ev.Data))
			return res
		}
		if err := WriteClientEvent(w, write, ev.Raw); err != nil {
			res.Reason, res.Err = "client_gone", fmt.Errorf("writing to the client: %w", err)
			return res
		}
		res.Events++
		res.Bytes += int64(len(ev.Raw))
		if obs != nil && u != nil {
			obs.ObserveInfo(u, ev, info) // inspect read the usage members
		} else {
			u.ObserveEvent(d, ev)
		}
		if opts.Track != nil {
			opts.Track.Track(ev, info)
		}
		switch class {
		case wire.EvTerminal:
			// A read that ended between the event's last CR and its LF
			// left the LF to the next event, never read: a client that
			// splits events at "\r\n\r\n" waits for it.
			var err error
			cut := CutBeforeLF(ev.Raw)
			if cut {
				if _, err = w.Write(lineFeed); err == nil {
					res.Bytes++
				}
			}
			switch {
			case err != nil || flush == nil:
			case cw != nil && opts.EndUnflushed:
				err = cw.writeUnflushed()
			case write == nil || cut:
				err = flush()
			}
			if err != nil {
				res.Reason, res.Err = "client_gone", fmt.Errorf("writing to the client: %w", err)
				return res
			}
			res.Complete = true
			return res
		case wire.EvError:
			info := d.Inspect(ev, false, nil)
			res.Reason = "upstream_error_event"
			res.Err = fmt.Errorf("upstream sent an error event after commit: %s", wire.UpstreamErrorMessage(info.ErrVal, ev.Data))
			return res
		}
		if grace && finishing != cs.AllFinished() {
			// A finish completed the last open choice, or (rarely) a new
			// choice appeared during the grace: back to the idle limit.
			finishing = !finishing
			switch {
			case finishing:
				wd.setLimit(finishGraceOf(opts))
			case opts.Idle > 0:
				wd.setLimit(opts.Idle)
			default:
				wd.setLimit(math.MaxInt64) // no idle limit
			}
		}
	}
}

var lineFeed = []byte("\n")

// ReadsOnForRest is the rule for reading on, without a flush, for the rest
// of an event cut at the end of a read that filled the reader's room
// (sse.Reader.Arriving): only for a body whose connection does not tell
// where a read waits (up nil) and whose reader does not read ahead into a
// wait (not an HTTP/1.x chunked body). The relay keeps to it, and so does a
// translation between the body and the relay.
func ReadsOnForRest(up Upstream, readsAhead bool) bool { return up == nil && !readsAhead }

// CutBeforeLF reports that a terminal event's bytes end between the last
// CR and its LF: the read that returned it ended there, and the LF, left
// to the next event, is never read. Not "\r\r", a CR-only stream's end.
func CutBeforeLF(raw []byte) bool {
	n := len(raw)
	return n >= 2 && raw[n-1] == '\r' && raw[n-2] == '\n'
}

// Upstream is RelayOptions.Upstream: internal/upconn's Conn.
type Upstream interface {
	BeforeWait(Waiter)
	StopWaiting(Waiter)
}

// Waiter is told that a read is about to wait (internal/upconn.Waiter).
type Waiter = interface{ Waiting() }

// flushAtWait flushes the relay's burst when a read of the upstream is
// about to wait, and starts the wait clock after it (the client's time is
// not the upstream's). The clock starts at the first wait of a Next only:
// an upstream that trickles bytes without completing an event is not
// given the limit anew at each of them.
type flushAtWait struct {
	cw  *coalescer
	wd  *relayWatchdog
	err *error // the relay's flushErr
}

func (f *flushAtWait) Waiting() {
	if f.cw.pending && *f.err == nil {
		*f.err = f.cw.flushOut()
	}
	if !f.wd.reading {
		f.wd.reading = true
		f.wd.WaitStart()
	}
}

func finishGraceOf(opts RelayOptions) time.Duration {
	if opts.FinishGrace <= 0 {
		return DefaultFinishGrace
	}
	return opts.FinishGrace
}

func WriteClientEvent(w io.Writer, flush func() error, b []byte) error {
	if _, err := w.Write(b); err != nil {
		return err
	}
	if flush != nil {
		return flush()
	}
	return nil
}

// endRelay decides why the upstream stopped and ends the client's stream
// accordingly: a synthesized [DONE] after an OpenAI finish_reason, an
// error event otherwise, nothing when the client is gone.
func endRelay(ctx context.Context, w io.Writer, flush func() error, d wire.Dialect, opts RelayOptions, wd *relayWatchdog, finishing bool, readErr error, res RelayResult) RelayResult {
	var status int
	var message string
	switch ctxErr := ctx.Err(); {
	case errors.Is(context.Cause(ctx), wire.ErrShutdown):
		res.Reason, status = "shutdown", 503
		res.Err = fmt.Errorf("stream ended: %w", wire.ErrShutdown)
		message = "the proxy is shutting down and could not finish this response: retry the request"
	case ctxErr == context.Canceled:
		res.Reason, res.Err = "client_gone", fmt.Errorf("client left the stream: %w", context.Cause(ctx))
		return res
	case finishing:
		// The answer is complete: whatever ended the upstream (EOF, the
		// grace passing, a cut), finish it the way the client expects
		// (OpenAI's [DONE]; a Gemini stream just ends, and what is
		// pending is flushed when the relay returns).
		if end := d.StreamEnd(); end != nil {
			if err := WriteClientEvent(w, flush, end); err != nil {
				res.Reason, res.Err = "client_gone", fmt.Errorf("writing to the client: %w", err)
				return res
			}
			res.Events++
			res.Bytes += int64(len(end))
		}
		res.Complete = true
		return res
	case ctxErr != nil:
		res.Reason, status = "total_timeout", 504
		res.Err = fmt.Errorf("request timed out while streaming: %w", ctxErr)
		message = "the response exceeded its total time limit"
	case wd.Expired.Load():
		res.Reason, status = "idle_timeout", 504
		res.Err = fmt.Errorf("no upstream event for %s: %w", opts.Idle, readErr)
		message = fmt.Sprintf("the upstream sent nothing for %s", opts.Idle)
	case errors.Is(readErr, sse.ErrEventTooLarge):
		res.Reason, status = "event_too_large", 502
		res.Err = readErr
		message = "the upstream sent an event over the size limit"
	case errors.Is(readErr, io.EOF), errors.Is(readErr, io.ErrUnexpectedEOF):
		res.Reason, status = "upstream_cut", 502
		res.Err = fmt.Errorf("upstream ended the stream before its terminal event: %w", readErr)
		message = "the upstream ended the stream before it was complete"
	default:
		res.Reason, status = "read_error", 502
		res.Err = readErr
		message = "reading the upstream stream failed"
	}
	if opts.HoldError {
		res.Held = string(wire.ErrorEvent(d, status, message))
		return res
	}
	// The client is told; if it cannot be, it is gone anyway.
	_ = WriteClientEvent(w, flush, wire.ErrorEvent(d, status, message))
	return res
}

// streamDefaultFinishGrace is an OpenAI stream's wait for [DONE] after its
// finish_reason.
const DefaultFinishGrace = time.Second
