package engine

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"unicode/utf8"

	"github.com/llmhedge/caddy-llm-hedge/internal/stream"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// Mid-stream continuation (SPEC 12): a committed stream that is cut,
// stalls past idle or ends in an error event, while everything the client
// has is text, is finished by another attempt, and the client reads one
// well-formed answer. The continuation either sends the delivered text as
// an assistant turn (prefill: the target continues from it) or sends the
// original request and forwards only what comes after the delivered text
// (replay-match: a continuation that says anything else is cancelled).
// When neither works the client gets the error event it would have had.

// The strategies, as the chain and the attempts' reasons name them.
const (
	strategyPrefill = "prefill"
	strategyReplay  = "replay"
	strategyFinish  = "finish" // only the terminal event was missing
)

// Continuation outcomes, as resume_total counts them.
const (
	resumeCompleted       = "completed"
	resumeDiverged        = "diverged"
	resumePrefillRejected = "prefill_rejected"
	resumeFailed          = "failed"
	resumeIneligible      = "ineligible"
	resumeBudget          = "budget_exhausted"
)

// resumableEnd reports whether a relay that ended so may be continued:
// not when the client left or the request ran out of time.
func resumableEnd(reason string) bool {
	switch reason {
	case "upstream_cut", "idle_timeout", "upstream_error_event", "read_error", "event_too_large":
		return true
	}
	return false
}

// resume ends a committed stream the relay could not complete: continued
// on other attempts, or, when that cannot be, with the error event the
// relay held back. st.relay says how it ended when it returns.
func resume(w io.Writer, flush func() error, st *requestState, rs wire.Resumer) {
	h := st.h
	held := st.relay.Held
	defer func() {
		if !st.relay.Complete && shutdownCut(st.ctx) {
			st.relay.Reason = "shutdown" // the process exits: the client is told
		} else if !st.relay.Complete && errors.Is(st.ctx.Err(), context.Canceled) {
			st.relay.Reason = "client_gone" // it left while the stream was being continued
		}
		if !st.relay.Complete && st.relay.Reason != "client_gone" && held != "" {
			_ = stream.WriteClientEvent(w, flush, []byte(held)) // the client is told; if it cannot be, it is gone anyway
		}
	}()
	st.broke = append(st.broke, st.winner.p)
	for left := h.Stream.Resume; left > 0 && resumableEnd(st.relay.Reason); left-- {
		delivered := utf8.RuneCountInString(rs.Text())
		if why := rs.Ineligible(); why != "" {
			noteResume(st, "", delivered, resumeIneligible, why)
			return
		}
		if rs.Finished() {
			if err := rs.WriteEnd(w, wire.ContEnd{}); err == nil && flush() == nil {
				st.relay.Complete, st.relay.Reason, st.relay.Err = true, "", nil
			}
			noteResume(st, strategyFinish, delivered, resumeCompleted, "")
			return
		}
		if st.ctx.Err() != nil || st.attemptsLeft() == 0 {
			noteResume(st, "", delivered, resumeFailed, "no attempt left")
			return
		}
		if !h.retryBudget.TryAcquire(clock()) {
			h.obs.BudgetExhausted("retry")
			noteResume(st, "", delivered, resumeBudget, "")
			return
		}
		continueStream(w, flush, st, rs)
		if st.relay.Complete || !resumableEnd(st.relay.Reason) {
			return
		}
	}
}

// continueStream is one continuation: prefill on the targets that accept
// it, then replay-match on every candidate, each target in turn until one
// completes the stream, adds text and breaks (the next continuation goes
// on from there), or none is left.
func continueStream(w io.Writer, flush func() error, st *requestState, rs wire.Resumer) {
	text, delivered := rs.Text(), deliveredOf(rs)
	chars := utf8.RuneCountInString(text)
	orig, model := st.req, st.plan.model
	defer func() { st.req, st.resuming, st.fatal = orig, "", nil }()
	cands := resumeCandidates(st)
	pre, _ := wire.TrimPrefill(text)
	outcome, why := resumeFailed, "no candidate continued the stream"
	for _, strategy := range []string{strategyPrefill, strategyReplay} {
		req, plan, sp := orig, cands, wire.ReplaySplicer(text)
		if strategy == strategyPrefill {
			plan = slices.DeleteFunc(slices.Clone(cands), func(p *provider) bool { return !p.prefills(st.dialect) })
			if len(plan) == 0 || pre == "" {
				continue
			}
			body, err := rs.Prefill(orig.Body, pre)
			if err != nil {
				continue
			}
			if req, err = wire.ParseCompletion(st.dialect, st.r.URL.Path, st.r.URL.RawQuery, body); err != nil {
				continue
			}
			req.SizeClass, req.SessionKey = orig.SizeClass, orig.SessionKey
			sp = wire.PrefillSplicer(text)
		}
		st.req, st.resuming = req, strategy
		st.plan = newPlan(plan, model)
		for st.attemptsLeft() > 0 && st.ctx.Err() == nil {
			st.fatal = nil
			a := racePlan(st, st.r)
			if a == nil {
				st.drain()
				if f := st.lastFailure(); strategy == strategyPrefill && f != nil && wire.IsPrefillRejection(f.errBody) {
					outcome, why = resumePrefillRejected, "the target refused the assistant prefill"
				}
				break
			}
			sp := sp // each target starts the hold afresh
			res := splice(w, flush, st, a, rs, &sp, strategy, delivered)
			st.drain()
			switch {
			case res.complete:
				st.relay.Complete, st.relay.Reason, st.relay.Err = true, "", nil
				noteResume(st, strategy, chars, resumeCompleted, "")
				return
			case res.reason == "client_gone":
				st.relay.Reason, st.relay.Err = res.reason, res.err
				noteResume(st, strategy, chars, resumeFailed, "client gone")
				return
			case res.reason == wire.ReasonTextBound:
				st.relay.Reason, st.relay.Err = res.reason, res.err
				noteResume(st, strategy, chars, resumeIneligible, res.err.Error())
				return
			case res.wrote:
				// It added text, then broke: the next continuation goes
				// on from there.
				st.broke = append(st.broke, a.p)
				st.relay.Reason, st.relay.Err = res.reason, res.err
				noteResume(st, strategy, chars, resumeFailed, res.reason)
				return
			case res.diverged:
				outcome, why = resumeDiverged, res.reason
			}
		}
	}
	noteResume(st, "", chars, outcome, why)
}

// prefills reports whether p continues a request of dialect d from an
// assistant turn holding the delivered text: the operator's `prefill`, else
// only Anthropic Messages on the routes that continue such a turn as
// written (Anthropic's API, Bedrock, Vertex's Anthropic publisher). Gemini,
// on Vertex too, and OpenAI's APIs answer a trailing assistant turn from
// the start.
func (p *provider) prefills(d wire.Dialect) bool {
	if p.prefill != nil {
		return *p.prefill
	}
	pf, ok := d.(wire.Prefiller)
	return ok && p.cfg != nil && pf.PrefillsOn(p.cfg.API)
}

// resumeCandidates are the request's candidates for a continuation: the
// providers whose stream broke in this request go last.
func resumeCandidates(st *requestState) []*provider {
	h := st.h
	// A continuation never crosses formats: native providers only.
	all, _ := h.candidates(st.dialect, st.plan.model, st.req.SessionKey, st.req.SizeClass)
	cands := slices.DeleteFunc(slices.Clone(st.pinPlan(all)),
		func(p *provider) bool { return !p.native(st.dialect) })
	slices.SortStableFunc(cands, func(a, b *provider) int {
		ba, bb := slices.Contains(st.broke, a), slices.Contains(st.broke, b)
		switch {
		case ba == bb:
			return 0
		case ba:
			return 1
		}
		return -1
	})
	return cands
}

// noteResume records one continuation's outcome: the chain, the metric
// and, when it could not complete the stream, a log line saying why.
func noteResume(st *requestState, strategy string, delivered int, outcome, why string) {
	h := st.h
	st.skips = append(st.skips, ChainEntry{OffsetMs: msSince(st.start), Event: "resume", Outcome: outcome,
		Strategy: strategy, Delivered: delivered, Error: why})
	h.obs.Resumed(outcome)
	if outcome != resumeCompleted {
		orDiscard(h.log).Debug("stream not continued", slog.String("outcome", outcome), slog.String("reason", why), slog.Int("delivered_chars", delivered))
	}
}
