package llmhedge

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmhedge/caddy-llm-hedge/internal/engine"
	"github.com/llmhedge/caddy-llm-hedge/sim"
)

const hedgeStreamBody = `{"model":"claude-test","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hello"}]}`

// hedgeCannedUpstream answers every request with the same recorded stream, in
// memory: the request path is measured without loopback network noise.
type hedgeCannedUpstream struct {
	stream []byte
	calls  map[string]int
}

func (c *hedgeCannedUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	c.calls[r.URL.Host]++
	return &http.Response{
		StatusCode: http.StatusOK,
		Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": {"text/event-stream"}},
		Body:    io.NopCloser(bytes.NewReader(c.stream)),
		Request: r,
	}, nil
}

// hedgeRecordedStream is one real Anthropic stream of the simulator.
func hedgeRecordedStream(tb testing.TB) []byte {
	tb.Helper()
	srv := httptest.NewServer(sim.New(sim.Config{Tokens: 9}))
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/v1/messages", "application/json", strings.NewReader(hedgeStreamBody))
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		tb.Fatalf("recording a stream: status %d, %v", resp.StatusCode, err)
	}
	return b
}

// hedgeCannedHandler provisions a handler with a primary and a spare provider
// whose transports answer from up.
func hedgeCannedHandler(tb testing.TB, hedge HedgeConfig, up *hedgeCannedUpstream) *Handler {
	tb.Helper()
	h := &Handler{
		Providers: []*Provider{
			{Name: "hedgebench-primary", BaseURL: "http://primary.invalid", Priority: 0},
			{Name: "hedgebench-spare", BaseURL: "http://spare.invalid", Priority: 1},
		},
		Hedge: hedge,
	}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	tb.Cleanup(cancel)
	if err := h.Provision(ctx); err != nil {
		tb.Fatal(err)
	}
	if err := h.Validate(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = h.Cleanup() })
	engine.SetTransport(h.engine, "http", up)
	return h
}

// BenchmarkHedgeRaceNoFire is BenchmarkHedgeNoFire without the network:
// the whole request path (parse, race, commit, relay) against an in-memory
// upstream, hedging on but never firing vs hedging off. Both run the same
// race loop; the hedged one also computes the delay and arms and stops a
// timer. Compare ns/op and allocs/op.
func BenchmarkHedgeRaceNoFire(b *testing.B) {
	stream := hedgeRecordedStream(b)
	for _, tc := range []struct {
		name  string
		hedge HedgeConfig
	}{
		{"hedge=on", HedgeConfig{Delay: caddy.Duration(time.Minute)}},
		{"hedge=off", HedgeConfig{Off: true}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			up := &hedgeCannedUpstream{stream: stream, calls: map[string]int{}}
			h := hedgeCannedHandler(b, tc.hedge, up)
			b.ReportAllocs()
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, "/v1/messages", strings.NewReader(hedgeStreamBody))
				w := httptest.NewRecorder()
				if err := h.ServeHTTP(w, r, nil); err != nil || w.Code != http.StatusOK {
					b.Fatalf("status %d, %v: %s", w.Code, err, w.Body)
				}
			}
			b.StopTimer()
			if up.calls["spare.invalid"] != 0 {
				b.Fatalf("the spare was called %d times: the hedge fired", up.calls["spare.invalid"])
			}
		})
	}
}

// The canned path is a faithful request: the client gets the recorded
// stream's text through the real commit and relay, from the primary alone.
func TestHedgeCannedUpstreamServes(t *testing.T) {
	up := &hedgeCannedUpstream{stream: hedgeRecordedStream(t), calls: map[string]int{}}
	h := hedgeCannedHandler(t, HedgeConfig{Delay: caddy.Duration(time.Minute)}, up)
	r := httptest.NewRequest(http.MethodPost, "/v1/messages", strings.NewReader(hedgeStreamBody))
	w := httptest.NewRecorder()
	if err := h.ServeHTTP(w, r, nil); err != nil || w.Code != http.StatusOK {
		t.Fatalf("status %d, %v", w.Code, err)
	}
	if !strings.Contains(w.Body.String(), "event: message_stop") || !strings.Contains(w.Body.String(), `"text":"lazy `) {
		t.Fatalf("body:\n%s", w.Body)
	}
	if up.calls["primary.invalid"] != 1 || up.calls["spare.invalid"] != 0 {
		t.Fatalf("calls %v, want the primary once", up.calls)
	}
}
