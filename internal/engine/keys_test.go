package engine

import (
	"net/http"
	"testing"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/health"
)

// Item 1: every learned count has a reset, and the key serves again at it.
func TestQuotaLearnedCountExpiresAtReset(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    http.Header
		want time.Duration // the reset, from rlNow
	}{
		{"azure: no reset header", hdr("x-ratelimit-remaining-requests", "0", "x-ratelimit-remaining-tokens", "0"), health.RateLimitWindow},
		{"bare seconds (openai family)", hdr("x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "1"), time.Second},
		{"bare seconds (anthropic family)", hdr("anthropic-ratelimit-requests-remaining", "0", "anthropic-ratelimit-requests-reset", "2.5"), 2500 * time.Millisecond},
		{"rfc 3339 in the past", hdr("anthropic-ratelimit-requests-remaining", "0", "anthropic-ratelimit-requests-reset", "2026-12-01T03:59:57Z"), 0},
		{"unreadable", hdr("x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "at noon"), health.RateLimitWindow},
	} {
		rl, ok := health.ParseRateLimits(tc.h, rlNow)
		if !ok || rl.ReqReset != rlNow.Add(tc.want).UnixNano() {
			t.Errorf("%s: %+v, want a reset %v from now", tc.name, rl, tc.want)
			continue
		}
		k := health.NewKeyState("k")
		k.NoteRateLimits(rl, 0, 0)
		at := rlNow.Add(tc.want).UnixNano()
		if tc.want > 0 {
			if s, until := k.Verdict(rlNow.UnixNano(), 1, 0); s != health.KeyExhausted || until != at {
				t.Errorf("%s: %s until %v, want exhausted until the reset", tc.name, s, time.Unix(0, until))
			}
		}
		if s, _ := k.Verdict(at, 1, 0); s != health.KeyOK {
			t.Errorf("%s: at the reset the key is %s, want ok", tc.name, s)
		}
	}
}

// Item 1: the admin state is routing's verdict (the provider's reserve, a
// request of at least one token), and an admin reset forgets the quota.
func TestQuotaAdminStateIsRoutingVerdict(t *testing.T) {
	ph := &health.Provider{}
	p := &provider{name: "p", health: ph, reserve: 50}
	k := &health.PoolKey{Secret: "k", St: ph.Keys.Key(health.Fingerprint("k"))}
	k.St.Reserve.Store(p.reserve)
	p.keys = []*health.PoolKey{k}
	now := rlNow.UnixNano()
	for _, h := range []http.Header{
		hdr("x-ratelimit-remaining-tokens", "0"),   // Azure: no tokens left, no reset
		hdr("x-ratelimit-remaining-requests", "1"), // 1 request, half kept in reserve
	} {
		k.St.ForgetQuota()
		rl, _ := health.ParseRateLimits(h, rlNow)
		k.St.NoteRateLimits(rl, 0, 0)
		picked, why, _ := p.pickKey(rlNow, 1)
		if picked != nil || why != "quota_skip" {
			t.Fatalf("%v: routing picked %v (%q), want a quota skip", h, picked, why)
		}
		if s := k.St.State(now); s != health.KeyExhausted {
			t.Fatalf("%v: admin state %q while routing skips the key", h, s)
		}
		ph.Reset(clock())
		if s := k.St.State(now); s != health.KeyOK {
			t.Fatalf("%v: after an admin reset %q, want ok", h, s)
		}
		if picked, _, _ := p.pickKey(rlNow, 1); picked != k {
			t.Fatalf("%v: after an admin reset routing skips the key", h)
		}
	}
}

// Item 2: a count past any real quota saturates: the key is not exhausted.
func TestQuotaCountSaturatesArithmetic(t *testing.T) {
	for _, v := range []string{"9223372036854775807", "99999999999999999999", "4611686018427387904"} {
		rl, ok := health.ParseRateLimits(hdr("x-ratelimit-remaining-requests", v, "x-ratelimit-remaining-tokens", v), rlNow)
		if !ok || rl.ReqLeft <= 0 || rl.TokLeft <= 0 {
			t.Fatalf("%s: %+v", v, rl)
		}
		k := health.NewKeyState("k")
		k.NoteRateLimits(rl, 0, 0)
		if s, _ := k.Verdict(rlNow.UnixNano(), 1_000_000, 10); s != health.KeyOK {
			t.Fatalf("remaining %s with a 10%% reserve: %s, want ok", v, s)
		}
		if _, _, ok := k.Take(rlNow.UnixNano(), 10); !ok {
			t.Fatalf("remaining %s: take refused", v)
		}
	}
	if e := health.QuotaEstimate([]byte(`{"max_tokens":9223372036854775807}`)); e <= 0 {
		t.Fatalf("estimate %d overflowed", e)
	}
}

// Item 13: a key no provisioned config names leaves the set.
func TestQuotaKeyStatesReleased(t *testing.T) {
	var ks health.Keys
	a, b := &health.PoolKey{St: ks.Key("aaaa")}, &health.PoolKey{St: ks.Key("bbbb")}
	old := []*health.PoolKey{a, b}
	next := []*health.PoolKey{{St: ks.Key("bbbb")}, {St: ks.Key("cccc")}} // the new config, provisioned first
	ks.Release(old)
	var fps []string
	for _, k := range ks.All() {
		fps = append(fps, k.Fp)
	}
	if len(fps) != 2 || fps[0] != "bbbb" || fps[1] != "cccc" {
		t.Fatalf("keys after the reload: %v, want [bbbb cccc]", fps)
	}
	if next[0].St != b.St {
		t.Fatal("a key both configs name lost its state")
	}
}
