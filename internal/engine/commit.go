package engine

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/stream"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// commit is the irreversible moment: the winner's status,
// headers and buffered events go to the client, then the rest of the
// stream is relayed. From here on a failure can only be reported in-band.
func commit(w http.ResponseWriter, r *http.Request, st *requestState, a *attempt) {
	h := st.h
	defer a.cancel(nil)
	defer a.resp.Body.Close()
	if a.xl != nil {
		// The target's own headers describe its format, not the client's.
		w.Header().Set("Content-Type", a.resp.Header.Get("Content-Type"))
		translationHeaders(w.Header(), st, a)
	} else {
		copyHeader(w.Header(), a.resp.Header)
	}
	// A committed stream may idle for minutes holding what it references:
	// the upstream header map is copied (its values are shared) and goes.
	a.resp.Header = nil
	st.status = http.StatusOK
	if a.body != nil {
		w.Header().Set("Content-Length", strconv.Itoa(len(a.body)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(a.body)
		st.drain()
		st.outcome = OutcomeSuccess
		return
	}
	defer func() { // after the relay and reuseConn: the reader and its buffer back to their pools
		sse.Put(a.rd)
		a.rd = nil
	}()
	hdr := w.Header()
	hdr.Del("Content-Length")
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_, err := w.Write(a.gate.Buffered())
	if err == nil && a.gate.Ended() && stream.CutBeforeLF(a.gate.Buffered()) {
		_, err = w.Write([]byte("\n")) // as the relay does for its terminal event (a rare path)
	}
	// With losers to reap, the first events are flushed before that: their
	// teardown is not the client's wait. Otherwise the relay's first flush
	// carries them, with any event already read after them, before it
	// waits on the upstream: one write to the client instead of two.
	unflushed := err == nil && st.live == 0 && !a.gate.Ended() // an ended answer has no relay to flush it
	if err == nil && !unflushed {
		err = rc.Flush()
	}
	st.drain() // the client has (or is about to get) its first token; now reap the losers
	if err != nil {
		st.outcome = OutcomeClientAbort
		return
	}
	var rs wire.Resumer
	if a.gate.Ended() {
		// The committing event was also the last (a Responses
		// response.incomplete before any output): the written events are
		// the whole answer, with nothing to relay or continue.
		a.gate.Release()
		a.gate = nil
		st.relay = stream.RelayResult{Complete: true}
	} else {
		opts := stream.RelayOptions{
			Idle:          time.Duration(h.Timeouts.Idle),
			FinishGrace:   defaultFinishGrace,
			Choices:       a.gate.Choices,
			DropMalformed: h.Stream.DropMalformed,
			Coalesce:      true,
			Unflushed:     unflushed,
			// a.ctx is made from st.ctx: its end cancels the upstream
			// request, which ends a pending read of its body.
			ReadEndsWithCtx: true,
			OnStall: func(gap time.Duration) {
				orDiscard(h.log).Warn("upstream stream stalled", slog.String("provider", a.p.name),
					slog.Duration("gap", gap), slog.Duration("idle_timeout", time.Duration(h.Timeouts.Idle)))
			},
		}
		opts.Upstream = a.directConn()
		opts.ReadsAhead = a.bodyReadsAhead()
		// The terminal event goes out with the response's end, in one
		// write, unless reuseConn's tail read waits first (it flushes
		// then): only with the connection's word on that wait.
		opts.EndUnflushed = opts.Upstream != nil
		rs = newResumer(st, a)
		a.gate.Release() // written and tracked: the gate is done with
		a.gate = nil
		if rs != nil {
			opts.Track, opts.HoldError = rs, true
		}
		st.relay = stream.Relay(st.ctx, w, rc.Flush, a.rd, st.dialect, &a.usage, opts, func() { a.cancel(errIdleTimeout) })
	}
	own := st.relay // the winner's own stream, for its provider's verdict
	if rs != nil && !st.relay.Complete {
		a.cancel(nil)
		resume(w, rc.Flush, st, rs)
	}
	switch {
	case st.relay.Complete:
		st.outcome = OutcomeSuccess
		if own.Complete { // not a continuation's: a was cancelled for it
			reuseConn(a, rc.Flush)
		}
	// Only the relay can tell a client that left from one that hung up
	// after reading the error event: that is no abort.
	case st.relay.Reason == "client_gone":
		st.outcome = OutcomeClientAbort
	default:
		st.outcome = OutcomeStreamError
	}
	recordStreamEnd(st, a, own)
}

// newResumer follows the committed stream for a continuation, from the
// events the gate buffered (already written): nil when continuation is
// off or the dialect or request cannot be continued.
func newResumer(st *requestState, a *attempt) wire.Resumer {
	h := st.h
	if h.Stream.Resume <= 0 || a.xl != nil { // a continuation never crosses formats
		return nil
	}
	if a.tracked {
		return a.track // the gate told it every event it buffered
	}
	return trackCommitted(st.dialect, st.req, a.gate)
}

// trackCommitted is d's resumer for req, told the events the gate
// buffered (already written to the client); nil when req cannot be
// continued.
func trackCommitted(d wire.Dialect, req *wire.Request, g *stream.Gate) wire.Resumer {
	rs := wire.NewResumer(d, req)
	if rs == nil {
		return nil
	}
	var rd sse.Reader
	rd.ResetBytes(g.Buffered()) // parsed in place: no copy, no buffer
	for {
		ev, err := rd.Next()
		if err != nil {
			return rs
		}
		rs.Track(ev, d.Inspect(ev, true, nil))
	}
}

var errIdleTimeout = errors.New("no stream event within the idle timeout")

// A complete stream's connection goes back to the pool only if its body is
// read to the end: closed at the terminal event, before the chunked
// body's last chunk (HTTP/1.1) is read, the transport drops the connection
// and the next request dials (and, to a real provider, shakes hands) anew.
// The end normally arrives with the terminal event or microseconds after it;
// an upstream that keeps the body open longer, or sends more than
// tailMax after its terminal event, loses its connection as before.
const (
	tailWait = 5 * time.Millisecond
	tailMax  = 4 << 10
)

var errTailWait = errors.New("upstream body still open after its terminal event")

// tailDeadlines bounds every tail read with one shared timer: the read
// takes microseconds, and a timer of its own per stream cost more than it
// (docs/performance-history.md, round six).
var tailDeadlines = stream.NewDeadlines(tailWait)

// reuseConn reads what is left of a's complete stream (discarded: the
// client has its terminal event) so its connection can be reused. If that
// read has to wait on a cleartext connection, flush (non-nil) sends the
// client what it has first: a terminal event the relay left unflushed
// (RelayOptions.EndUnflushed) is never held for the body's end.
func reuseConn(a *attempt, flush func() error) {
	if up := a.directConn(); up != nil && flush != nil {
		fw := &flushOnWait{flush: flush}
		up.BeforeWait(fw)
		defer up.StopWaiting(fw)
	}
	tailDeadlines.Start(&a.tailWait, a.cancel, errTailWait)
	_, _ = io.CopyN(io.Discard, a.resp.Body, tailMax)
	tailDeadlines.Stop(&a.tailWait)
}

// flushOnWait flushes the client when the connection's read is about to
// wait (reuseConn's tail read).
type flushOnWait struct{ flush func() error }

func (f *flushOnWait) Waiting() { _ = f.flush() }

// copyHeader copies an upstream response header for the client, without
// hop-by-hop fields.
func copyHeader(dst, src http.Header) {
	for k, v := range src {
		dst[k] = v
	}
	for _, k := range hopHeaders {
		if k != "Content-Length" {
			delete(dst, k)
		}
	}
}
