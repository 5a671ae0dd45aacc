package e2e

import (
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// A translated attempt is a call to the target: its span names the
// target's operation and provider and carries the finish reasons in the
// target's words, streamed or not; the client's format is in
// llm_hedge.dialect and llm_hedge.translated.
func TestTraceTranslatedAttempt(t *testing.T) {
	rc := newOTLPReceiver(t)
	rc.exportHere(t)

	targets := []struct {
		api, op, provider, finish string
	}{
		{"openai", "chat", "openai", "stop"},
		{"responses", "chat", "openai", "completed"},
		{"gemini", "generate_content", "gcp.gemini", "STOP"},
	}
	block := ""
	for _, tg := range targets {
		block += provider("to-"+tg.api, newUpstream(t, sim.Config{}), "api "+tg.api, "key sk-target", "translate anthropic", "models xl-"+tg.api)
	}
	p := startProxy(t, block, "tracing {\n span llm\n }")
	c := anthropicClient(p, "sk-client")
	for _, tg := range targets {
		params := anthropicParams("xl-" + tg.api)
		if _, err := streamAnthropic(ctxTimeout(t, 10*time.Second), c, params); err != nil {
			t.Fatalf("%s, streamed: %v", tg.api, err)
		}
		if _, err := c.Messages.New(ctxTimeout(t, 10*time.Second), params); err != nil {
			t.Fatalf("%s: %v", tg.api, err)
		}
	}
	rc.stopCaddy(t)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, tg := range targets {
		model := "xl-" + tg.api
		n := 0
		for _, s := range rc.spans {
			a := spanAttrs(s)
			if rc.scope[s] != "github.com/llmhedge/caddy-llm-hedge" || a["gen_ai.request.model"] != model {
				continue
			}
			n++
			if s.Name != tg.op+" "+model {
				t.Errorf("%s: span %q, want %q", tg.api, s.Name, tg.op+" "+model)
			}
			checkSpanAttrs(t, tg.api, []*tracepb.Span{s}, []map[string]string{{
				"gen_ai.operation.name": tg.op, "gen_ai.provider.name": tg.provider,
				"gen_ai.response.finish_reasons": tg.finish, "llm_hedge.attempt.outcome": "won",
				"llm_hedge.dialect": "anthropic", "llm_hedge.translated": "anthropic->" + tg.api,
			}})
		}
		if n != 2 {
			t.Fatalf("%s: %d attempt spans, want 2 (streamed and not)", tg.api, n)
		}
	}
}
