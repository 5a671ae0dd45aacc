package engine

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/health"
	"github.com/llmhedge/caddy-llm-hedge/internal/stream"
	"github.com/llmhedge/caddy-llm-hedge/internal/translate"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// requestState is everything one completion request decided and observed:
// its attempts, the winner, the outcome. It feeds the log line, the
// metrics and the placeholders.
type requestState struct {
	h       *Engine
	r       *http.Request
	dialect wire.Dialect
	start   time.Time
	ctx     context.Context
	// inlineFirst: the race's first attempt may run on the request's own
	// goroutine (launch), when nothing could start beside it; hedging says
	// whether a hedge could.
	inlineFirst, hedging bool
	// The other flags sit beside them: a committed stream keeps this
	// struct, and one field of padding per flag took it past a size class.
	hedged             bool
	rateLimited        bool // launchProbe: an open candidate was skipped for its 429's Retry-After
	forwarded          bool // not a completion: models, token counts, forward globs
	dialectGuessed     bool // dialect is the fallback for a path no dialect claims: its error shape, not its name (dialectName)
	budgetFailoverUsed bool
	live               int32 // attempts running
	// contextFellBack is the number of attempts made before the one
	// context_fallback started (0: none yet); it happens once.
	contextFellBack int32
	req             *wire.Request
	lease           *bodyLease // req.Body's pooled buffer, released at the end (bodylease.go)

	plan          *plan
	route         routeDecision // what the first tier's lb_policy chose (routing.go)
	done          chan *attempt
	attempts      []*attempt
	skips         []ChainEntry
	winner        *attempt
	outcome       string
	status        int
	recoverAt     time.Time
	fellBack      map[string]bool
	fallbackModel string
	relay         stream.RelayResult
	fatal         *attempt // a request-level error that ended the race
	refused       string

	xlRefused   []translate.Loss     // what the candidates skipped for a material loss could not carry
	xlRefusedBy []*provider          // those candidates
	failback    *wire.Request        // the request for native Anthropic providers after a translated turn (translate.go)
	failbackOf  *wire.Request        // the request failback stands for
	xlDone      map[*provider]xlDone // translations made at launch, reused by later attempts

	// quota: the request's token estimate (-1 until needed), the
	// providers skipped for their keys' quota and the earliest reset.
	quotaEst     int64
	quotaSkipped []*provider
	quotaUntil   int64

	// pinned is the remembered holder of an object the request names
	// (previous_response_id, a file...): the first candidate, the others
	// asked only once it failed (responses_owner.go); pinRef names the
	// object.
	pinned *provider
	pinRef wire.ObjectRef
	// discover is the discovery of a previous_response_id or path id
	// this instance does not know (objects.go), or nil.
	discover *discovery

	// continuation (resume.go): the strategy of the race running now
	// ("" for the request's own), the providers whose stream broke after
	// commit, and the usage the client was told when a splice completed.
	resuming    string
	broke       []*provider
	resumeUsage *wire.Usage

	report  Report  // what finish reports
	costBuf [4]Cost // its Costs, without an allocation for up to four attempts
}

// dialectName names the client's dialect in the log line, the placeholder
// and the dashboard: empty for a path no dialect claims.
func (st *requestState) dialectName() string {
	if st.dialectGuessed {
		return ""
	}
	return st.dialect.String()
}

func newRequestState(h *Engine, r *http.Request, d wire.Dialect) *requestState {
	return &requestState{h: h, r: r, dialect: d, start: time.Now(), ctx: r.Context(), quotaEst: -1}
}

// attemptsLeft counts the attempts the request may still start: a
// discovery's not-found answers do not count.
func (st *requestState) attemptsLeft() int {
	n := st.h.Retry.Attempts - len(st.attempts)
	if st.discover != nil {
		n += st.discover.misses
	}
	return n
}

func (st *requestState) liveVendor(vendor string) bool {
	for _, a := range st.attempts {
		if a.outcome == "" && a.p.vendor == vendor {
			return true
		}
	}
	return false
}

func (st *requestState) skip(p *provider, event string) {
	for _, s := range st.skips {
		if s.Provider == p.name && s.Event == event {
			return
		}
	}
	st.skips = append(st.skips, ChainEntry{Provider: p.name, OffsetMs: msSince(st.start), Event: event})
}

// inputEstimate is the request's input tokens as the hedge budget and
// the large-prompt rule weigh it: its body's bytes / 4, as the quota
// check reads it.
func (st *requestState) inputEstimate() int64 {
	if st.req == nil {
		return 1
	}
	return max(int64(len(st.req.Body)/4), 1)
}

// quotaEstimate is the request's token estimate for the quota check,
// computed once, when a provider with keys first needs it.
func (st *requestState) quotaEstimate() int64 {
	if st.quotaEst < 0 {
		st.quotaEst = health.QuotaEstimateIn(st.req.Body, &st.req.Top)
	}
	return st.quotaEst
}

// noteQuotaSkip records p as out of quota until until; it reports whether
// p is newly skipped in this request.
func (st *requestState) noteQuotaSkip(p *provider, until int64) bool {
	if st.quotaUntil == 0 || until < st.quotaUntil {
		st.quotaUntil = until
	}
	for _, q := range st.quotaSkipped {
		if q == p {
			return false
		}
	}
	st.quotaSkipped = append(st.quotaSkipped, p)
	return true
}

// outOfQuota reports whether every candidate was skipped for its keys'
// quota and none was tried: the client is told to come back at the
// earliest reset (429), not that the providers failed.
func (st *requestState) outOfQuota() bool {
	if len(st.attempts) > 0 || st.plan == nil || len(st.plan.cands) == 0 {
		return false
	}
	for _, p := range st.plan.cands {
		found := false
		for _, q := range st.quotaSkipped {
			found = found || q == p
		}
		if !found {
			return false
		}
	}
	return true
}

// win marks the winner: every other live attempt is cancelled at once, so
// its provider sees the connection close and stops generating.
func (st *requestState) win(a *attempt) {
	if st.resuming != "" {
		// A continuation: the committed stream keeps its winner.
		a.outcome = "resume_" + st.resuming
		recordWin(st, a, clock())
		st.cancelLive(wire.ErrHedgeLost)
		return
	}
	st.winner = a
	// A winner of a race (a hedge, or another attempt still running) is
	// the hedge_winner; a failover that simply worked is a request_success.
	if st.hedged || st.live > 0 {
		a.outcome = "hedge_winner"
	} else {
		a.outcome = "request_success"
	}
	now := clock()
	recordWin(st, a, now)
	st.cancelLive(wire.ErrHedgeLost)
	st.rememberResponse(a)
	if st.discover != nil {
		endDiscovery(st, a.p, false)
	}
	if st.h.affinity != nil && st.req.SessionKey != "" {
		st.h.affinity.Put(st.req.SessionKey, a.p.name, now)
	}
}

// cancelLive cancels every attempt still running (not the winner).
func (st *requestState) cancelLive(cause error) {
	for _, a := range st.attempts {
		if a != st.winner && a.outcome == "" && a.cancel != nil {
			a.cancel(cause)
		}
	}
}

// drain waits for every cancelled attempt to report and settles it. They
// were cancelled, so this is quick; it guarantees no attempt goroutine
// outlives the request.
func (st *requestState) drain() {
	for st.live > 0 {
		a := <-st.done
		st.live--
		if a.ok() { // ready at the same moment as the winner: a loser all the same
			a.class = wire.ClassLoser
			if a.resp != nil {
				a.resp.Body.Close()
			}
		}
		settle(st, a)
	}
}

// lastFailure is the most recent attempt that failed for a reason worth
// telling the client (not a cancelled loser).
func (st *requestState) lastFailure() *attempt {
	if st.fatal != nil {
		return st.fatal // the request-level error that ended the race
	}
	for i := len(st.attempts) - 1; i >= 0; i-- {
		a := st.attempts[i]
		if a.err != nil && a.class != wire.ClassLoser {
			return a
		}
	}
	return nil
}

// agreedStatus returns the 4xx every failed attempt answered with (the
// truth: e.g. every provider rate-limited the request), else 0.
func (st *requestState) agreedStatus() int {
	status := 0
	for _, a := range st.attempts {
		if a.class == wire.ClassLoser || a.class == wire.ClassClientAbort {
			continue
		}
		s := failedStatus(a)
		if s < 400 || s >= 500 || (status != 0 && s != status) {
			return 0
		}
		status = s
	}
	return status
}

// failedStatus is the status a failed attempt stands for: its own, unless
// a cloud classed it otherwise (cloud.Verdict, or an exception frame in a
// 200 stream: a throttlingException is a 429): a Bedrock 424
// ModelErrorException is the model's failure (none: 503), a 400
// ServiceQuotaExceededException a rate limit (429), a Vertex 400 about a
// model the project may not use a missing model (404). A provider's
// failure (a 5xx class) agrees on no 4xx: a 408 is no client error here.
func failedStatus(a *attempt) int {
	switch {
	case a.class == wire.ClassStatus5xx || a.class == wire.ClassOverloaded:
		return 0 // the provider's failure, a 408 (Bedrock's ModelTimeoutException) too
	case a.class == wire.ClassifyStatus(a.status):
		return a.status
	case a.class == wire.ClassRateLimited:
		return http.StatusTooManyRequests
	case a.class == wire.ClassModelNotFound:
		return http.StatusNotFound
	}
	return a.status
}

func (st *requestState) timedOut() bool {
	return errors.Is(context.Cause(st.ctx), wire.ErrTotalTimeout)
}

// recoverBy notes that a skipped candidate recovers at until (zero: it
// will not by itself): recoverAt is the earliest such time.
func (st *requestState) recoverBy(until time.Time) {
	if !until.IsZero() && (st.recoverAt.IsZero() || until.Before(st.recoverAt)) {
		st.recoverAt = until
	}
}

// refuse answers a request the proxy rejects itself (bad body, too large).
func (st *requestState) refuse(w http.ResponseWriter, status int, msg string) {
	st.outcome, st.status, st.refused = OutcomeClientError, status, msg
	if st.r.ProtoMajor == 1 && strings.EqualFold(st.r.Header.Get("Expect"), "100-continue") {
		// The client may still be waiting for 100 Continue before it
		// sends its body. net/http closes such a connection itself, but
		// behind Caddy's read_body_idle reader it cannot tell, and would
		// first wait for the unsent body to drain it: until that timeout.
		w.Header().Set("Connection", "close")
	}
	wire.WriteError(w, st.dialect, status, msg)
}

func msSince(t time.Time) int64 { return time.Since(t).Milliseconds() }

// probed reports whether one of the request's attempts was a breaker probe.
func (st *requestState) probed() bool {
	for _, a := range st.attempts {
		if a.probe {
			return true
		}
	}
	return false
}

// liveOn reports whether an attempt on p is still running.
func (st *requestState) liveOn(p *provider) bool {
	for _, a := range st.attempts {
		if a.p == p && a.outcome == "" && a != st.winner {
			return true
		}
	}
	return false
}

// requestContext bounds the whole request by timeouts.total while keeping
// it tied to the client's connection, never to the module. A client
// deadline (X-Stainless-Timeout) lowers the bound for this request: the
// proxy never works for a client that has given up.
func (h *Engine) requestContext(r *http.Request) (context.Context, context.CancelFunc) {
	total := time.Duration(h.Timeouts.Total)
	if d, ok := clientDeadline(r.Header); ok && d < total {
		total = d
	}
	// One cancellable layer carries all three ends (the client's, the
	// process's exit, timeouts.total) and their causes: a committed
	// stream holds each layer for its whole life.
	ctx, cancel := context.WithCancelCause(r.Context())
	timer := time.AfterFunc(total, func() { cancel(wire.ErrTotalTimeout) })
	exit := h.exit
	if exit == nil { // an Engine a test built by hand
		exit = context.Background()
	}
	stop := context.AfterFunc(exit, func() { cancel(wire.ErrShutdown) })
	deadline := time.Now().Add(total)
	if d, ok := r.Context().Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	return deadlineCtx{ctx, deadline}, func() {
		timer.Stop()
		stop()
		cancel(nil)
	}
}

// deadlineCtx is the request's context as context.WithTimeoutCause would
// make it, for one its own timer cancels: it reports the deadline (the
// retry policy reads it), and context.DeadlineExceeded once timeouts.total
// ended it (a stream cut then is total_timeout, not client_gone). Contexts
// made from it before then report context.Canceled with the same cause,
// wire.ErrTotalTimeout: read the cause, never Err, on those.
type deadlineCtx struct {
	context.Context
	deadline time.Time
}

func (c deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }

func (c deadlineCtx) Err() error {
	err := c.Context.Err()
	if err != nil && context.Cause(c.Context) == wire.ErrTotalTimeout {
		return context.DeadlineExceeded
	}
	return err
}

// clientDeadline reads X-Stainless-Timeout, the request timeout in seconds
// that the official SDKs and Claude Code send. Anything but a positive,
// finite number is ignored.
func clientDeadline(h http.Header) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("X-Stainless-Timeout"))
	if v == "" {
		return 0, false
	}
	secs, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(secs) || secs <= 0 || secs > maxClientDeadline.Seconds() {
		return 0, false
	}
	return time.Duration(secs * float64(time.Second)), true
}
