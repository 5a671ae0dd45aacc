package engine

import (
	"context"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/llmhedge/caddy-llm-hedge/internal/genai"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// Attempt spans. With Caddy's `tracing` directive the request's server span
// is in its context; each attempt becomes a client span under it, in the
// same tracer provider, with the OpenTelemetry GenAI semantic-convention
// attributes. The spans are written when the request finishes, with each
// attempt's own start and end times, from what the decision chain already
// holds: the attempt path gains nothing but one flag, and a request whose
// span is not recording (tracing off, or not sampled) costs a context
// lookup per attempt and creates no span.

// tracerName is the instrumentation scope of the attempt spans.
const tracerName = "github.com/llmhedge/caddy-llm-hedge"

// Attribute keys of this module; the gen_ai.*, server.*, error.type and
// http.* keys are the semantic conventions'.
const (
	attrProvider       = "llm_hedge.provider"
	attrVendor         = "llm_hedge.vendor"
	attrRoute          = "llm_hedge.route"
	attrDialect        = "llm_hedge.dialect"
	attrTranslated     = "llm_hedge.translated"
	attrAttemptNumber  = "llm_hedge.attempt.number"
	attrAttemptReason  = "llm_hedge.attempt.reason"
	attrAttemptEvent   = "llm_hedge.attempt.event"
	attrAttemptOutcome = "llm_hedge.attempt.outcome"
	attrChainOutcome   = "llm_hedge.attempt.chain_outcome"
	attrCancelled      = "llm_hedge.attempt.cancelled"
	attrCommitted      = "llm_hedge.attempt.committed"
	attrProbe          = "llm_hedge.attempt.probe"
	attrFirstEventMs   = "llm_hedge.attempt.first_event_ms"
	attrPurpose        = "llm_hedge.attempt.purpose" // what its tokens count as: answer, hedge, continuation, failed (docs/cost.md)
)

// tracing reports whether the request's span records, so its attempts are
// traced (and read their finish reasons).
func tracing(ctx context.Context) bool {
	return trace.SpanFromContext(ctx).IsRecording()
}

// traceAttempt marks an attempt about to start when its request is traced:
// its response's finish reasons are then read for its span (usage.go).
func traceAttempt(st *requestState, a *attempt) {
	a.usage.Finish.On = tracing(st.r.Context())
}

// traceAttempts writes one span per attempt of a finished completion under
// the request's span; end is when the request finished.
func traceAttempts(st *requestState, end time.Time) {
	if st.forwarded || len(st.attempts) == 0 {
		return // not a completion, or nothing was sent
	}
	ctx := st.r.Context()
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return
	}
	tracer := parent.TracerProvider().Tracer(tracerName)
	for _, a := range st.attempts {
		writeAttemptSpan(ctx, tracer, st, a, end)
	}
}

func writeAttemptSpan(ctx context.Context, tracer trace.Tracer, st *requestState, a *attempt, end time.Time) {
	op := genai.Operation(attemptDialect(st, a).String())
	_, span := tracer.Start(ctx, op+" "+a.model,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithTimestamp(a.start),
		trace.WithAttributes(attemptAttributes(st, a, op)...))
	outcome := attemptOutcome(a)
	switch outcome {
	case "lost":
		span.SetAttributes(attribute.Bool(attrCancelled, true))
	case "failed":
		why := attemptFailure(a)
		span.SetAttributes(attribute.String("error.type", why))
		span.SetStatus(codes.Error, why)
	}
	if a.firstEvent > 0 {
		span.AddEvent("first_event", trace.WithTimestamp(a.start.Add(a.firstEvent)))
	}
	span.End(trace.WithTimestamp(attemptEnd(st, a, end)))
}

// attemptAttributes are the span's attributes: names, counts and enums
// only, never a prompt, an answer, a key or a header.
func attemptAttributes(st *requestState, a *attempt, op string) []attribute.KeyValue {
	kv := make([]attribute.KeyValue, 0, 24)
	kv = append(kv,
		attribute.String("gen_ai.operation.name", op),
		attribute.String("gen_ai.provider.name", genAIProvider(a.p, attemptDialect(st, a).String())),
		attribute.String("gen_ai.request.model", a.model),
		attribute.String("server.address", a.p.baseURL.Hostname()),
		attribute.String(attrProvider, a.p.name),
		attribute.String(attrVendor, a.p.vendor),
		attribute.String(attrRoute, attemptRoute(a.p)),
		attribute.String(attrDialect, st.dialect.String()),
		attribute.Int(attrAttemptNumber, a.n),
		attribute.String(attrAttemptReason, attemptReason(st, a)),
		attribute.String(attrAttemptEvent, a.reason),
		attribute.String(attrAttemptOutcome, attemptOutcome(a)),
		attribute.String(attrChainOutcome, a.outcome),
		attribute.String(attrPurpose, purposeOf(st, a)),
	)
	if a.xl != nil {
		kv = append(kv, attribute.String(attrTranslated, st.dialect.String()+"->"+a.xl.target.String()))
	}
	if port := a.p.baseURL.Port(); port != "" {
		kv = append(kv, attribute.String("server.port", port))
	}
	if a.status != 0 {
		kv = append(kv, attribute.Int("http.response.status_code", a.status))
	}
	if a.probe {
		kv = append(kv, attribute.Bool(attrProbe, true))
	}
	if committed(st, a) {
		kv = append(kv, attribute.Bool(attrCommitted, true))
	}
	if a.firstEvent > 0 {
		kv = append(kv, attribute.Int64(attrFirstEventMs, max(a.firstEvent.Milliseconds(), 1)))
	}
	u := &a.usage
	if u.Model != "" {
		kv = append(kv, attribute.String("gen_ai.response.model", u.Model))
	}
	if u.Input > 0 || u.Output > 0 {
		kv = append(kv, attribute.Int64("gen_ai.usage.input_tokens", u.Input),
			attribute.Int64("gen_ai.usage.output_tokens", u.Output))
	}
	if u.CacheRead > 0 {
		kv = append(kv, attribute.Int64("gen_ai.usage.cache_read.input_tokens", u.CacheRead))
	}
	if u.CacheWrite > 0 {
		kv = append(kv, attribute.Int64("gen_ai.usage.cache_creation.input_tokens", u.CacheWrite))
	}
	if reasons := u.Finish.List(); len(reasons) > 0 {
		kv = append(kv, attribute.StringSlice("gen_ai.response.finish_reasons", reasons))
	}
	return kv
}

// attemptDialect is the format the attempt spoke to its provider: the
// target's for a translated attempt (the span is a call to the target),
// else the client's.
func attemptDialect(st *requestState, a *attempt) wire.Dialect {
	if a.xl != nil {
		return a.xl.target
	}
	return st.dialect
}

// genAIProvider is gen_ai.provider.name for an attempt on p that spoke
// the dialect named requested (attemptDialect; genai.ProviderName).
func genAIProvider(p *provider, requested string) string {
	cloud, api := "", requested
	if p.proto != nil {
		cloud = p.proto.String()
	}
	if p.dialect != nil { // else it serves whichever the request speaks
		api = p.dialect.String()
	}
	return genai.ProviderName(cloud, p.cfg.Vendor, p.baseURL.Hostname(), api)
}

// attemptRoute is how the attempt reached its provider: its own API, or a
// cloud (bedrock, vertex, azure).
func attemptRoute(p *provider) string {
	if p.proto != nil {
		return p.proto.String()
	}
	return "api"
}

// attemptReason groups the chain's start events into why the attempt
// started: first, hedge, failover (a fallback model or a context
// fallback included), retry, continuation, discover. A breaker probe
// takes the place it had: first, a hedge when another attempt was
// running, else a failover.
func attemptReason(st *requestState, a *attempt) string {
	switch a.reason {
	case "initial":
		return "first"
	case launchHedgeReason:
		return "hedge"
	case launchRetryReason:
		return "retry"
	case launchFailoverReason, "fallback", launchContextFallbackReason:
		return "failover"
	case launchDiscoverReason:
		return "discover"
	case "probe":
		if a.n == 1 {
			return "first"
		}
		for _, b := range st.attempts[:a.n-1] {
			if b.offset+b.elapsed > a.offset {
				return "hedge"
			}
		}
		return "failover"
	}
	if strings.HasPrefix(a.reason, "resume_") {
		return "continuation"
	}
	return a.reason
}

// attemptOutcome is how the attempt ended: won (it served the client, or
// completed a continuation), lost (a hedge loser, cancelled), or failed
// (error.type says why).
func attemptOutcome(a *attempt) string {
	switch a.outcome {
	case "request_success", "hedge_winner":
		return "won"
	case "hedge_loser_cancelled":
		return "lost"
	case "resume_" + strategyPrefill, "resume_" + strategyReplay, "resume_" + strategyFinish:
		return "won"
	}
	return "failed"
}

// attemptFailure is the error.type of a failed attempt: its error class,
// else its chain outcome (a continuation that diverged).
func attemptFailure(a *attempt) string {
	if a.class != "" {
		return string(a.class)
	}
	if a.outcome != "" {
		return a.outcome
	}
	return "unknown"
}

// committed reports whether the attempt's response went to the client:
// the winner, or a continuation spliced into its stream.
func committed(st *requestState, a *attempt) bool {
	return a == st.winner || strings.HasPrefix(a.outcome, "resume_")
}

// attemptEnd is when the attempt stopped holding its provider: a committed
// one at the end of the request, the others when they reported.
func attemptEnd(st *requestState, a *attempt, end time.Time) time.Time {
	if committed(st, a) || a.elapsed <= 0 {
		return end
	}
	return a.start.Add(a.elapsed)
}
