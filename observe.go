package llmhedge

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/llmhedge/caddy-llm-hedge/internal/engine"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// observer is the Caddy layer's engine.Observer: the engine's events go
// to the metrics, its transitions and each request's report to the log,
// the report also to the placeholders and Caddy's access log entry.
type observer struct {
	logger  *zap.Logger
	metrics *handlerMetrics // nil: none (an admin reset)
	prices  *prices         // nil: none configured
}

func (o *observer) Attempt(provider, result string) { o.metrics.attempt(provider, result) }
func (o *observer) HedgeLaunched(provider string)   { o.metrics.hedgeLaunched(provider) }
func (o *observer) Retry(provider, reason string)   { o.metrics.retry(provider, reason) }
func (o *observer) BudgetExhausted(kind string)     { o.metrics.budgetExhausted(kind) }
func (o *observer) Resumed(outcome string)          { o.metrics.resumed(outcome) }
func (o *observer) RoutePick(provider, why string)  { o.metrics.routePick(provider, why) }
func (o *observer) QuotaSkip(provider string)       { o.metrics.quotaSkip(provider) }
func (o *observer) Discovered(outcome string)       { o.metrics.discovered(outcome) }
func (o *observer) Translation(provider, client, result string) {
	o.metrics.translation(provider, client, result)
}
func (o *observer) Continuation(provider string, u *wire.Usage) { o.metrics.continuation(provider, u) }

// Messages of the transition lines: static, as Caddy's own, so that a log
// pipeline can match them.
const (
	msgBreakerOpened = "provider breaker opened"
	msgBreakerClosed = "provider breaker closed"
	msgBreakerReset  = "provider breaker reset"
	msgKeyDisabled   = "provider key disabled"
	msgKeyReenabled  = "provider key re-enabled"
)

// Transition writes the line of a provider's state change: once per
// transition, not per request (the health code reports a transition only
// to the caller whose compare-and-swap made it, so requests failing
// together on one provider write one line).
func (o *observer) Transition(t engine.Transition) {
	board.RecordTransition(engine.Now(), t.Kind, t.Provider, transitionDetail(t))
	if o.logger == nil {
		return
	}
	switch t.Kind {
	case engine.BreakerOpened:
		o.logger.Warn(msgBreakerOpened,
			zap.String("provider", t.Provider),
			zap.String("url", t.URL),
			zap.Int64("consecutive_failures", t.Consecutive),
			zap.String("open_until", viewTime(t.OpenUntil)),
			zap.Duration("open_for", t.OpenFor),
			zap.Bool("probe_failed", t.Probe),
			zap.String("error_class", t.Class),
			zap.String("error", t.Error))
	case engine.BreakerClosed:
		o.logger.Info(msgBreakerClosed, zap.String("provider", t.Provider), zap.String("url", t.URL))
	case engine.BreakerReset:
		o.logger.Info(msgBreakerReset, zap.String("provider", t.Provider), zap.String("url", t.URL), zap.String("was", t.Was))
	case engine.KeyDisabled:
		o.logger.Warn(msgKeyDisabled,
			zap.String("provider", t.Provider),
			zap.String("key", t.Key),
			zap.Int("status", t.Status),
			zap.String("error_class", t.Class),
			zap.String("error", t.Error))
	case engine.KeyReenabled:
		o.logger.Info(msgKeyReenabled, zap.String("provider", t.Provider), zap.String("key", t.Key), zap.String("reason", t.Reason))
	}
}

// Finished publishes what the request did: metrics, placeholders for the
// access log, and one log line at the level requestLogLevel gives it.
func (o *observer) Finished(rep *engine.Report) {
	if rep.Provider != "" {
		if rep.Forwarded {
			// not a completion: its time to headers is no first event
			o.metrics.attempt(rep.Provider, "won")
		} else {
			o.metrics.won(rep.Provider, rep.WinnerResult, rep.FirstEvent.Seconds(), &rep.WinnerUsage)
		}
	}
	o.metrics.request(rep.Outcome)
	spend, overhead, priced := o.spend(rep)
	if priced {
		board.RecordSpend(engine.Now(), spend-overhead, overhead)
	}
	u := rep.Usage
	r := rep.Request
	af := &accessFields{rep.Provider, rep.Served, rep.Dialect, rep.Attempts, rep.Hedged, rep.Outcome, rep.FirstEventMs, u.Input, u.Output}
	if repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		publishPlaceholders(r.Context(), repl, af)
	}
	if extra, ok := r.Context().Value(caddyhttp.ExtraLogFieldsCtxKey).(*caddyhttp.ExtraLogFields); ok {
		// Set, not Add: a request that passes through the handler twice
		// (an internal rewrite) must not log two llm_hedge objects.
		extra.Set(zap.Object("llm_hedge", af))
	}

	// The fields are built only when the line will be written.
	lvl := requestLogLevel(rep)
	if !o.logger.Core().Enabled(lvl) {
		return
	}
	fields := []zap.Field{
		zap.String("dialect", rep.Dialect),
		zap.String("model", rep.Model),
		zap.String("served_model", rep.Served),
		zap.String("provider", rep.Provider),
		zap.String("outcome", rep.Outcome),
		zap.Int("status", rep.Status),
		zap.Int64("total_ms", rep.Total.Milliseconds()),
		zap.Int64("first_event_ms", rep.FirstEventMs),
		zap.Bool("hedged", rep.Hedged),
		zap.Array("chain", chain(rep.Chain())),
		zap.Int64("input_tokens", u.Input),
		zap.Int64("output_tokens", u.Output),
		zap.Int64("cache_read_tokens", u.CacheRead),
		zap.Int64("cache_write_tokens", u.CacheWrite),
	}
	if priced {
		fields = append(fields, zap.Float64("spend_usd", roundUSD(spend)), zap.Float64("overhead_usd", roundUSD(overhead)))
	}
	if rep.FallbackModel != "" {
		fields = append(fields, zap.String("fallback_model", rep.FallbackModel))
	}
	if rep.StreamEnd != "" {
		fields = append(fields, zap.String("stream_end", rep.StreamEnd))
	}
	if rep.CommittedBy != "" {
		fields = append(fields, zap.String("committed_by", rep.CommittedBy))
	}
	if rep.Translated != "" {
		fields = append(fields, zap.String("translated", rep.Translated))
		if rep.TranslationDropped != "" {
			fields = append(fields, zap.String("translation_dropped", rep.TranslationDropped))
		}
	}
	if rep.DroppedMalformed > 0 {
		fields = append(fields, zap.Int("dropped_malformed", rep.DroppedMalformed))
	}
	if rep.Forwarded {
		p := r.URL.EscapedPath() // control characters stay escaped
		if len(p) > maxLoggedPath {
			p = p[:maxLoggedPath] + "..."
		}
		fields = append(fields, zap.String("method", r.Method), zap.String("path", p))
	}
	if rep.Refused != "" {
		fields = append(fields, zap.String("refused", rep.Refused))
	}
	o.logger.Log(lvl, "llm request", fields...)
}

// chain is the decision chain as the log line writes it.
type chain []engine.ChainEntry

func (c chain) MarshalLogArray(enc zapcore.ArrayEncoder) error {
	for _, e := range c {
		if err := enc.AppendObject(chainEntry(e)); err != nil {
			return err
		}
	}
	return nil
}

type chainEntry engine.ChainEntry

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
		if err := enc.AddObject("route", (*route)(c.Route)); err != nil {
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

// route writes the routing decision on the chain entry of the request's
// first attempt.
type route engine.Route

func (d *route) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("policy", d.Policy)
	enc.AddString("pick", d.Pick)
	enc.AddString("reason", d.Reason)
	if d.CostMs > 0 {
		enc.AddFloat64("cost_ms", d.CostMs)
	}
	if d.FirstEventEstMs > 0 {
		enc.AddFloat64("first_event_est_ms", d.FirstEventEstMs)
	}
	if d.LeastCost != "" {
		enc.AddString("least_cost", d.LeastCost)
		enc.AddFloat64("least_cost_ms", d.LeastCostMs)
	}
	if d.MovedFrom != "" {
		enc.AddString("moved_from", d.MovedFrom)
		enc.AddFloat64("moved_from_est_ms", d.MovedFromEstMs)
		if d.FastestEstMs > 0 {
			enc.AddFloat64("fastest_est_ms", d.FastestEstMs)
		}
	}
	return nil
}

// requestLogLevel is the level of a request's log line: warn when the
// gateway failed its client (an operator filtering at warn sees every
// outage), debug when a single attempt simply worked (a healthy proxy is
// quiet), info for the rest: a success that took a hedge, a retry or a
// failover, a client's own error, a client that left.
func requestLogLevel(rep *engine.Report) zapcore.Level {
	switch rep.Outcome {
	case engine.OutcomeExhausted, engine.OutcomeTimeout, engine.OutcomeStreamError, engine.OutcomeUpstreamError:
		return zapcore.WarnLevel
	case engine.OutcomeSuccess:
		if rep.Attempts == 1 {
			return zapcore.DebugLevel
		}
	}
	return zapcore.InfoLevel
}

// maxLoggedPath bounds the path of a forwarded call in its log line.
const maxLoggedPath = 512

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

// roundUSD rounds dollars to a millionth, for the log line.
func roundUSD(v float64) float64 { return math.Round(v*1e6) / 1e6 }

// transitionDetail is a transition as the dashboard's feed shows it: what
// happened in a few words, never a key (only its fingerprint) or an error
// body.
func transitionDetail(t engine.Transition) string {
	switch t.Kind {
	case engine.BreakerOpened:
		return fmt.Sprintf("%s: %d failures, open %s", t.Class, t.Consecutive, t.OpenFor.Round(time.Second))
	case engine.BreakerReset:
		return "reset by an operator (was " + t.Was + ")"
	case engine.KeyDisabled:
		return fmt.Sprintf("key %s: %d %s", t.Key, t.Status, t.Class)
	case engine.KeyReenabled:
		return "key " + t.Key + ": " + t.Reason
	}
	return ""
}
