package engine

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/health"
)

var rlNow = time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC)

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func TestRateLimitHeadersAnthropic(t *testing.T) {
	h := hdr(
		"anthropic-ratelimit-requests-remaining", "42",
		"anthropic-ratelimit-requests-reset", "2026-12-01T04:00:30Z",
		"anthropic-ratelimit-tokens-remaining", "9000",
		"anthropic-ratelimit-tokens-reset", "2026-12-01T04:01:00Z",
		"anthropic-ratelimit-input-tokens-remaining", "5000",
		"anthropic-ratelimit-input-tokens-reset", "2026-12-01T04:00:10Z",
		"anthropic-ratelimit-output-tokens-remaining", "7000",
		"anthropic-ratelimit-output-tokens-reset", "2026-12-01T04:00:20Z",
	)
	rl, ok := health.ParseRateLimits(h, rlNow)
	if !ok || rl.ReqLeft != 42 || rl.ReqReset != rlNow.Add(30*time.Second).UnixNano() {
		t.Fatalf("requests: %+v", rl)
	}
	// the lowest of the token limits speaks, with its own reset
	if rl.TokLeft != 5000 || rl.TokReset != rlNow.Add(10*time.Second).UnixNano() {
		t.Fatalf("tokens: %+v", rl)
	}
}

func TestRateLimitHeadersOpenAI(t *testing.T) {
	for _, tc := range []struct {
		reset string
		want  time.Duration
	}{
		{"6m0s", 6 * time.Minute}, {"1s", time.Second}, {"20ms", 20 * time.Millisecond}, {"1m30.5s", 90*time.Second + 500*time.Millisecond},
	} {
		h := hdr("x-ratelimit-remaining-requests", "7", "x-ratelimit-reset-requests", tc.reset,
			"x-ratelimit-remaining-tokens", "1200", "x-ratelimit-reset-tokens", tc.reset)
		rl, ok := health.ParseRateLimits(h, rlNow)
		if !ok || rl.ReqLeft != 7 || rl.TokLeft != 1200 || rl.ReqReset != rlNow.Add(tc.want).UnixNano() || rl.TokReset != rl.ReqReset {
			t.Fatalf("%s: %+v", tc.reset, rl)
		}
	}
}

func TestRateLimitHeadersMalformedAndSkew(t *testing.T) {
	for _, tc := range []struct {
		name      string
		h         http.Header
		ok        bool
		left      int64
		resetFrom time.Duration // the reset, from rlNow; -1: none (no count)
	}{
		{"no headers", hdr(), false, health.RateLimitUnset, -1},
		{"not a number", hdr("x-ratelimit-remaining-requests", "many"), false, health.RateLimitUnset, -1},
		{"negative", hdr("x-ratelimit-remaining-requests", "-3"), false, health.RateLimitUnset, -1},
		{"float", hdr("anthropic-ratelimit-requests-remaining", "1.5"), false, health.RateLimitUnset, -1},
		{"bad duration: the window", hdr("x-ratelimit-remaining-requests", "3", "x-ratelimit-reset-requests", "soon"), true, 3, health.RateLimitWindow},
		{"negative duration: now", hdr("x-ratelimit-remaining-requests", "3", "x-ratelimit-reset-requests", "-5s"), true, 3, 0},
		{"bad time: the window", hdr("anthropic-ratelimit-requests-remaining", "3", "anthropic-ratelimit-requests-reset", "tomorrow"), true, 3, health.RateLimitWindow},
		{"past reset: now", hdr("anthropic-ratelimit-requests-remaining", "0", "anthropic-ratelimit-requests-reset", "2026-12-01T03:59:00Z"), true, 0, 0},
		{"far reset clamped", hdr("anthropic-ratelimit-requests-remaining", "0", "anthropic-ratelimit-requests-reset", "2027-06-01T00:00:00Z"), true, 0, rateLimitResetMax},
		{"long duration clamped", hdr("x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "900h"), true, 0, rateLimitResetMax},
	} {
		rl, ok := health.ParseRateLimits(tc.h, rlNow)
		if ok != tc.ok || rl.ReqLeft != tc.left {
			t.Errorf("%s: ok %v %+v", tc.name, ok, rl)
			continue
		}
		want := int64(0)
		if tc.resetFrom >= 0 {
			want = rlNow.Add(tc.resetFrom).UnixNano()
		}
		if rl.ReqReset != want {
			t.Errorf("%s: reset %v, want %v", tc.name, time.Unix(0, rl.ReqReset), time.Unix(0, want))
		}
	}
}

// The key choice: the most requests left, then the fewest in flight; out
// of quota is skipped until its reset, disabled until a reset.
func TestKeyPickAndQuotaSkip(t *testing.T) {
	ph := &health.Provider{}
	p := &provider{name: "p", health: ph}
	for _, s := range []string{"k1", "k2"} {
		p.keys = append(p.keys, &health.PoolKey{Secret: s, St: ph.Keys.Key(health.Fingerprint(s))})
	}
	now := rlNow
	k, why, _ := p.pickKey(now, 10)
	if k != p.keys[0] || why != "" {
		t.Fatalf("unknown quotas: %v %q, want the first key", k, why)
	}
	p.keys[0].St.InFlight.Add(1)
	if k, _, _ := p.pickKey(now, 10); k != p.keys[1] {
		t.Fatal("a tie goes to the key with fewer in flight")
	}
	p.keys[0].St.InFlight.Add(-1)
	reset := now.Add(2 * time.Second).UnixNano()
	p.keys[0].St.NoteRateLimits(health.RateLimits{ReqLeft: 5, ReqReset: reset, TokLeft: health.RateLimitUnset}, 0, 0)
	p.keys[1].St.NoteRateLimits(health.RateLimits{ReqLeft: 9, ReqReset: reset, TokLeft: health.RateLimitUnset}, 0, 0)
	if k, _, _ := p.pickKey(now, 10); k != p.keys[1] {
		t.Fatal("the key with the most requests left goes first")
	}
	p.keys[1].St.NoteRateLimits(health.RateLimits{ReqLeft: 0, ReqReset: reset, TokLeft: health.RateLimitUnset}, 0, 0)
	p.keys[0].St.NoteRateLimits(health.RateLimits{ReqLeft: 3, ReqReset: reset, TokLeft: 100, TokReset: reset + 1}, 0, 0)
	if k, _, _ := p.pickKey(now, 99); k != p.keys[0] {
		t.Fatal("k1 has 3 requests and 100 tokens for an estimate of 99")
	}
	p.reserve = 10 // 100 tokens less 10% is 90: too few for 99
	k, why, until := p.pickKey(now, 99)
	if k != nil || why != "quota_skip" || until != reset {
		t.Fatalf("both out of quota: %v %q until %v, want quota_skip until the earliest reset", k, why, time.Unix(0, until))
	}
	if k, _, _ := p.pickKey(now.Add(3*time.Second), 99); k == nil {
		t.Fatal("after the reset the keys serve again")
	}
	p.keys[0].St.Disabled.Store(true)
	p.keys[1].St.Disabled.Store(true)
	if _, why, until := p.pickKey(now, 0); why != "keys_unavailable" || until != 0 {
		t.Fatalf("all disabled: %q %d", why, until)
	}
	ph.Keys.Reset()
	if k, _, _ := p.pickKey(now.Add(3*time.Second), 0); k == nil {
		t.Fatal("an admin reset re-enables the keys")
	}
}

func TestKeyFingerprint(t *testing.T) {
	// sha256("sk-test") = 0a0b3c5f...
	if fp := health.Fingerprint("sk-test"); len(fp) != 8 || strings.Contains(fp, "sk") {
		t.Fatalf("fingerprint %q", fp)
	}
}

func TestQuotaEstimate(t *testing.T) {
	body := []byte(`{"model":"m","max_tokens":100,"messages":[]}`)
	if got, want := health.QuotaEstimate(body), int64(len(body)/4+100); got != want {
		t.Fatalf("estimate %d, want %d", got, want)
	}
	body = []byte(`{"model":"m","max_completion_tokens":7}`)
	if got, want := health.QuotaEstimate(body), int64(len(body)/4+7); got != want {
		t.Fatalf("estimate %d, want %d", got, want)
	}
}

// BenchmarkQuotaBookkeeping is what a key pool adds to an attempt on the
// request path: the key choice, the send, the rate-limit headers of the
// response and the end. It must not allocate.
func BenchmarkQuotaBookkeeping(b *testing.B) {
	ph := &health.Provider{}
	p := &provider{name: "p", health: ph}
	for _, s := range []string{"k1", "k2", "k3"} {
		p.keys = append(p.keys, &health.PoolKey{Secret: s, St: ph.Keys.Key(health.Fingerprint(s))})
	}
	now := time.Now()
	h := hdr(
		"anthropic-ratelimit-requests-remaining", "1000000000",
		"anthropic-ratelimit-requests-reset", now.Add(time.Hour).UTC().Format(time.RFC3339),
		"anthropic-ratelimit-tokens-remaining", "1000000000",
		"anthropic-ratelimit-tokens-reset", now.Add(time.Hour).UTC().Format(time.RFC3339),
		"x-ratelimit-remaining-requests", "1000000000",
		"x-ratelimit-reset-requests", "59m0s",
	)
	body := []byte(`{"model":"claude-test","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hello"}]}`)
	b.ReportAllocs()
	for b.Loop() {
		k, why, _ := p.pickKey(now, health.QuotaEstimate(body))
		if why != "" {
			b.Fatal(why)
		}
		k.St.InFlight.Add(1)
		sent, before, _ := k.St.Take(now.UnixNano(), 0)
		k.St.Answered()
		if rl, ok := health.ParseRateLimits(h, now); ok {
			k.St.NoteRateLimits(rl, sent, before)
		}
		k.St.InFlight.Add(-1)
	}
}

func FuzzRateLimitHeaders(f *testing.F) {
	f.Add("42", "2026-12-01T04:00:30Z", "6m0s", "1m30.5s")
	f.Add("-1", "garbage", "20ms", "")
	f.Add("99999999999999999999", "9999-12-31T23:59:59Z", "-5s", "1h")
	f.Fuzz(func(t *testing.T, left, rfc, dur1, dur2 string) {
		h := http.Header{}
		h[health.HAnthReqLeft] = []string{left}
		h[health.HAnthReqReset] = []string{rfc}
		h[health.HAnthTokLeft] = []string{left}
		h[health.HAnthTokReset] = []string{rfc}
		h[health.HOAIReqLeft] = []string{left}
		h[health.HOAIReqReset] = []string{dur1}
		h[health.HOAITokLeft] = []string{left}
		h[health.HOAITokReset] = []string{dur2}
		rl, _ := health.ParseRateLimits(h, rlNow)
		for _, n := range []int64{rl.ReqLeft, rl.TokLeft} {
			if n < health.RateLimitUnset {
				t.Fatalf("remaining %d", n)
			}
		}
		for _, r := range []int64{rl.ReqReset, rl.TokReset} {
			if r != 0 && (r < rlNow.UnixNano() || r > rlNow.Add(rateLimitResetMax).UnixNano()) {
				t.Fatalf("reset %v outside [now, now+24h]", time.Unix(0, r))
			}
		}
		if (rl.ReqLeft != health.RateLimitUnset && rl.ReqReset == 0) || (rl.TokLeft != health.RateLimitUnset && rl.TokReset == 0) {
			t.Fatalf("a learned count without a reset: %+v", rl)
		}
		ks := health.NewKeyState("fuzz")
		ks.NoteRateLimits(rl, 0, 0)
		_ = ks.State(rlNow.UnixNano())
	})
}
