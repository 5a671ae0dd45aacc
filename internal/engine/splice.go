package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/stream"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// spliceResult is how one continuation attempt ended.
type spliceResult struct {
	complete bool   // the client's stream is finished
	diverged bool   // it contradicted the client's text, or sent other output: cancelled
	wrote    bool   // the client got text from it
	reason   string // why it ended when not complete: a relay reason, or the divergence
	err      error
}

// splice reads the continuation a and writes to the client what it adds
// to the committed stream, in the client's ids and indexes (rs): held back
// by sp until it reproduced what it must, watched for idle like the relay,
// and ended with the request. delivered is what the client had when the
// continuation started.
func splice(w io.Writer, flush func() error, st *requestState, a *attempt, rs wire.Resumer, sp *wire.Splicer, strategy string, delivered deliveredText) spliceResult {
	defer a.cancel(nil)
	defer a.resp.Body.Close()
	run := &spliceRun{d: st.dialect, rs: rs, sp: sp, w: w, flush: flush}
	over := false
	buffered := sse.NewReader(bytes.NewReader(a.gate.Buffered()), 0)
	for !over {
		ev, err := buffered.Next()
		if err != nil {
			break
		}
		over = run.handle(ev)
	}
	if !over {
		spliceRest(st, a, &run.res, run.handle)
	}
	if run.finishing() {
		u := resumeUsage(st, a, strategy, delivered)
		if run.end(u) {
			st.resumeUsage = u
		}
	}
	if run.res.complete {
		reuseConn(a, nil) // its connection back to the pool, as a committed stream's
	}
	settleContinuation(st, a, run.res)
	return run.res
}

// spliceRun is the splice of one continuation stream, event by event.
type spliceRun struct {
	d        wire.Dialect
	rs       wire.Resumer
	sp       *wire.Splicer
	w        io.Writer
	flush    func() error
	finish   string
	finished bool
	res      spliceResult
}

// handle takes one continuation event; it reports whether the splice is
// over (a terminal event, a divergence, an error, the client gone).
func (s *spliceRun) handle(ev sse.Event) bool {
	c := s.rs.Read(ev, s.d.Inspect(ev, true, nil))
	switch c.Kind {
	case wire.ContText:
		out, diverged := s.sp.Feed(c.Text)
		if diverged {
			s.res.diverged, s.res.reason = true, "the continuation's text differs from the delivered text"
			if s.sp.Restarted {
				s.res.reason = "the prefill continuation started the answer again"
			}
			return true
		}
		if out != "" {
			if err := s.rs.WriteText(s.w, out); errors.Is(err, wire.ErrResumeTextBound) {
				s.res.reason, s.res.err = wire.ReasonTextBound, err
				return true
			} else if err != nil {
				s.res.reason, s.res.err = "client_gone", err
				return true
			}
			if err := s.flush(); err != nil {
				s.res.reason, s.res.err = "client_gone", err
				return true
			}
			s.res.wrote = true
		}
		if c.Ends {
			s.finish, s.finished = c.Finish, true
		}
	case wire.ContOther:
		s.res.diverged, s.res.reason = true, "the continuation sent output that is not text"
		return true
	case wire.ContFinish:
		s.finish, s.finished = c.Finish, true
	case wire.ContTerminal:
		if c.Finish != "" {
			s.finish = c.Finish
		}
		s.finished = true
		return true
	case wire.ContError:
		s.res.reason = "upstream_error_event"
		s.res.err = errors.New("the continuation sent an error event")
		return true
	}
	return false
}

// finishing reports whether the continuation finished its answer (then
// whatever ended its stream, end completes the client's).
func (s *spliceRun) finishing() bool {
	return s.finished && s.res.reason != "client_gone" && !s.res.diverged
}

// end completes the client's stream with the usage u, unless the
// continuation stopped short of the text the client has (a divergence).
// It reports whether the stream is complete.
func (s *spliceRun) end(u *wire.Usage) bool {
	s.res.reason, s.res.err = "", nil
	if !s.sp.Done() {
		s.res.diverged, s.res.reason = true, "the continuation ended before it reproduced the delivered text"
		return false
	}
	if err := s.rs.WriteEnd(s.w, wire.ContEnd{Finish: s.finish, Input: u.Input, Output: u.Output}); err != nil || s.flush() != nil {
		s.res.reason = "client_gone"
		return false
	}
	s.res.complete = true
	return true
}

// spliceRest reads the continuation's events after the gate's, under the
// idle limit and the request's context, until handle says it is over or
// the stream ends (res.reason says how).
func spliceRest(st *requestState, a *attempt, res *spliceResult, handle func(sse.Event) bool) {
	h := st.h
	idle := time.Duration(h.Timeouts.Idle)
	wd := stream.NewRelayWatchdog(stream.RelayOptions{Idle: idle}, func() { a.cancel(errIdleTimeout) })
	defer wd.Stop()
	aborted := make(chan struct{})
	stopAbort := context.AfterFunc(st.ctx, func() {
		defer close(aborted)
		a.cancel(context.Cause(st.ctx))
	})
	defer func() {
		if !stopAbort() {
			<-aborted
		}
	}()
	for {
		wd.WaitStart()
		ev, err := a.rd.Next()
		wd.WaitEnd()
		if err != nil {
			switch ctxErr := st.ctx.Err(); {
			case ctxErr == context.Canceled:
				res.reason = "client_gone"
			case ctxErr != nil:
				res.reason = "total_timeout"
			case wd.Expired.Load():
				res.reason = "idle_timeout"
			case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
				res.reason = "upstream_cut"
			case errors.Is(err, sse.ErrEventTooLarge):
				res.reason = "event_too_large"
			default:
				res.reason = "read_error"
			}
			res.err = fmt.Errorf("continuation on %s: %w", a.p.name, err)
			return
		}
		a.usage.ObserveEvent(st.dialect, ev)
		if handle(ev) {
			return
		}
	}
}

// deliveredText is what the client had when a continuation started: the
// bytes of its text and, when its dialect tells, the tokens they took
// (0: unknown).
type deliveredText struct {
	bytes  int
	tokens int64
}

// deliveredOf is what the client of rs has now.
func deliveredOf(rs wire.Resumer) deliveredText {
	d := deliveredText{bytes: len(rs.Text())}
	if tc, ok := rs.(wire.TokenCounter); ok {
		d.tokens = tc.Tokens()
	}
	return d
}

// resumeUsage is the usage a spliced stream reports: the original input,
// and every output token the client's text took. A replay-match
// continuation generated the whole text again, so its output counts it all;
// a prefill continuation's output is only the new part, and the text sent
// as the prefill counts what its input grew by (when the original input is
// unknown: the tokens the dialect counted, else its length / 4, never more
// than the continuation's whole prompt).
func resumeUsage(st *requestState, a *attempt, strategy string, delivered deliveredText) *wire.Usage {
	u := &wire.Usage{Input: a.usage.Input, Output: a.usage.Output}
	orig := &st.winner.usage
	if orig.Input > 0 {
		u.Input = orig.Input
	}
	if strategy == strategyPrefill {
		// The prompt grew by the prefill: with caching (another provider
		// may miss the cache) only the whole prompt compares. A token is
		// at least a byte: a growth beyond that is not the prefill.
		prompt := promptTokens(st.dialect, &a.usage)
		covered := prompt - promptTokens(st.dialect, orig)
		if orig.Input == 0 || covered <= 0 || covered > int64(delivered.bytes) {
			covered = int64(delivered.bytes+3) / 4
			if delivered.tokens > 0 {
				covered = delivered.tokens
			}
			if prompt > 0 {
				covered = min(covered, prompt)
			}
		}
		if orig.Input == 0 {
			// The original input is unknown (Chat and Responses report
			// usage at the end only): the continuation's counts the prefill,
			// which is output the client was told about.
			u.Input = max(1, u.Input-covered)
		}
		u.Output += covered
	}
	return u
}

// promptTokens is the whole prompt a usage counts, cached tokens included.
func promptTokens(d wire.Dialect, u *wire.Usage) int64 {
	n := u.Input + u.CacheWrite
	if !d.CachedInInput() {
		n += u.CacheRead
	}
	return n
}

// settleContinuation gives a continuation's provider its verdict and ends
// the attempt: a finished or diverged stream is the provider working, a
// broken one a failure, a client that left or a request out of time is
// neither.
func settleContinuation(st *requestState, a *attempt, res spliceResult) {
	h := st.h
	now := clock()
	switch {
	case res.complete || res.diverged:
		a.p.health.OnSuccess(now, false)
	case res.reason == "client_gone", res.reason == "total_timeout", res.reason == wire.ReasonTextBound:
	default:
		h.providerFailed(a.p, a.epoch, now, "stream_"+res.reason, res.err, 0, 0, st.plan.model, false)
	}
	if res.diverged {
		a.outcome = "resume_diverged"
	} else if !res.complete {
		a.outcome = "resume_broken"
	}
	h.obs.Continuation(a.p.name, &a.usage)
	recordWinnerEnd(a)
}
