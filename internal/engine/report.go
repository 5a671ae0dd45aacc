package engine

import (
	"cmp"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/dashboard"
	"github.com/llmhedge/caddy-llm-hedge/internal/translate"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// Request outcomes, as in the requests_total metric and the log line.
const (
	OutcomeSuccess       = "success"
	OutcomeUpstreamError = "upstream_error"
	OutcomeClientError   = "client_error"
	OutcomeExhausted     = "exhausted"
	OutcomeTimeout       = "timeout"
	OutcomeClientAbort   = "client_abort"
	OutcomeStreamError   = "stream_error"
)

// StatusClientClosed is nginx's "client closed request", reported for a
// request whose client left before anything was committed.
const StatusClientClosed = 499

// ChainEntry is one step of the request's decision chain in the log.
type ChainEntry struct {
	Provider     string
	OffsetMs     int64
	Event        string // initial, hedge_triggered, retry, failover, fallback, context_fallback, probe, cooldown_skip, busy_skip
	Outcome      string // request_success, hedge_winner, hedge_loser_cancelled, provider_error, request_error, stream_error, client_abort
	Status       int
	Class        string
	Error        string // what went wrong, for the operator only: clients read a generic message
	FirstEventMs int64
	Strategy     string // resume: prefill, replay or finish
	Delivered    int    // resume: characters of text the client had
	Route        *Route
}

// Report is what one request did, handed to the Observer when it ends.
type Report struct {
	Request  *http.Request
	Dialect  string // the client's dialect; "" for a path no dialect claims
	Model    string // the model asked for
	Served   string // the model that served it (the provider's word, else the model sent)
	Provider string // the winner's, or ""
	Outcome  string
	Status   int
	Total    time.Duration
	// FirstEventMs is the winner's time to its first valid event (at
	// least 1), 0 without a winner.
	FirstEventMs int64
	// FirstEvent is the same, unrounded.
	FirstEvent time.Duration
	// WinnerResult is the winner's attempt result in the metrics: "won",
	// or "failed_<class>" for a stream that broke after the commit; ""
	// without a winner.
	WinnerResult string
	Hedged       bool
	Attempts     int
	// Usage is what the client was told: the winner's, or the usage of a
	// continued stream.
	Usage wire.Usage
	// WinnerUsage is the winner's own usage (its tokens in the metrics).
	WinnerUsage   wire.Usage
	FallbackModel string
	StreamEnd     string // why a committed stream ended, when not cleanly
	CommittedBy   string
	// Translated names a translated answer's formats (`anthropic->openai`),
	// TranslationDropped what it dropped with notice.
	Translated, TranslationDropped string
	DroppedMalformed               int
	// Forwarded is a call that is not a completion: models, token counts,
	// forward globs.
	Forwarded bool
	Refused   string
	// Costs are the tokens each attempt of a completion used, by purpose
	// (PurposeAnswer, PurposeHedge, PurposeContinuation, PurposeFailed):
	// what the providers bill for this request.
	Costs []Cost

	st *requestState
}

// The purposes of the tokens a request used: the answer the client got,
// hedges that lost the race, continuations of a cut stream, and failed
// attempts a provider bills (it reported usage: a stream cut after
// output, a prompt read before an error). A translated attempt costs
// nothing extra: its tokens are its purpose's.
const (
	PurposeAnswer       = "answer"
	PurposeHedge        = "hedge"
	PurposeContinuation = "continuation"
	PurposeFailed       = "failed"
)

// Cost is one attempt's tokens. Input counts the prompt tokens billed at
// the input price (cache reads and writes apart, whatever the dialect's
// usage folds in); Estimated says Input is the request's size / 4, the
// attempt having been cancelled before its provider reported usage (a
// hedge loser on Chat Completions, which reports usage at the end only).
type Cost struct {
	Provider, Model, Purpose             string
	Input, Output, CacheRead, CacheWrite int64
	Estimated                            bool
}

// purposeOf is what attempt a of st was for, as its cost counts.
func purposeOf(st *requestState, a *attempt) string {
	switch {
	case strings.HasPrefix(a.reason, "resume_"):
		return PurposeContinuation
	case a == st.winner:
		return PurposeAnswer
	case a.class == wire.ClassLoser:
		return PurposeHedge
	}
	return PurposeFailed
}

// costs lists the tokens each attempt used, by purpose; attempts that
// used none (refused before a byte of answer) are left out.
func costs(st *requestState, dst []Cost) []Cost {
	if st.forwarded || st.req == nil {
		return dst
	}
	for _, a := range st.attempts {
		u := a.usage
		c := Cost{Provider: a.p.name, Model: a.model, Output: u.Output, CacheRead: u.CacheRead, CacheWrite: u.CacheWrite}
		if u.Model != "" {
			c.Model = u.Model
		}
		c.Input = u.Input
		if st.dialect.CachedInInput() {
			c.Input = max(u.Input-u.CacheRead, 0)
		}
		c.Purpose = purposeOf(st, a)
		switch c.Purpose {
		case PurposeHedge:
			if a.firstEvent == 0 {
				// Cancelled before its first output: the output count its
				// first event may carry (Anthropic's message_start says 1)
				// is nothing generated.
				c.Output = 0
			}
			if u.Input == 0 && u.CacheRead == 0 && u.CacheWrite == 0 {
				// Cancelled before its provider said: the prompt was sent
				// and read all the same.
				c.Input, c.Estimated = int64(len(st.req.Body)/4), true
			}
		}
		if c.Input == 0 && c.Output == 0 && c.CacheRead == 0 && c.CacheWrite == 0 {
			continue
		}
		dst = append(dst, c)
	}
	return dst
}

// Chain is the decision chain in time order: attempts and the candidates
// skipped (cooling down, busy) where they happened.
func (rep *Report) Chain() []ChainEntry { return rep.st.chain() }

func (st *requestState) chain() []ChainEntry {
	out := make([]ChainEntry, 0, len(st.attempts)+len(st.skips))
	out = append(out, st.skips...)
	for _, a := range st.attempts {
		e := ChainEntry{Provider: a.p.name, OffsetMs: a.offset.Milliseconds(), Event: a.reason, Outcome: a.outcome, Status: a.status}
		if a.class != wire.ClassNone && a.class != wire.ClassLoser {
			e.Class = string(a.class)
			e.Error = loggedError(a.p, a.err)
		}
		if a.firstEvent > 0 { // reached its first valid event: the winner, or a loser that tied
			e.FirstEventMs = max(a.firstEvent.Milliseconds(), 1)
		}
		if a.n == 1 && st.route.pick != nil && st.route.tier > 1 {
			e.Route = st.route.view() // why the request's first attempt went where it did
		}
		out = append(out, e)
	}
	if len(st.skips) > 0 {
		slices.SortStableFunc(out, func(a, b ChainEntry) int { return cmp.Compare(a.OffsetMs, b.OffsetMs) })
	}
	return out
}

// finish reports what the request did: the dashboard, the spans, then
// the Observer (metrics, placeholders, the log line).
func finish(st *requestState) {
	h := st.h
	if st.discover != nil {
		endDiscovery(st, nil, st.fatal != nil && st.fatal.class == wire.ClassObjectMissing)
	}
	if st.outcome == "" {
		st.outcome = OutcomeExhausted
	}
	// A committed request's outcome is commit's, from the relay: a client
	// that hung up after reading an error event did not abort.
	if st.winner == nil && st.r.Context().Err() != nil && st.outcome != OutcomeSuccess {
		st.outcome = OutcomeClientAbort
		if st.status != http.StatusOK {
			st.status = StatusClientClosed // nothing reached the client
		}
	}
	total := time.Since(st.start)
	rep := &st.report
	*rep = Report{Request: st.r, Dialect: st.dialectName(), Outcome: st.outcome, Status: st.status, Total: total,
		Hedged: st.hedged, Attempts: len(st.attempts), FallbackModel: st.fallbackModel, StreamEnd: st.relay.Reason,
		DroppedMalformed: st.relay.Dropped, Forwarded: st.forwarded, Refused: st.refused, st: st}
	w := st.winner
	if w != nil {
		rep.WinnerUsage = w.usage
		rep.Usage = w.usage
		rep.Provider = w.p.name
		rep.FirstEvent = w.firstEvent
		rep.FirstEventMs = max(w.firstEvent.Milliseconds(), 1)
		rep.CommittedBy = w.commitBy
		recordWinnerEnd(w)
		// A winner whose stream broke after the commit failed, as its
		// breaker, the dashboard and the trace already say.
		rep.WinnerResult = "won"
		if w.outcome == "stream_error" && !st.forwarded {
			rep.WinnerResult = "failed_" + string(w.class)
		}
		if w.xl != nil {
			rep.Translated = st.dialect.String() + "->" + w.xl.target.String()
			if w.xlReq != nil {
				rep.TranslationDropped = translate.Describe(w.xlReq.Losses, false)
			}
		}
	}
	if ru := st.resumeUsage; ru != nil {
		// A continued stream: the usage its client was told.
		rep.Usage.Input, rep.Usage.Output = ru.Input, ru.Output
	}
	if st.req != nil {
		rep.Model = st.req.Model
	}
	rep.Served = rep.Usage.Model
	if rep.Served == "" && w != nil {
		rep.Served = w.model
	}
	rep.Costs = costs(st, st.costBuf[:0])
	if h.board != nil {
		recordDashboard(st, st.start.Add(total), total, rep.Model, rep.Provider, rep.FirstEventMs, rep.Usage)
	}
	traceAttempts(st, st.start.Add(total))
	h.obs.Finished(rep)
	if check := bookkeepingDone.Load(); check != nil {
		(*check)(st)
	}
}

// recordDashboard adds a finished request to the board: names, counts and
// durations only, never a prompt, an answer, a key or a client address.
func recordDashboard(st *requestState, now time.Time, total time.Duration, model, provider string, firstMs int64, u wire.Usage) {
	h := st.h
	var chain [dashboard.MaxAttempts]dashboard.Attempt
	n := 0
	for _, a := range st.attempts {
		end := a.offset + a.elapsed
		if a == st.winner || end <= a.offset {
			end = total // a winner lasts the whole stream; one not yet reported ended with the request
		}
		h.board.Series.RecordAttemptEvents(a.p.name, now, dashboard.ClassifyOutcome(a.outcome), a.firstEvent, dashboard.ClassifyEvents(a.reason, a.outcome))
		if n == len(chain) {
			continue
		}
		c := dashboard.Attempt{
			Provider: a.p.name, Reason: a.reason, Outcome: a.outcome, Status: a.status,
			StartMs: a.offset.Milliseconds(), EndMs: end.Milliseconds(),
		}
		if a.class != wire.ClassNone && a.class != wire.ClassLoser {
			c.Class = string(a.class)
		}
		if a.firstEvent > 0 {
			c.FirstEventMs = max(a.firstEvent.Milliseconds(), 1)
		}
		chain[n] = c
		n++
	}
	h.board.RecordRequest(dashboard.Request{
		Time: now, Site: st.r.Host, Dialect: st.dialectName(), Model: model, Provider: provider,
		Attempts: len(st.attempts), Hedged: st.hedged, Outcome: st.outcome, FirstEventMs: firstMs,
		TotalMs: total.Milliseconds(), InputTokens: u.Input, OutputTokens: u.Output,
		Translated: st.winner != nil && st.winner.xl != nil,
	}, chain[:n])
}
