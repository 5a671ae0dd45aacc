package llmhedge

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// BenchmarkProxyRequest is the whole handler path of one request against a
// loopback simulator, in process: what llm_hedge allocates and spends per
// request beyond the HTTP round trip itself (profile it with -memprofile
// and -cpuprofile). The bench program compares the same paths inside
// Caddy against reverse_proxy.
func BenchmarkProxyRequest(b *testing.B) {
	for _, bc := range []struct {
		name      string
		providers int
		stream    bool
	}{
		{"non-stream/1", 1, false}, {"non-stream/3", 3, false},
		{"stream/1", 1, true}, {"stream/3", 3, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			tokens := 153
			if bc.stream {
				tokens = 54
			}
			h := &Handler{Hedge: HedgeConfig{Delay: caddy.Duration(10 * time.Second)}}
			for i := range bc.providers {
				srv := httptest.NewServer(sim.New(sim.Config{Tokens: tokens}))
				b.Cleanup(srv.Close)
				h.Providers = append(h.Providers, &Provider{Name: fmt.Sprintf("p%d", i), BaseURL: srv.URL, Vendor: fmt.Sprintf("v%d", i)})
			}
			ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
			b.Cleanup(cancel)
			if err := h.Provision(ctx); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = h.Cleanup() })
			// Caddy's default log level: a healthy request's line (debug)
			// is not written.
			h.logger = zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zapcore.InfoLevel))
			body := fmt.Appendf(nil, `{"model":"claude-bench","max_tokens":1024,"stream":%t,"messages":[{"role":"user","content":"Write a short paragraph about the sea."}]}`, bc.stream)
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				if err := h.ServeHTTP(w, observeBenchRequest(body), nil); err != nil || w.Code != http.StatusOK {
					b.Fatalf("status %d, %v", w.Code, err)
				}
			}
		})
	}
}
