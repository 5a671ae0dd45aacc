package e2e

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// otlpReceiver is an OTLP/HTTP trace receiver on a loopback port: it
// decodes each ExportTraceServiceRequest and keeps its spans and its raw
// bytes (to check what never appears in them).
type otlpReceiver struct {
	URL string

	mu    sync.Mutex
	spans []*tracepb.Span
	scope map[*tracepb.Span]string
	raw   bytes.Buffer
	bad   []string
}

// exportHere points Caddy's tracing at rc: it builds its exporter from the
// standard variables (autoexport), OTLP over HTTP with protobuf.
func (rc *otlpReceiver) exportHere(t *testing.T) {
	t.Setenv("OTEL_SDK_DISABLED", "false")
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", rc.URL+"/v1/traces")
	t.Setenv("OTEL_TRACES_SAMPLER", "always_on")
}

// stopCaddy stops Caddy, which flushes and shuts its tracer provider
// down: every span is at the receiver when Stop returns. No export may
// have been malformed.
func (rc *otlpReceiver) stopCaddy(t *testing.T) {
	t.Helper()
	if err := caddy.Stop(); err != nil {
		t.Fatal(err)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.bad) > 0 {
		t.Fatalf("bad exports: %v", rc.bad)
	}
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	rc := &otlpReceiver{scope: map[*tracepb.Span]string{}}
	srv := httptest.NewServer(http.HandlerFunc(rc.export))
	t.Cleanup(srv.Close)
	rc.URL = srv.URL
	return rc
}

func (rc *otlpReceiver) export(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	var req coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(b, &req)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if r.URL.Path != "/v1/traces" || err != nil {
		rc.bad = append(rc.bad, fmt.Sprintf("%s %s: %v", r.Method, r.URL.Path, err))
		http.Error(w, "bad export", http.StatusBadRequest)
		return
	}
	rc.raw.Write(b)
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				rc.spans = append(rc.spans, s)
				rc.scope[s] = ss.GetScope().GetName()
			}
		}
	}
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// spanAttrs renders a span's attributes as strings (arrays joined by ",").
func spanAttrs(s *tracepb.Span) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes {
		m[kv.Key] = anyValueString(kv.Value)
	}
	return m
}

func anyValueString(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonpb.AnyValue_ArrayValue:
		var parts []string
		for _, e := range x.ArrayValue.Values {
			parts = append(parts, anyValueString(e))
		}
		return strings.Join(parts, ",")
	}
	return v.String()
}

// traceSecret, tracePrompt: what no span may hold (the client's key and
// prompt, and the answer, sim.DefaultText).
const (
	traceSecret = "sk-client-trace-secret-4242"
	tracePrompt = "the launch codes are 7f3a9c"
)

// With Caddy's `tracing` directive, exporting over OTLP/HTTP to a receiver
// the test runs: a hedged request's server span has two attempt spans under
// it, the loser cancelled and the winner with the GenAI attributes; a
// failover's first attempt is an error span with error.type; a stream cut
// after the commit and continued elsewhere has a continuation span. The
// site without `tracing` exports nothing.
func TestTraceAttemptSpans(t *testing.T) {
	faultNoLeaks(t)
	rc := newOTLPReceiver(t)
	rc.exportHere(t)

	slow := newUpstream(t, sim.Config{FirstToken: caddyDur(5 * time.Second)})
	fast := newUpstream(t, sim.Config{Model: "claude-test-20261201"})
	broken := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 503}}})
	good := newUpstream(t, sim.Config{})
	cut, rescuer := cutOnce(t), newUpstream(t, sim.Config{Tokens: 60, Text: longText})
	offSlow := newUpstream(t, sim.Config{FirstToken: caddyDur(5 * time.Second)})
	offFast := newUpstream(t, sim.Config{})

	traced, untraced, admin := freePort(t), freePort(t), freePort(t)
	cfg := fmt.Sprintf(`{
	admin 127.0.0.1:%d
	log {
		output file %s
		format json
	}
}
http://127.0.0.1:%d {
	tracing {
		span llm
	}
	llm_hedge {
%s%s%s%s%s%s		hedge {
			after 200ms
		}
		cooldown {
			failures 100
		}
	}
}
http://127.0.0.1:%d {
	llm_hedge {
%s%s		hedge {
			after 200ms
		}
	}
}
`, admin, filepath.Join(t.TempDir(), "caddy.log"), traced,
		provider("slow", slow, "priority 0", "models claude-*"), provider("fast", fast, "priority 1", "models claude-*"),
		provider("broken", broken, "priority 0", "models gpt-*"), provider("good", good, "priority 1", "models gpt-*"),
		provider("cut", cut, "priority 0", "models resume-*", "api anthropic"), provider("rescuer", rescuer, "priority 1", "models resume-*", "api anthropic"),
		untraced,
		provider("slow-off", offSlow, "priority 0"), provider("fast-off", offFast, "priority 1"))
	js, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cfg), nil)
	if err != nil {
		t.Fatalf("adapt: %v\n%s", err, cfg)
	}
	if err := caddy.Load(js, true); err != nil {
		t.Fatalf("load: %v", err)
	}
	waitListening(t, fmt.Sprintf("127.0.0.1:%d", traced))
	waitListening(t, fmt.Sprintf("127.0.0.1:%d", untraced))
	on := &proxy{URL: fmt.Sprintf("http://127.0.0.1:%d", traced)}
	off := &proxy{URL: fmt.Sprintf("http://127.0.0.1:%d", untraced)}

	prompt := anthropic.MessageNewParams{
		Model: "claude-test", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(tracePrompt))},
	}
	ctx := ctxTimeout(t, 20*time.Second)
	// Hedged, traced: slow is raced by fast after 200ms; fast wins.
	if m, err := streamAnthropic(ctx, anthropicClient(on, traceSecret), prompt); err != nil || messageText(m) != wantText {
		t.Fatalf("hedged request: %q, %v", messageText(m), err)
	}
	// Failover, traced, not streamed: broken answers 503, good serves.
	chat := openai.ChatCompletionNewParams{Model: "gpt-test", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(tracePrompt)}}
	if c, err := openaiClient(on, traceSecret).Chat.Completions.New(ctx, chat); err != nil || c.Choices[0].Message.Content != wantText {
		t.Fatalf("failover request: %v", err)
	}
	// Cut after 40 of 60 deltas, continued on rescuer (prefill).
	resume := prompt
	resume.Model = "resume-test"
	if m, err := streamAnthropic(ctx, anthropicClient(on, traceSecret), resume); err != nil || messageText(m) != longText {
		t.Fatalf("continued request: %q, %v", messageText(m), err)
	}
	// Hedged, on the site without tracing.
	if m, err := streamAnthropic(ctx, anthropicClient(off, traceSecret), prompt); err != nil || messageText(m) != wantText {
		t.Fatalf("untraced request: %q, %v", messageText(m), err)
	}
	if completions(offFast) != 1 || completions(fast) != 1 {
		t.Fatalf("the hedges did not run: fast %d, fast-off %d", completions(fast), completions(offFast))
	}

	rc.stopCaddy(t)
	rc.mu.Lock()
	defer rc.mu.Unlock()

	var servers []*tracepb.Span
	children := map[string][]*tracepb.Span{}
	for _, s := range rc.spans {
		switch {
		case s.Kind == tracepb.Span_SPAN_KIND_SERVER && s.Name == "llm":
			servers = append(servers, s)
		case rc.scope[s] == "github.com/llmhedge/caddy-llm-hedge":
			children[hex.EncodeToString(s.ParentSpanId)] = append(children[hex.EncodeToString(s.ParentSpanId)], s)
		}
	}
	if len(servers) != 3 {
		t.Fatalf("%d server spans, want 3 (the traced site's requests); spans: %v", len(servers), spanNames(rc.spans))
	}
	attempts := 0
	for _, s := range children {
		attempts += len(s)
	}
	var hedged, failover, continued []*tracepb.Span
	for _, srv := range servers {
		under := children[hex.EncodeToString(srv.SpanId)]
		attempts -= len(under)
		for _, a := range under {
			if !bytes.Equal(a.TraceId, srv.TraceId) || a.Kind != tracepb.Span_SPAN_KIND_CLIENT {
				t.Fatalf("attempt span %q: trace %x kind %v, want trace %x, client", a.Name, a.TraceId, a.Kind, srv.TraceId)
			}
			if a.StartTimeUnixNano < srv.StartTimeUnixNano || a.EndTimeUnixNano > srv.EndTimeUnixNano {
				t.Fatalf("attempt span %q is not within its server span", a.Name)
			}
		}
		slices.SortFunc(under, func(a, b *tracepb.Span) int {
			na, _ := strconv.Atoi(spanAttrs(a)["llm_hedge.attempt.number"])
			nb, _ := strconv.Atoi(spanAttrs(b)["llm_hedge.attempt.number"])
			return na - nb
		})
		if len(under) == 0 {
			t.Fatalf("server span %x has no attempt spans", srv.SpanId)
		}
		switch spanAttrs(under[0])["gen_ai.request.model"] {
		case "claude-test":
			hedged = under
		case "gpt-test":
			failover = under
		case "resume-test":
			continued = under
		}
	}
	if attempts != 0 {
		t.Fatalf("%d attempt spans are not under a traced request's server span (the untraced site made spans?)", attempts)
	}

	// The hedge: two attempts, the loser cancelled, the winner with the
	// GenAI attributes.
	if len(hedged) != 2 {
		t.Fatalf("the hedged request has %d attempt spans, want 2", len(hedged))
	}
	want := []map[string]string{{
		"llm_hedge.provider": "slow", "llm_hedge.attempt.reason": "first", "llm_hedge.attempt.outcome": "lost",
		"llm_hedge.attempt.cancelled": "true", "llm_hedge.attempt.chain_outcome": "hedge_loser_cancelled",
		"gen_ai.operation.name": "chat", "gen_ai.provider.name": "anthropic", "gen_ai.request.model": "claude-test",
	}, {
		"llm_hedge.provider": "fast", "llm_hedge.attempt.reason": "hedge", "llm_hedge.attempt.outcome": "won",
		"llm_hedge.attempt.committed": "true", "llm_hedge.route": "api", "llm_hedge.dialect": "anthropic",
		"gen_ai.operation.name": "chat", "gen_ai.provider.name": "anthropic",
		"gen_ai.request.model": "claude-test", "gen_ai.response.model": "claude-test-20261201",
		"gen_ai.usage.output_tokens": "9", "gen_ai.response.finish_reasons": "end_turn",
	}}
	checkSpanAttrs(t, "hedge", hedged, want)
	if hedged[0].Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR {
		t.Fatalf("the cancelled loser is an error span: %v", hedged[0].Status)
	}
	if in := spanAttrs(hedged[1])["gen_ai.usage.input_tokens"]; in == "" || in == "0" {
		t.Fatalf("winner: gen_ai.usage.input_tokens %q, want the count the provider reported", in)
	}
	if r, ok := spanAttrs(hedged[0])["gen_ai.response.finish_reasons"]; ok {
		t.Fatalf("the cancelled loser has finish reasons %q", r)
	}
	if len(hedged[1].Events) != 1 || hedged[1].Events[0].Name != "first_event" {
		t.Fatalf("winner events: %v, want one first_event", hedged[1].Events)
	}

	// The failover: the 503 is an error span, the failover wins.
	if len(failover) < 2 {
		t.Fatalf("the failover request has %d attempt spans, want at least 2", len(failover))
	}
	first, last := failover[0], failover[len(failover)-1]
	checkSpanAttrs(t, "failover", []*tracepb.Span{first, last}, []map[string]string{{
		"llm_hedge.provider": "broken", "llm_hedge.attempt.outcome": "failed", "error.type": "overloaded",
		"http.response.status_code": "503", "llm_hedge.attempt.chain_outcome": "provider_error",
	}, {
		"llm_hedge.provider": "good", "llm_hedge.attempt.reason": "failover", "llm_hedge.attempt.outcome": "won",
		"gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-test", "gen_ai.response.finish_reasons": "stop",
		"llm_hedge.dialect": "openai",
	}})
	if first.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR {
		t.Fatalf("the failed attempt's status: %v, want error", first.Status)
	}

	// The continuation: the committed stream broke (a failed attempt that
	// served the client), the continuation completed it.
	if len(continued) != 2 {
		t.Fatalf("the continued request has %d attempt spans, want 2", len(continued))
	}
	checkSpanAttrs(t, "continuation", continued, []map[string]string{{
		"llm_hedge.provider": "cut", "llm_hedge.attempt.reason": "first", "llm_hedge.attempt.outcome": "failed",
		"llm_hedge.attempt.committed": "true", "error.type": "stream_upstream_cut",
	}, {
		"llm_hedge.provider": "rescuer", "llm_hedge.attempt.reason": "continuation", "llm_hedge.attempt.event": "resume_prefill",
		"llm_hedge.attempt.outcome": "won", "llm_hedge.attempt.committed": "true", "gen_ai.response.finish_reasons": "end_turn",
	}})

	// Nothing a client sent or was answered, and no key.
	for _, secret := range []string{traceSecret, tracePrompt, wantText, "quick brown", "alpha beta gamma"} {
		if bytes.Contains(rc.raw.Bytes(), []byte(secret)) {
			t.Fatalf("an exported span holds %q", secret)
		}
	}
}

func checkSpanAttrs(t *testing.T, what string, spans []*tracepb.Span, want []map[string]string) {
	t.Helper()
	for i, w := range want {
		got := spanAttrs(spans[i])
		for k, v := range w {
			if got[k] != v {
				t.Fatalf("%s: attempt %d (%s): %s = %q, want %q; all: %v", what, i+1, spans[i].Name, k, got[k], v, got)
			}
		}
	}
}

func spanNames(spans []*tracepb.Span) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}
