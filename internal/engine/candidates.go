package engine

import (
	"cmp"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/affinity"
	"github.com/llmhedge/caddy-llm-hedge/internal/health"
	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/routing"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// candidates lists the providers that serve model in dialect d, in the
// order to try them: by priority, each tier ordered by the lb_policy
// (routing.go), and the session's affinity pick first, unless adaptive
// routing finds it over 3x slower than its tier's fastest. The decision
// says what the first tier's policy chose and why.
func (h *Engine) candidates(d wire.Dialect, model, session string, sizeClass int) ([]*provider, routeDecision) {
	out := make([]*provider, 0, len(h.providers))
	for _, p := range h.providers {
		if p.serves(d, model) {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return out, routeDecision{}
	}
	slices.SortStableFunc(out, func(a, b *provider) int { return cmp.Compare(a.cfg.Priority, b.cfg.Priority) })
	now := clock()
	var dec routeDecision
	for i := 0; i < len(out); {
		j := i + 1
		for j < len(out) && out[j].cfg.Priority == out[i].cfg.Priority {
			j++
		}
		if td := h.orderTier(out[i:j], sizeClass, now, i == 0); i == 0 {
			dec = td
		}
		i = j
	}
	if len(out) < 2 || session == "" || h.affinity == nil {
		return out, dec
	}
	i := h.affinityPick(out, model, session)
	if i < 0 {
		return out, dec
	}
	p := out[i]
	if h.policy == routing.Adaptive {
		if slow, fastest, est := affinityTooSlow(out, p, sizeClass, now); slow {
			dec.why, dec.moved, dec.movedEst = whyAffinityMoved, p, est
			if dec.best == nil && dec.pick != nil {
				dec.bestEst = fastest
			}
			return out, dec
		}
	}
	copy(out[1:i+1], out[:i])
	out[0] = p
	dec.pick, dec.why = p, whyAffinity
	dec.est, _ = p.health.Route.FirstEvent(sizeClass, now)
	dec.best, dec.cost = nil, 0
	return out, dec
}

// affinityPick chooses the provider for a session: the remembered winner
// when it is still a healthy candidate, else rendezvous hashing over the
// healthy candidates of the best priority, so instances agree without
// sharing state. A provider whose breaker is open is never picked.
//
// Priorities are the operator's preference and win over winner memory
// across tiers: the remembered winner holds the session only while no
// better tier has a provider that is closed or ready for its probe, so a
// conversation that failed over to a fallback tier returns (and probes the
// primary) once the primary recovers.
func (h *Engine) affinityPick(cands []*provider, model, session string) int {
	now := clock()
	if name, ok := h.affinity.Get(session, now); ok {
		for i, p := range cands {
			if p.name == name && p.health.State(now) == health.StateClosed && p.cfg.Priority <= bestOpenTier(cands, now) {
				return i
			}
		}
	}
	best := cands[0].cfg.Priority
	var names []string
	var idx []int
	for i, p := range cands {
		if p.cfg.Priority != best {
			break
		}
		if p.health.State(now) == health.StateClosed {
			names = append(names, p.name)
			idx = append(idx, i)
		}
	}
	if k := affinity.Pick(session, names); k >= 0 {
		return idx[k]
	}
	return -1
}

// bestOpenTier is the best priority among cands (in priority order) that
// has a provider whose breaker is closed or half-open (ready for a probe).
func bestOpenTier(cands []*provider, now time.Time) int {
	for _, p := range cands {
		if p.health.State(now) != health.StateOpen {
			return p.cfg.Priority
		}
	}
	return math.MaxInt
}

// plan is the ordered candidate list of one requested model.
type plan struct {
	model string
	cands []*provider
	used  []bool
	tries map[*provider]int
}

func newPlan(cands []*provider, model string) *plan {
	return &plan{model: model, cands: cands, used: make([]bool, len(cands)), tries: make(map[*provider]int, len(cands))}
}

func (p *plan) remaining() int {
	n := 0
	for _, u := range p.used {
		if !u {
			n++
		}
	}
	return n
}

// reopen puts p back among the candidates left: one of its keys failed,
// and another may serve.
func (p *plan) reopen(pr *provider) {
	for i, c := range p.cands {
		if c == pr {
			p.used[i] = false
		}
	}
}

// busy reports whether the provider has max_in_flight attempts running.
func (p *provider) busy() bool {
	return p.cfg.MaxInFlight > 0 && p.health.InFlightNow() >= int64(p.cfg.MaxInFlight)
}

// earliestRecovery picks, among providers that are all cooling down, the one
// whose open period ends first (ties go to the earlier in hs, which is in
// priority order). A closed provider recovers "now" and returns a zero time.
func earliestRecovery(hs []*health.Provider) (*health.Provider, time.Time) {
	var best *health.Provider
	var bestUntil int64
	for _, ph := range hs {
		if ph == nil {
			continue
		}
		until := ph.OpenUntilNs.Load()
		if best == nil || until < bestUntil {
			best, bestUntil = ph, until
		}
	}
	if best == nil || bestUntil == 0 {
		return best, time.Time{}
	}
	return best, time.Unix(0, bestUntil)
}

// recoverySeconds is the Retry-After, in whole seconds rounded up, for a
// client turned away while candidates cool down: the time until the first
// open period among cands ends, or 1 when one has ended already (its probe
// decides soon). Zero when none of them is open.
func recoverySeconds(now time.Time, cands []*provider) int {
	var first int64
	for _, p := range cands {
		if until := p.health.OpenUntilNs.Load(); until != 0 && (first == 0 || until < first) {
			first = until
		}
	}
	if first == 0 {
		return 0
	}
	return max(1, int(math.Ceil(float64(first-now.UnixNano())/float64(time.Second))))
}

// failureRetryAfter is the client's Retry-After, in seconds (0: none),
// when every attempt failed and the last one carried a Retry-After: that
// provider's word, unless another candidate is back sooner; with a
// candidate whose breaker is closed, none (it may be tried at once, so
// the client's own backoff is the better wait, not the last provider's).
func failureRetryAfter(now time.Time, pl *plan, last *attempt) int {
	if !last.hasRA || last.retryAfter <= 0 {
		return 0
	}
	secs := int(math.Ceil(last.retryAfter.Seconds()))
	if pl == nil {
		return secs
	}
	others := make([]*provider, 0, len(pl.cands))
	for _, p := range pl.cands {
		if p == last.p {
			continue
		}
		if p.health.OpenUntilNs.Load() <= now.UnixNano() {
			return 0
		}
		others = append(others, p)
	}
	if first := recoverySeconds(now, others); first > 0 && first < secs {
		return first
	}
	return secs
}

// unusedWithin reports whether a candidate of priority tier or better is
// still unused.
func (p *plan) unusedWithin(tier int) bool {
	for i, c := range p.cands {
		if !p.used[i] && c.cfg.Priority <= tier {
			return true
		}
	}
	return false
}

// sessionKey returns the key that identifies a conversation for affinity, or
// "" when the request carries none. With headerName set only that header is
// used. Otherwise Anthropic's metadata.user_id, or OpenAI's prompt_cache_key
// (literally the cache key), user, then safety_identifier. The body must be
// valid JSON (parseCompletion checked it); only its top level is read, from
// the index of top-level members parseCompletion's walk left in top (nil: a
// walk of the top level), so a 1 MiB prompt costs no second pass and the same
// names inside messages never match.
func sessionKey(d wire.Dialect, body []byte, top *jsonscan.Top, header http.Header, headerName string) string {
	if headerName != "" {
		return strings.TrimSpace(header.Get(headerName))
	}
	if d == wire.DialectNone {
		return ""
	}
	return d.SessionKey(body, top, header)
}

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
func keyFor(st *requestState, p *provider, now time.Time) (keyUse, bool) {
	h := st.h
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
		h.obs.QuotaSkip(p.name)
	}
	st.skip(p, why)
	return keyUse{}, false
}

// unservedStatus is the answer's status before any provider's own: 429
// when no attempt went out and a candidate's own Retry-After on a 429
// still runs (launchProbe), else 503.
func unservedStatus(st *requestState) (int, string) {
	if len(st.attempts) == 0 && st.rateLimited {
		return http.StatusTooManyRequests, "all providers are rate limited: retry after the time they gave"
	}
	return http.StatusServiceUnavailable, "no provider could serve the request"
}
