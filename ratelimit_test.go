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
	"github.com/llmhedge/caddy-llm-hedge/internal/health"
)

func TestCaddyfileKeyPool(t *testing.T) {
	h, err := parseHandler("llm_hedge {\n provider a http://x {\n key {env.A} {env.B}\n quota_reserve 10\n }\n provider b http://y {\n key {env.C}\n }\n}")
	if err != nil {
		t.Fatal(err)
	}
	if a := h.Providers[0]; a.Key != "" || len(a.Keys) != 2 || a.QuotaReserve != 10 {
		t.Fatalf("pool: %+v", a)
	}
	if b := h.Providers[1]; b.Key != "{env.C}" || b.Keys != nil {
		t.Fatalf("one key stays key: %+v", b)
	}
	for _, tc := range []struct {
		body, want string
		line       int
	}{
		{"key a b a", "the same key twice", 3},
		{"key", "want <key>", 3},
		{"key a\n key b", "key given twice", 4},
		{"quota_reserve 101", "0-100", 3},
		{"quota_reserve -1", "below the minimum", 3},
	} {
		_, err := parseHandler("llm_hedge {\n provider a http://x {\n " + tc.body + "\n }\n}")
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "Testfile:"+itoa(tc.line)) {
			t.Errorf("%q: %v, want %q at line %d", tc.body, err, tc.want, tc.line)
		}
	}
}

// A key pool whose keys expand to the same value, or to nothing, fails to
// provision and names the key by place and fingerprint, never by value.
func TestProvisionKeyPoolErrors(t *testing.T) {
	t.Setenv("LLMHEDGE_QUOTA_K1", "sk-same")
	t.Setenv("LLMHEDGE_QUOTA_K2", "sk-same")
	repl := caddy.NewReplacer()
	_, err := poolSecrets(&Provider{Keys: []string{"{env.LLMHEDGE_QUOTA_K1}", "{env.LLMHEDGE_QUOTA_K2}"}}, repl)
	if err == nil || !strings.Contains(err.Error(), "twice") || strings.Contains(err.Error(), "sk-same") {
		t.Fatalf("duplicate after expansion: %v", err)
	}
	_, err = poolSecrets(&Provider{Key: "{env.LLMHEDGE_QUOTA_UNSET}"}, repl)
	if err == nil || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("empty expansion: %v", err)
	}
}

// BenchmarkQuotaRequestPath is BenchmarkHedgeRaceNoFire's hedge=off path
// with a configured key on the primary: one key and no rate-limit headers
// (what a key cost before pools) vs a pool of two keys with rate-limit
// headers on every response (the double sends three header fields either
// way). Compare ns/op and allocs/op.
func BenchmarkQuotaRequestPath(b *testing.B) {
	for _, tc := range []struct {
		name    string
		pc      Provider
		headers bool
	}{
		{"key=one,headers=none", Provider{Key: "sk-1"}, false},
		{"keys=two,headers=none", Provider{Keys: []string{"sk-1", "sk-2"}}, false},
		{"keys=two,headers=ratelimit", Provider{Keys: []string{"sk-1", "sk-2"}}, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			primary := tc.pc
			primary.Name, primary.BaseURL = "quotabench-primary-"+tc.name, "http://primary.invalid"
			h := &Handler{
				Providers: []*Provider{&primary, {Name: "quotabench-spare-" + tc.name, BaseURL: "http://spare.invalid", Priority: 1}},
				Hedge:     HedgeConfig{Off: true},
			}
			ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
			defer cancel()
			if err := h.Provision(ctx); err != nil {
				b.Fatal(err)
			}
			defer h.Cleanup()
			engine.SetTransport(h.engine, "http", &rlCannedUpstream{stream: hedgeRecordedStream(b), headers: tc.headers})
			b.ReportAllocs()
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, "/v1/messages", strings.NewReader(hedgeStreamBody))
				w := httptest.NewRecorder()
				if err := h.ServeHTTP(w, r, nil); err != nil || w.Code != http.StatusOK {
					b.Fatalf("status %d, %v: %s", w.Code, err, w.Body)
				}
			}
		})
	}
}

// rlCannedUpstream is hedgeCannedUpstream, with rate-limit headers when
// headers is set.
type rlCannedUpstream struct {
	stream  []byte
	headers bool
}

func (c *rlCannedUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	h := http.Header{"Content-Type": {"text/event-stream"}, "Request-Id": {"req_1"}, "Anthropic-Organization-Id": {"org"}}
	if c.headers {
		h = http.Header{"Content-Type": {"text/event-stream"}, health.HAnthReqLeft: {"1000000000"}, health.HAnthReqReset: {rlResetValue}}
	}
	return &http.Response{
		StatusCode: http.StatusOK,
		Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  h,
		Body:    io.NopCloser(bytes.NewReader(c.stream)),
		Request: r,
	}, nil
}

var rlResetValue = time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
