package sim

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// Quota is a rate limit of the simulated provider: at most N per window of
// Per, counted per API key (requests without a key share one count).
type Quota struct {
	N   int64          `json:"n"`
	Per caddy.Duration `json:"per"`
}

// quotaBook counts each key's use in its current window.
type quotaBook struct {
	mu   sync.Mutex
	keys map[string]*quotaWindow
}

type quotaWindow struct {
	reqStart, tokStart time.Time
	reqs, toks         int64
}

// quotaVerdict is what one request's charge left.
type quotaVerdict struct {
	ok                 bool
	reqLeft, tokLeft   int64
	reqReset, tokReset time.Time
}

// charge counts a request of tokens (input + output) on key, unless it
// would exceed a quota; windows start at a key's first request.
func (b *quotaBook) charge(cfg *Config, key string, tokens int64, t time.Time) quotaVerdict {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.keys == nil {
		b.keys = map[string]*quotaWindow{}
	}
	w := b.keys[key]
	if w == nil {
		w = &quotaWindow{reqStart: t, tokStart: t}
		b.keys[key] = w
	}
	v := quotaVerdict{ok: true, reqLeft: -1, tokLeft: -1}
	if q := cfg.QuotaRequests; q != nil {
		if !t.Before(w.reqStart.Add(time.Duration(q.Per))) {
			w.reqStart, w.reqs = t, 0
		}
		v.reqReset = w.reqStart.Add(time.Duration(q.Per))
		v.ok = v.ok && w.reqs+1 <= q.N
	}
	if q := cfg.QuotaTokens; q != nil {
		if !t.Before(w.tokStart.Add(time.Duration(q.Per))) {
			w.tokStart, w.toks = t, 0
		}
		v.tokReset = w.tokStart.Add(time.Duration(q.Per))
		v.ok = v.ok && w.toks+tokens <= q.N
	}
	if v.ok {
		w.reqs++
		w.toks += tokens
	}
	if q := cfg.QuotaRequests; q != nil {
		v.reqLeft = q.N - w.reqs
	}
	if q := cfg.QuotaTokens; q != nil {
		v.tokLeft = max(0, q.N-w.toks)
	}
	return v
}

// presentedKey is the API key a request carries, in either dialect.
func presentedKey(r *http.Request) string {
	if k := r.Header.Get("X-Api-Key"); k != "" {
		return k
	}
	if k := r.Header.Get("X-Goog-Api-Key"); k != "" {
		return k
	}
	a := r.Header.Get("Authorization")
	if len(a) > 7 && a[:7] == "Bearer " {
		return a[7:]
	}
	return ""
}

// chargeQuota applies the quotas to the request: the rate-limit headers of
// its dialect go on every answer, and a request over a quota gets 429 with
// Retry-After until the reset. It reports whether the request may go on.
func (ex *exchange) chargeQuota() bool {
	cfg := &ex.p.cfg
	if cfg.QuotaRequests == nil && cfg.QuotaTokens == nil {
		return true
	}
	t := now()
	v := ex.s.quota.charge(cfg, presentedKey(ex.r), int64(ex.inputTokens+cfg.Tokens), t)
	h := ex.w.Header()
	anthropic := ex.wire.name() == "anthropic"
	if cfg.QuotaRequests != nil {
		rateLimitHeaders(h, anthropic, cfg.QuotaResets, "requests", cfg.QuotaRequests.N, v.reqLeft, v.reqReset, t)
	}
	if cfg.QuotaTokens != nil {
		rateLimitHeaders(h, anthropic, cfg.QuotaResets, "tokens", cfg.QuotaTokens.N, v.tokLeft, v.tokReset, t)
	}
	if v.ok {
		return true
	}
	reset := v.reqReset
	if cfg.QuotaRequests == nil || (v.reqLeft > 0 && !v.tokReset.IsZero()) {
		reset = v.tokReset
	}
	secs := int64(reset.Sub(t)/time.Second) + 1
	h.Set("Retry-After", strconv.FormatInt(max(1, secs), 10))
	ex.fail(http.StatusTooManyRequests, "")
	return false
}

// rateLimitHeaders writes one limit in the family of the dialect:
// Anthropic's with an RFC 3339 reset (rounded up to the second), OpenAI's
// with the time to the reset as a Go duration; resets (Config.QuotaResets)
// may instead be absent, bare seconds, or in the past.
func rateLimitHeaders(h http.Header, anthropic bool, resets, kind string, limit, left int64, reset, t time.Time) {
	prefix, limitName, leftName, resetName := "x-ratelimit-", "limit-"+kind, "remaining-"+kind, "reset-"+kind
	if anthropic {
		prefix, limitName, leftName, resetName = "anthropic-ratelimit-"+kind+"-", "limit", "remaining", "reset"
	}
	h.Set(prefix+limitName, strconv.FormatInt(limit, 10))
	h.Set(prefix+leftName, strconv.FormatInt(left, 10))
	switch {
	case resets == "azure":
	case resets == "seconds":
		h.Set(prefix+resetName, strconv.FormatInt(int64((reset.Sub(t)+time.Second-1)/time.Second), 10))
	case resets == "past":
		h.Set(prefix+resetName, t.Add(-10*time.Second).UTC().Format(time.RFC3339))
	case anthropic:
		h.Set(prefix+resetName, reset.Add(time.Second-1).Truncate(time.Second).UTC().Format(time.RFC3339))
	default:
		h.Set(prefix+resetName, reset.Sub(t).Round(time.Millisecond).String())
	}
}
