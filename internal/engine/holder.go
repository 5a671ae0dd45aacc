package engine

import (
	"net/http"
	"strconv"

	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// A remembered holder that fails (SPEC 16). The owner table can be wrong
// (a stale entry; mirrors of one account that all hold an object) and a
// right holder can be down: neither may turn an outage into a final
// answer. A request naming an object whose holder is known goes to that
// holder first and alone (no hedge, no fallback model); only when the
// holder fails with a provider-level error (5xx, reset, timeout) or is
// skipped (cooling down, busy, out of quota) are the other candidates
// asked, as in a discovery: one that says the object is not there moves
// on without charge, the first that accepts becomes the holder. The
// holder's own not-found is final, as before. When no candidate accepts
// and one that could hold the object was not heard from, the client gets
// 503 with Retry-After (retryable), never the others' not-found: SDKs do
// not retry a 404, and agents drop the conversation on one.

// holderPlan orders the candidates of a request naming an object whose
// holder is known: the holder first, then the other candidates a
// discovery may ask (discoveryCandidates), behind a discovery that knows
// the holder. Without a known holder it is pinPlan.
func (st *requestState) holderPlan(cands []*provider) []*provider {
	holder := st.pinned
	out := st.pinPlan(cands)
	if st.pinned == nil || st.discover != nil || st.h.owners == nil {
		return out
	}
	ordered := make([]*provider, 0, len(cands))
	ordered = append(ordered, holder)
	for _, p := range cands {
		if p != holder {
			ordered = append(ordered, p)
		}
	}
	st.discover = st.h.holderDiscovery(st.r, st.pinRef, holder)
	return discoveryCandidates(ordered)
}

// holderDiscovery is the discovery that starts if holder fails: other
// requests do not wait for it (the holder is known to them too).
func (h *Engine) holderDiscovery(r *http.Request, o wire.ObjectRef, holder *provider) *discovery {
	return &discovery{key: discoveryKey{client: h.responseClient(r), id: o.TableKey()}, ref: o, holder: holder}
}

// objectUnsure reports whether a candidate that could hold the object
// was not heard from: an attempt failed with a provider-level error, or a
// candidate was skipped (cooling down, busy, out of quota, no usable key).
func (st *requestState) objectUnsure() bool {
	for _, a := range st.attempts {
		if a.class.ProviderLevel() {
			return true
		}
	}
	for _, s := range st.skips {
		switch s.Event {
		case "cooldown_skip", "busy_skip", "quota_skip", "keys_unavailable":
			return true
		}
	}
	return false
}

// holderDownMessage is the client's message when the candidates that
// answered do not hold the object and one that could was not heard from.
const holderDownMessage = "the object this request names could not be reached: a provider that may hold it failed or is cooling down; retry later"

// answerHolderDown answers 503 with Retry-After (the first cooling-down
// candidate's recovery, else 1 second) instead of a not-found.
func (st *requestState) answerHolderDown(w http.ResponseWriter, cands []*provider) {
	secs := recoverySeconds(clock(), cands)
	w.Header().Set("Retry-After", strconv.Itoa(max(1, secs)))
	st.outcome, st.status = OutcomeExhausted, http.StatusServiceUnavailable
	wire.WriteError(w, st.dialect, http.StatusServiceUnavailable, holderDownMessage)
}

// holderTargets are the providers a forwarded call on an object whose
// holder p is known may go to: p, then (once p failed) the other
// providers of the dialect a discovery may ask.
func holderTargets(st *requestState, o wire.ObjectRef, p *provider, d wire.Dialect) []*provider {
	h := st.h
	cands := h.auxCandidates(d)
	ordered := make([]*provider, 0, len(cands)+1)
	ordered = append(ordered, p)
	for _, c := range cands {
		if c != p {
			ordered = append(ordered, c)
		}
	}
	st.discover = h.holderDiscovery(st.r, o, p)
	return discoveryCandidates(ordered)
}
