package llmhedge

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// chainEntry is one step of the request's decision chain in the log.
type chainEntry struct {
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
	Route        *routeDecision
}

func (c chainEntry) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	if c.Provider != "" {
		enc.AddString("provider", c.Provider)
	}
	enc.AddInt64("offset_ms", c.OffsetMs)
	enc.AddString("event", c.Event)
	if c.Outcome != "" {
		enc.AddString("outcome", c.Outcome)
	}
	if c.Status != 0 {
		enc.AddInt("status", c.Status)
	}
	if c.Class != "" {
		enc.AddString("error_class", c.Class)
	}
	if c.Error != "" {
		enc.AddString("error", c.Error)
	}
	if c.FirstEventMs > 0 {
		enc.AddInt64("first_event_ms", c.FirstEventMs)
	}
	if c.Route != nil {
		if err := enc.AddObject("route", c.Route); err != nil {
			return err
		}
	}
	if c.Event == "resume" {
		if c.Strategy != "" {
			enc.AddString("strategy", c.Strategy)
		}
		enc.AddInt("delivered_chars", c.Delivered)
	}
	return nil
}

type chain []chainEntry

func (c chain) MarshalLogArray(enc zapcore.ArrayEncoder) error {
	for _, e := range c {
		if err := enc.AppendObject(e); err != nil {
			return err
		}
	}
	return nil
}

// chain is the decision chain in time order: attempts and the candidates
// skipped (cooling down, busy) where they happened.
func (st *requestState) chain() chain {
	out := make(chain, 0, len(st.attempts)+len(st.skips))
	out = append(out, st.skips...)
	for _, a := range st.attempts {
		e := chainEntry{Provider: a.p.name, OffsetMs: a.offset.Milliseconds(), Event: a.reason, Outcome: a.outcome, Status: a.status}
		if a.class != wire.ClassNone && a.class != wire.ClassLoser {
			e.Class = string(a.class)
			e.Error = loggedError(a.p, a.err)
		}
		if a.firstEvent > 0 { // reached its first valid event: the winner, or a loser that tied
			e.FirstEventMs = max(a.firstEvent.Milliseconds(), 1)
		}
		if a.n == 1 && st.route.pick != nil && st.route.tier > 1 {
			e.Route = &st.route // why the request's first attempt went where it did
		}
		out = append(out, e)
	}
	if len(st.skips) > 0 {
		slices.SortStableFunc(out, func(a, b chainEntry) int { return cmp.Compare(a.OffsetMs, b.OffsetMs) })
	}
	return out
}

// finish publishes what the request did: placeholders for the access log,
// metrics, and one log line at the level requestLogLevel gives it.
func (h *Handler) finish(st *requestState) {
	if st.discover != nil {
		h.endDiscovery(st, nil, st.fatal != nil && st.fatal.class == wire.ClassObjectMissing)
	}
	if st.outcome == "" {
		st.outcome = outcomeExhausted
	}
	// A committed request's outcome is commit's, from the relay: a client
	// that hung up after reading an error event did not abort.
	if st.winner == nil && st.r.Context().Err() != nil && st.outcome != outcomeSuccess {
		st.outcome = outcomeClientAbort
		if st.status != http.StatusOK {
			st.status = statusClientClosed // nothing reached the client
		}
	}
	total := time.Since(st.start)
	w := st.winner
	var u wire.Usage
	provider, firstMs := "", int64(0)
	if w != nil {
		u = w.usage
		provider = w.p.name
		firstMs = max(w.firstEvent.Milliseconds(), 1)
		recordWinnerEnd(w)
		if st.forwarded {
			// not a completion: its time to headers is no first event
			h.metrics.attempt(provider, "won")
		} else {
			// A winner whose stream broke after the commit failed, as its
			// breaker, the dashboard and the trace already say.
			res := "won"
			if w.outcome == "stream_error" {
				res = "failed_" + string(w.class)
			}
			h.metrics.won(provider, res, w.firstEvent.Seconds(), &u)
		}
	}
	if ru := st.resumeUsage; ru != nil {
		// A continued stream: the usage its client was told.
		u.Input, u.Output = ru.Input, ru.Output
	}
	h.metrics.request(st.outcome)
	if check := bookkeepingDone.Load(); check != nil {
		(*check)(st)
	}

	model := ""
	if st.req != nil {
		model = st.req.Model
	}
	served := u.Model
	if served == "" && w != nil {
		served = w.model
	}
	af := &accessFields{provider, served, st.dialectName(), len(st.attempts), st.hedged, st.outcome, firstMs, u.Input, u.Output}
	if repl, ok := st.r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		publishPlaceholders(st.r.Context(), repl, af)
	}
	if extra, ok := st.r.Context().Value(caddyhttp.ExtraLogFieldsCtxKey).(*caddyhttp.ExtraLogFields); ok {
		// Set, not Add: a request that passes through the handler twice
		// (an internal rewrite) must not log two llm_hedge objects.
		extra.Set(zap.Object("llm_hedge", af))
	}

	recordDashboard(st, st.start.Add(total), total, model, provider, firstMs, u)
	traceAttempts(st, st.start.Add(total))

	// The fields are built only when the line will be written.
	lvl := requestLogLevel(st)
	if !h.logger.Core().Enabled(lvl) {
		return
	}
	fields := []zap.Field{
		zap.String("dialect", st.dialectName()),
		zap.String("model", model),
		zap.String("served_model", served),
		zap.String("provider", provider),
		zap.String("outcome", st.outcome),
		zap.Int("status", st.status),
		zap.Int64("total_ms", total.Milliseconds()),
		zap.Int64("first_event_ms", firstMs),
		zap.Bool("hedged", st.hedged),
		zap.Array("chain", st.chain()),
		zap.Int64("input_tokens", u.Input),
		zap.Int64("output_tokens", u.Output),
		zap.Int64("cache_read_tokens", u.CacheRead),
		zap.Int64("cache_write_tokens", u.CacheWrite),
	}
	if st.fallbackModel != "" {
		fields = append(fields, zap.String("fallback_model", st.fallbackModel))
	}
	if st.relay.Reason != "" {
		fields = append(fields, zap.String("stream_end", st.relay.Reason))
	}
	if w != nil && w.commitBy != "" {
		fields = append(fields, zap.String("committed_by", w.commitBy))
	}
	if w != nil && w.xl != nil {
		fields = append(fields, translationFields(st, w)...)
	}
	if st.relay.Dropped > 0 {
		fields = append(fields, zap.Int("dropped_malformed", st.relay.Dropped))
	}
	if st.forwarded {
		p := st.r.URL.EscapedPath() // control characters stay escaped
		if len(p) > maxLoggedPath {
			p = p[:maxLoggedPath] + "..."
		}
		fields = append(fields, zap.String("method", st.r.Method), zap.String("path", p))
	}
	if st.refused != "" {
		fields = append(fields, zap.String("refused", st.refused))
	}
	h.logger.Log(lvl, "llm request", fields...)
}

// requestLogLevel is the level of a request's log line: warn when the
// gateway failed its client (an operator filtering at warn sees every
// outage), debug when a single attempt simply worked (a healthy proxy is
// quiet), info for the rest: a success that took a hedge, a retry or a
// failover, a client's own error, a client that left.
func requestLogLevel(st *requestState) zapcore.Level {
	switch st.outcome {
	case outcomeExhausted, outcomeTimeout, outcomeStreamError, outcomeUpstreamError:
		return zapcore.WarnLevel
	case outcomeSuccess:
		if len(st.attempts) == 1 {
			return zapcore.DebugLevel
		}
	}
	return zapcore.InfoLevel
}

// maxLoggedPath bounds the path of a forwarded call in its log line.
const maxLoggedPath = 512

// statusClientClosed is nginx's "client closed request", logged for a
// request whose client left before anything was committed.
const statusClientClosed = 499

// accessFields is what the module adds to Caddy's access log entry, and
// what its placeholders answer.
type accessFields struct {
	provider, model, dialect string
	attempts                 int
	hedged                   bool
	outcome                  string
	firstByteMs              int64
	in, out                  int64
}

// placeholderSelf names the request's accessFields among its placeholders,
// and varSelf in its vars, so a second pass through the handler updates
// them in place.
const (
	placeholderSelf = "http.llm_hedge.\x00fields"
	varSelf         = "llm_hedge\x00fields"
)

// publishPlaceholders makes {http.llm_hedge.*} answer from f. One lookup
// function, read only when a placeholder is used (log_append, a header),
// costs less than nine values set in the replacer's map on every request.
// A request that passes through the handler again reads the last pass's:
// the request's vars say whether one did (asking the replacer asks every
// provider of a request's placeholders, about a microsecond).
func publishPlaceholders(ctx context.Context, repl *caddy.Replacer, f *accessFields) {
	if vars, ok := ctx.Value(caddyhttp.VarsCtxKey).(map[string]any); ok {
		if prev, ok := vars[varSelf].(*accessFields); ok {
			*prev = *f
			return
		}
		vars[varSelf] = f
		repl.Map(f.placeholder)
		return
	}
	if cur, ok := repl.Get(placeholderSelf); ok {
		if prev, ok := cur.(*accessFields); ok {
			*prev = *f
			return
		}
	}
	repl.Map(f.placeholder)
}

func (f *accessFields) placeholder(key string) (any, bool) {
	name, ok := strings.CutPrefix(key, "http.llm_hedge.")
	if !ok {
		return nil, false
	}
	switch name {
	case "provider":
		return f.provider, true
	case "dialect":
		return f.dialect, true
	case "model":
		return f.model, true
	case "attempts":
		return f.attempts, true
	case "hedged":
		return f.hedged, true
	case "outcome":
		return f.outcome, true
	case "first_byte_ms":
		return f.firstByteMs, true
	case "input_tokens":
		return f.in, true
	case "output_tokens":
		return f.out, true
	case placeholderSelf[len("http.llm_hedge."):]:
		return f, true
	}
	return nil, false
}

func (f *accessFields) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("provider", f.provider)
	enc.AddString("model", f.model)
	enc.AddInt("attempts", f.attempts)
	enc.AddBool("hedged", f.hedged)
	enc.AddString("outcome", f.outcome)
	enc.AddInt64("first_byte_ms", f.firstByteMs)
	enc.AddInt64("input_tokens", f.in)
	enc.AddInt64("output_tokens", f.out)
	return nil
}
