package llmhedge

import (
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/health"
)

// Key pools: a provider with several configured keys uses each by its own
// health and quota. The state of a key is kept with its provider's health
// (it survives reloads) under its fingerprint, the first 8 hex digits of
// the key's SHA-256: the key itself lives only in the provider's memory.

// pickKey chooses the key of an attempt on p: among the usable keys, the
// one with the most quota left, then the fewest in flight. With none
// usable it returns nil, the skip event (quota_skip when a key is only out
// of quota or cooling, keys_unavailable when all are disabled) and the
// earliest time one may serve again (zero when none will by itself). A
// provider without configured keys gets (nil, "", 0): the client's key.
func (p *provider) pickKey(now time.Time, estimate int64) (*health.PoolKey, string, int64) {
	if len(p.keys) == 0 {
		return nil, "", 0
	}
	t := now.UnixNano()
	var best *health.PoolKey
	var br, bt, bf int64
	var until int64
	for _, k := range p.keys {
		state, u := k.St.Verdict(t, estimate, p.reserve)
		if state != health.KeyOK {
			if u != 0 && (until == 0 || u < until) {
				until = u
			}
			continue
		}
		r, tk := k.St.Score(t)
		f := k.St.InFlight.Load()
		if best == nil || r > br || (r == br && (tk > bt || (tk == bt && f < bf))) {
			best, br, bt, bf = k, r, tk, f
		}
	}
	if best != nil {
		return best, "", 0
	}
	if until == 0 {
		return nil, "keys_unavailable", 0
	}
	return nil, "quota_skip", until
}

// usableKeyBut reports whether p has a key other than k that is not
// disabled: a failure of k then leaves the provider in service.
func (p *provider) usableKeyBut(k *health.PoolKey) bool {
	for _, o := range p.keys {
		if o != k && !o.St.Disabled.Load() {
			return true
		}
	}
	return false
}

// keyUse is the key an attempt is about to use, its quota taken.
type keyUse struct {
	k            *health.PoolKey // nil: the client's own key
	sent, before int64
}

// attach gives the key to the attempt.
func (u keyUse) attach(a *attempt) { a.key, a.keySent, a.keyBefore = u.k, u.sent, u.before }

// release gives the key's quota back when the attempt was not sent.
func (u keyUse) release(now time.Time) {
	if u.k != nil {
		u.k.St.Release(now.UnixNano())
	}
}

// keyFor picks the key of an attempt on p now and takes one request of its
// quota (none with the client's own key). When p has keys but none may
// serve, it records the skip (quota_skip or keys_unavailable) and returns
// false: p counts as unavailable. The caller releases the key when it does
// not send the attempt after all.
func (h *Handler) keyFor(st *requestState, p *provider, now time.Time) (keyUse, bool) {
	if len(p.keys) == 0 {
		return keyUse{}, true
	}
	var why string
	var until int64
	for range len(p.keys) + 1 {
		var k *health.PoolKey
		k, why, until = p.pickKey(now, st.quotaEstimate())
		if why != "" {
			break
		}
		if sent, before, ok := k.St.Take(now.UnixNano(), p.reserve); ok {
			return keyUse{k: k, sent: sent, before: before}, true
		}
		// another request took that key's last request: choose again
		why, until = "quota_skip", now.Add(time.Second).UnixNano()
	}
	if why == "quota_skip" && st.noteQuotaSkip(p, until) {
		h.metrics.quotaSkip(p.name)
	}
	st.skip(p, why)
	return keyUse{}, false
}
