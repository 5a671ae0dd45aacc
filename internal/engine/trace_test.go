package engine

import (
	"context"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// tracedRequest is a finished hedged request (a cancelled loser, a winner)
// whose context carries the span ctx holds, if any.
func tracedRequest(ctx context.Context) *requestState {
	r := httptest.NewRequest("POST", "/v1/messages", nil).WithContext(ctx)
	st := newRequestState(nil, r, dialectAnthropic)
	u, _ := url.Parse("https://api.anthropic.com")
	p := &provider{name: "main", cfg: &ProviderConfig{}, baseURL: u, vendor: "api.anthropic.com"}
	b, _ := url.Parse("http://127.0.0.1:9001")
	q := &provider{name: "backup", cfg: &ProviderConfig{Vendor: "groq"}, baseURL: b, vendor: "groq"}
	start := time.Now()
	loser := &attempt{n: 1, p: p, model: "claude-x", reason: "initial", start: start, elapsed: 300 * time.Millisecond,
		status: 200, outcome: "hedge_loser_cancelled"}
	winner := &attempt{n: 2, p: q, model: "claude-x", reason: launchHedgeReason, start: start.Add(200 * time.Millisecond),
		offset: 200 * time.Millisecond, elapsed: 80 * time.Millisecond, firstEvent: 80 * time.Millisecond,
		status: 200, outcome: "hedge_winner"}
	winner.usage.Input, winner.usage.Output, winner.usage.Model = 30, 9, "claude-x-1"
	st.attempts, st.winner, st.hedged = []*attempt{loser, winner}, winner, true
	return st
}

// Without a recording span (tracing off, or the request not sampled) the
// hooks on the request path allocate nothing and mark nothing: no span is
// built.
func TestTraceOffCostsNothing(t *testing.T) {
	unsampled := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}})
	for name, ctx := range map[string]context.Context{
		"no tracing":  context.Background(),
		"not sampled": trace.ContextWithSpanContext(context.Background(), unsampled),
	} {
		t.Run(name, func(t *testing.T) {
			st := tracedRequest(ctx)
			end := time.Now()
			allocs := testing.AllocsPerRun(1000, func() {
				for _, a := range st.attempts {
					traceAttempt(st, a)
				}
				traceAttempts(st, end)
			})
			if allocs != 0 {
				t.Fatalf("the trace hooks allocate %.1f times per request with tracing off", allocs)
			}
			for _, a := range st.attempts {
				if a.usage.Finish.On {
					t.Fatalf("attempt %d reads finish reasons with tracing off", a.n)
				}
			}
		})
	}
}

// With a recording span, each attempt is a client span under it with the
// GenAI attributes.
func TestTraceAttemptAttributes(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	ctx, server := tp.Tracer("test").Start(context.Background(), "server", trace.WithSpanKind(trace.SpanKindServer))
	st := tracedRequest(ctx)
	traceAttempt(st, st.attempts[1])
	if !st.attempts[1].usage.Finish.On {
		t.Fatal("a traced attempt does not read its finish reasons")
	}
	traceAttempts(st, time.Now())
	server.End()
	spans := rec.Ended()
	if len(spans) != 3 {
		t.Fatalf("%d spans, want the server's and two attempts'", len(spans))
	}
	byProvider := map[string]map[string]string{}
	for _, s := range spans[:2] {
		if s.Parent().SpanID() != server.SpanContext().SpanID() || s.SpanKind() != trace.SpanKindClient {
			t.Fatalf("%s: parent %v kind %v", s.Name(), s.Parent().SpanID(), s.SpanKind())
		}
		m := map[string]string{}
		for _, kv := range s.Attributes() {
			m[string(kv.Key)] = kv.Value.Emit()
		}
		byProvider[m[attrProvider]] = m
	}
	loser, winner := byProvider["main"], byProvider["backup"]
	for k, v := range map[string]string{"gen_ai.provider.name": "anthropic", attrAttemptOutcome: "lost", attrCancelled: "true", attrAttemptReason: "first"} {
		if loser[k] != v {
			t.Errorf("loser %s = %q, want %q", k, loser[k], v)
		}
	}
	for k, v := range map[string]string{"gen_ai.provider.name": "groq", attrRoute: "api", "server.port": "9001", attrAttemptOutcome: "won",
		attrAttemptReason: "hedge", "gen_ai.response.model": "claude-x-1", "gen_ai.usage.output_tokens": "9", attrFirstEventMs: "80"} {
		if winner[k] != v {
			t.Errorf("winner %s = %q, want %q", k, winner[k], v)
		}
	}
}

// gen_ai.provider.name: a vendor named by its registry value, else a known
// host, else the API the provider speaks, else the request's (the cloud
// cases: internal/genai).
func TestTraceGenAIProvider(t *testing.T) {
	cases := []struct {
		base, vendor string
		d            string // the request's dialect
		want         string
	}{
		{"https://generativelanguage.googleapis.com", "", "gemini", "gcp.gemini"},
		{"https://api.deepseek.com", "", "openai", "deepseek"},
		{"http://10.0.0.7:8000", "groq", "openai", "groq"},
		{"http://127.0.0.1:9001", "lab", "anthropic", "anthropic"},
		{"http://127.0.0.1:9001", "", "responses", "openai"},
	}
	for _, c := range cases {
		u, _ := url.Parse(c.base)
		p := &provider{cfg: &ProviderConfig{Vendor: c.vendor}, baseURL: u}
		if got := genAIProvider(p, c.d); got != c.want {
			t.Errorf("%s (vendor %q): %q, want %q", c.base, c.vendor, got, c.want)
		}
	}
}

// BenchmarkTraceHooks is what a finished two-attempt request pays for its
// spans: nothing with tracing off; building and ending two spans (no
// export) with it on.
func BenchmarkTraceHooks(b *testing.B) {
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	traced, server := tp.Tracer("bench").Start(context.Background(), "server")
	defer server.End()
	for name, ctx := range map[string]context.Context{"off": context.Background(), "on": traced} {
		b.Run(name, func(b *testing.B) {
			st := tracedRequest(ctx)
			end := time.Now()
			b.ReportAllocs()
			for b.Loop() {
				for _, a := range st.attempts {
					traceAttempt(st, a)
				}
				traceAttempts(st, end)
			}
		})
	}
}
