package llmhedge

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// A non-stream 200 whose Content-Length promises more than the provider
// sends (the connection closes early) fails its attempt, and the next
// provider answers; a length far past what arrives is not allocated
// ahead (wire.ReadAll: the buffer grows with the bytes past 1 MiB).
func TestNonStreamBodyShorterThanItsLength(t *testing.T) {
	for _, stated := range []string{"5000", "60000000"} {
		var hits atomic.Int32
		short := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			hj, _ := w.(http.Hijacker)
			c, buf, err := hj.Hijack()
			if err != nil {
				return
			}
			_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + stated + "\r\n\r\n" + `{"id":"msg_1","type":"message"`)
			_ = buf.Flush()
			_ = c.Close()
		}))
		good := httptest.NewServer(sim.New(sim.Config{Tokens: 5}))
		h := &Handler{Providers: []*Provider{{Name: "short", BaseURL: short.URL}, {Name: "good", BaseURL: good.URL, Priority: 1}}}
		ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
		if err := h.Provision(ctx); err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		w := httptest.NewRecorder()
		err := h.ServeHTTP(w, observeBenchRequest([]byte(`{"model":"claude-bench","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`)), nil)
		if err != nil || w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"type":"message"`) {
			t.Errorf("stated %s: status %d, %v, %.200s", stated, w.Code, err, w.Body.String())
		}
		runtime.ReadMemStats(&after)
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
			t.Errorf("stated %s: the request allocated %d bytes", stated, grew)
		}
		if hits.Load() == 0 {
			t.Errorf("stated %s: the short provider was not tried first", stated)
		}
		_ = h.Cleanup()
		cancel()
		short.Close()
		good.Close()
	}
}

// A client that states a large Content-Length (under max_body) and sends
// a few bytes before its body ends is refused with 400 in its dialect's
// shape, and the stated length is not allocated ahead.
func TestRequestBodyShorterThanItsLength(t *testing.T) {
	good := httptest.NewServer(sim.New(sim.Config{Tokens: 5}))
	defer good.Close()
	h := &Handler{Providers: []*Provider{{Name: "good", BaseURL: good.URL}}}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	if err := h.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	defer h.Cleanup()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r := observeBenchRequest([]byte(`{"model":"claude-bench","max_tokens":16,`))
	r.ContentLength = 30 << 20
	w := httptest.NewRecorder()
	err := h.ServeHTTP(w, r, nil)
	runtime.ReadMemStats(&after)
	if err != nil || w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), `"message":"reading request body: unexpected EOF"`) {
		t.Errorf("status %d, %v, %.300s", w.Code, err, w.Body.String())
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20 {
		t.Errorf("the request allocated %d bytes for a stated 30 MiB", grew)
	}
}
