package llmhedge

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/llmhedge/caddy-llm-hedge/internal/engine"
	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// What observability costs per request: the same request path with the
// metrics and an info-level JSON logger (as Caddy's default log) against
// no metrics and a no-op logger. Placeholders and access-log fields are
// set in both: Caddy always provides the replacer they go to.
//
//	go test -run '^$' -bench BenchmarkObserve -benchmem -count 6 .
//
// "single" is the healthy case (one attempt; its line is at debug, so at
// info level nothing is written); "failover" writes the info line with a
// two-step decision chain.
func BenchmarkObserveRequest(b *testing.B) {
	for _, sc := range []struct {
		name    string
		primary sim.Config
	}{
		{"single", sim.Config{}},
		{"failover", sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 503}}}},
	} {
		for _, observed := range []bool{false, true} {
			name := sc.name + "/bare"
			if observed {
				name = sc.name + "/observed"
			}
			b.Run(name, func(b *testing.B) {
				h := observeBenchHandler(b, sc.primary, observed)
				body := []byte(`{"model":"claude-bench","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hello"}]}`)
				for b.Loop() {
					w := httptest.NewRecorder()
					if err := h.ServeHTTP(w, observeBenchRequest(body), nil); err != nil || w.Code != http.StatusOK {
						b.Fatalf("status %d, %v", w.Code, err)
					}
				}
			})
		}
	}
}

// BenchmarkObserveFinish isolates finish(): the metrics, the log line and
// the placeholders of a finished two-attempt request.
func BenchmarkObserveFinish(b *testing.B) {
	for _, observed := range []bool{false, true} {
		name := "bare"
		if observed {
			name = "observed"
		}
		b.Run(name, func(b *testing.B) {
			h := observeBenchHandler(b, sim.Config{}, observed)
			r := observeBenchRequest(nil)
			for b.Loop() {
				engine.FinishTwoAttempts(h.engine, r, false)
			}
		})
	}
}

// observeBenchHandler provisions a handler with a primary (cfg) and a
// healthy secondary simulator. observed keeps the real metrics and sets
// an info-level JSON logger; otherwise both are off.
func observeBenchHandler(b *testing.B, cfg sim.Config, observed bool) *Handler {
	b.Helper()
	cfg.Tokens = 9
	primary := httptest.NewServer(sim.New(cfg))
	b.Cleanup(primary.Close)
	secondary := httptest.NewServer(sim.New(sim.Config{Tokens: 9}))
	b.Cleanup(secondary.Close)
	never := 0
	h := &Handler{
		Providers: []*Provider{
			{Name: "bench-primary", BaseURL: primary.URL, Priority: 0},
			{Name: "bench-secondary", BaseURL: secondary.URL, Priority: 1},
		},
		Retry:    RetryConfig{SameProvider: &never},
		Cooldown: CooldownConfig{Failures: 1 << 30},
	}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	b.Cleanup(cancel)
	if err := h.Provision(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = h.Cleanup() })
	if observed {
		enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
		h.obs.logger = zap.New(zapcore.NewCore(enc, zapcore.AddSync(io.Discard), zapcore.InfoLevel)).Named("http.handlers.llm_hedge")
	} else {
		h.obs.logger, h.obs.metrics = zap.NewNop(), nil
	}
	return h
}

// observeBenchRequest is a request as Caddy hands it to a handler: with a
// replacer and the extra access-log fields in its context.
func observeBenchRequest(body []byte) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/v1/messages", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("X-Api-Key", "k")
	ctx := context.WithValue(r.Context(), caddy.ReplacerCtxKey, caddy.NewReplacer())
	ctx = context.WithValue(ctx, caddyhttp.ExtraLogFieldsCtxKey, new(caddyhttp.ExtraLogFields))
	return r.WithContext(ctx)
}
