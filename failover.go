package llmhedge

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/caddyserver/caddy/v2"
)

// serveCompletion is the request path of a completion: read the body once,
// plan the candidates, race attempts until one is ready, commit it and
// relay, or answer with the error in the client's dialect.
func (h *Handler) serveCompletion(w http.ResponseWriter, r *http.Request, d dialect) error {
	st := newRequestState(h, r, d)
	defer h.finish(st)

	body, err := readBody(r, h.MaxBody)
	if err != nil {
		if errors.Is(err, errBodyTooLarge) {
			st.refuse(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds the %d-byte limit (max_body)", h.MaxBody))
			return nil
		}
		st.refuse(w, bodyStatus(err), err.Error())
		return nil
	}
	req, err := parseCompletion(d, body)
	if err != nil {
		st.refuse(w, http.StatusBadRequest, err.Error())
		return nil
	}
	req.sizeClass = sizeClass(len(body))
	if h.affinity != nil {
		req.sessionKey = sessionKey(d, body, r.Header, h.Affinity.Header)
	}
	st.req = req
	h.hedgeBudget.recordRequest(st.start)
	h.retryBudget.recordRequest(st.start)

	ctx, cancel := h.requestContext(r)
	defer cancel()
	st.ctx = ctx

	winner := h.race(st, r)
	defer st.drain()
	if winner == nil {
		h.answerFailure(w, st)
		return nil
	}
	h.commit(w, r, st, winner)
	return nil
}

// candidates lists the providers that serve model in dialect d, in the
// order to try them: by priority, weighted random within a priority, and
// the session's affinity pick first.
func (h *Handler) candidates(d dialect, model, session string) []*provider {
	out := make([]*provider, 0, len(h.providers))
	for _, p := range h.providers {
		if p.serves(d, model) {
			out = append(out, p)
		}
	}
	if len(out) < 2 {
		return out
	}
	// Efraimidis-Spirakis: sorting by u^(1/w) descending is a weighted
	// random permutation; priority sorts first.
	keys := make(map[*provider]float64, len(out))
	for _, p := range out {
		keys[p] = math.Pow(h.rand(), 1/float64(p.weight))
	}
	slices.SortStableFunc(out, func(a, b *provider) int {
		if c := cmp.Compare(a.cfg.Priority, b.cfg.Priority); c != 0 {
			return c
		}
		return cmp.Compare(keys[b], keys[a])
	})
	if session != "" && h.affinity != nil {
		if i := h.affinityPick(out, model, session); i > 0 {
			p := out[i]
			copy(out[1:i+1], out[:i])
			out[0] = p
		}
	}
	return out
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
func (h *Handler) affinityPick(cands []*provider, model, session string) int {
	now := clock()
	if name, ok := h.affinity.get(session, now); ok {
		for i, p := range cands {
			if p.name == name && p.health.state(now) == stateClosed && p.cfg.Priority <= bestOpenTier(cands, now) {
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
		if p.health.state(now) == stateClosed {
			names = append(names, p.name)
			idx = append(idx, i)
		}
	}
	if k := rendezvousPick(session, names); k >= 0 {
		return idx[k]
	}
	return -1
}

// bestOpenTier is the best priority among cands (in priority order) that
// has a provider whose breaker is closed or half-open (ready for a probe).
func bestOpenTier(cands []*provider, now time.Time) int {
	for _, p := range cands {
		if p.health.state(now) != stateOpen {
			return p.cfg.Priority
		}
	}
	return math.MaxInt
}

// answerFailure writes the final error when no attempt could commit
// (SPEC 6): a request-level error passes through as the provider sent it;
// a client that left gets nothing; otherwise 503 (or 504, or the 4xx every
// provider agreed on) with the last upstream error in the message.
func (h *Handler) answerFailure(w http.ResponseWriter, st *requestState) {
	last := st.lastFailure()
	switch {
	case st.outcome == outcomeClientAbort:
		return
	case last != nil && last.class.passedThrough():
		st.outcome, st.status = outcomeClientError, last.status
		passThrough(w, last)
		return
	}
	if st.plan != nil && len(st.plan.cands) == 0 {
		// No configured provider serves this model in this dialect: the
		// request names something that does not exist here.
		st.outcome = outcomeClientError
		writeError(w, st.dialect, http.StatusNotFound,
			fmt.Sprintf("model %q: no configured provider serves it for the %s API", st.req.model, st.dialect))
		return
	}
	// The client reads what kind of failure it was, never which provider
	// failed or why: that is in the request log line (SPEC 15).
	status, msg := http.StatusServiceUnavailable, "no provider could serve the request"
	if last != nil {
		if s := st.agreedStatus(); s != 0 {
			status = s
		}
		msg = failureMessage(status, last.class)
		if last.hasRA && last.retryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(last.retryAfter.Seconds()))))
		}
	}
	if st.timedOut() {
		status, msg = http.StatusGatewayTimeout, "request exceeded the total timeout: upstream timed out"
		st.outcome = outcomeTimeout
	} else if !st.recoverAt.IsZero() {
		// The recovery as it stands now, not as it was when the candidates
		// were skipped: a failed probe has re-opened its provider since.
		if secs := recoverySeconds(clock(), st.plan.cands); secs > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(secs))
		}
	}
	if st.outcome == "" {
		st.outcome = outcomeExhausted
		if len(st.attempts) == 0 {
			st.outcome = outcomeUpstreamError
		}
	}
	st.status = status // finish logs it: one line per request, not a second one here
	writeError(w, st.dialect, status, msg)
}

// failureMessage is the client's message when every attempt failed for
// the providers' reasons: generic, in the words of the status.
func failureMessage(status int, last failClass) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "all providers failed: upstream rate limited"
	case status == http.StatusNotFound:
		return "all providers failed: model not found"
	case last == classFirstByteTimeout || last == classResponseTimeout:
		return "all providers failed: upstream timed out"
	}
	return "all providers failed: upstream unavailable"
}

// passThrough relays a request-level upstream error unchanged.
func passThrough(w http.ResponseWriter, a *attempt) {
	hdr := w.Header()
	for _, k := range []string{"Content-Type", "Request-Id", "X-Request-Id", "Retry-After", "X-Should-Retry"} {
		if v := a.errHeader.Get(k); v != "" {
			hdr.Set(k, v)
		}
	}
	if hdr.Get("Content-Type") == "" {
		hdr.Set("Content-Type", "application/json")
	}
	hdr.Set("Content-Length", strconv.Itoa(len(a.errBody)))
	w.WriteHeader(a.status)
	_, _ = w.Write(a.errBody)
}

// auxCandidates orders the providers of dialect d for a non-completion
// call: any model, by priority then weight.
func (h *Handler) auxCandidates(d dialect) []*provider {
	out := make([]*provider, 0, len(h.providers))
	for _, p := range h.providers {
		if p.dialect == dialectNone || p.dialect == d {
			out = append(out, p)
		}
	}
	slices.SortStableFunc(out, func(a, b *provider) int { return cmp.Compare(a.cfg.Priority, b.cfg.Priority) })
	return out
}

// forward sends a non-completion request (GET /v1/models, count_tokens,
// ...) to one provider, failing over on connection errors only: these
// calls are cheap and idempotent enough to move, but never hedged.
func (h *Handler) forward(w http.ResponseWriter, r *http.Request) error {
	d := dialectOfAuxPath(r.URL.Path, r.Header)
	body, err := readBody(r, h.MaxBody)
	if err != nil {
		writeError(w, d, bodyStatus(err), err.Error())
		return nil
	}
	repl, _ := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if repl == nil {
		repl = caddy.NewReplacer()
	}
	ctx, cancel := h.requestContext(r)
	defer cancel()
	var lastErr error
	cands := h.auxCandidates(d)
	for i, p := range cands {
		now := clock()
		if ok, probe := p.health.admit(now, ""); probe {
			// a forwarded call is not a fair probe of a completion path
			p.health.release(true)
		} else if !ok && (i < len(cands)-1 || lastErr != nil) {
			continue // open: skip it, unless it is the last hope
		}
		resp, err := h.forwardOnce(ctx, r, p, d, body, repl)
		if err != nil {
			lastErr = err
			if r.Context().Err() != nil {
				return nil
			}
			continue
		}
		defer resp.Body.Close()
		copyResponse(w, resp)
		return nil
	}
	msg := "no healthy provider for " + r.URL.Path
	status := http.StatusBadGateway
	if errors.Is(context.Cause(ctx), errTotalTimeout) {
		status = http.StatusGatewayTimeout
	}
	if lastErr != nil {
		// Which provider failed and why is for the operator (SPEC 15).
		h.logger.Info("forwarded request failed", zap.String("path", r.URL.Path), zap.Int("status", status), zap.Error(lastErr))
		msg += ": upstream unavailable"
	}
	writeError(w, d, status, msg)
	return nil
}
