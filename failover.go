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
	req, err := parseCompletion(d, r.URL.Path, r.URL.RawQuery, body)
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

// forward serves a call that is not a completion (SPEC 10, other paths):
// the models list and token counts, and the paths the forward globs list;
// every other path is 404. It goes to one provider with failover on
// connection errors, and on a 5xx too for the listed paths and GET/HEAD
// (they are side-effect free); never hedged. It gets the request log
// line, metrics, max_in_flight (held until the body is copied) and the
// idle timeout while the body is copied.
func (h *Handler) forward(w http.ResponseWriter, r *http.Request) error {
	d := dialectOfAuxPath(r.URL.Path, r.Header)
	st := newRequestState(h, r, d)
	st.forwarded = true
	defer h.finish(st)
	if err := checkEscapedPath(r.URL.EscapedPath()); err != nil {
		st.refuse(w, http.StatusBadRequest, err.Error())
		return nil
	}
	listed, allow := auxListed(r.Method, r.URL.Path)
	if !listed && !h.forwards(r.URL.Path) {
		if allow != "" {
			w.Header().Set("Allow", allow)
			st.refuse(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed here: use %s", r.Method, allow))
			return nil
		}
		st.refuse(w, http.StatusNotFound, "no such endpoint: this proxy serves completions, the models list and token counts (other paths need a forward rule)")
		return nil
	}
	move5xx := listed || r.Method == http.MethodGet || r.Method == http.MethodHead
	body, err := readBody(r, h.MaxBody)
	if err != nil {
		st.refuse(w, bodyStatus(err), err.Error())
		return nil
	}
	repl, _ := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if repl == nil {
		repl = caddy.NewReplacer()
	}
	ctx, cancel := h.requestContext(r)
	defer cancel()
	st.ctx = ctx
	cands := h.auxCandidates(d)
	for i, p := range cands {
		if p.busy() {
			st.skip(p, "busy_skip")
			continue
		}
		if ok, probe := p.health.admit(clock(), ""); probe {
			// a forwarded call is not a fair probe of a completion path
			p.health.release(true)
		} else if !ok && (i < len(cands)-1 || len(st.attempts) > 0) {
			st.skip(p, "cooldown_skip")
			continue // open: skip it, unless it is the last hope
		}
		a := &attempt{n: len(st.attempts) + 1, p: p, reason: "initial", start: time.Now()}
		if a.n > 1 {
			a.reason = "failover"
		}
		a.offset = a.start.Sub(st.start)
		a.ctx, a.cancel = attemptContext(ctx)
		defer a.cancel(nil)
		st.attempts = append(st.attempts, a)
		p.health.beginAttempt()
		resp, err := h.forwardOnce(a.ctx, r, p, d, body, repl)
		if err != nil {
			p.health.endAttempt()
			a.class, a.err = classifyTransportError(err, a.ctx, r.Context()), fmt.Errorf("provider %s: %w", p.name, err)
			h.metrics.attempt(p.name, "failed_"+string(a.class))
			if !a.class.providerLevel() { // the client left, or total ran out
				a.outcome = "client_abort"
				if a.class == classTotalTimeout {
					a.outcome = "total_timeout"
				}
				break
			}
			a.outcome = "retry_failed"
			continue
		}
		a.resp, a.status = resp, resp.StatusCode
		if move5xx && resp.StatusCode >= 500 {
			h.readUpstreamError(a, d, r.Context()) // kept for the answer if no other provider serves it
			p.health.endAttempt()
			h.metrics.attempt(p.name, "failed_"+string(a.class))
			a.outcome = "retry_failed"
			if a.class == classClientAbort {
				a.outcome = "client_abort"
				break
			}
			continue
		}
		a.firstEvent = max(time.Since(a.start), time.Millisecond)
		a.outcome = "request_success"
		st.winner, st.status = a, resp.StatusCode
		h.relayForwarded(w, st, a)
		return nil
	}
	if r.Context().Err() != nil {
		st.outcome = outcomeClientAbort
		return nil
	}
	for _, a := range slices.Backward(st.attempts) {
		if a.errBody != nil && !st.timedOut() {
			// no provider did better than a 5xx: the latest one is the answer
			st.outcome, st.status = outcomeExhausted, a.status
			passThrough(w, a)
			return nil
		}
	}
	status, msg := http.StatusBadGateway, "no provider could serve the request"
	if len(st.attempts) == 0 {
		status, msg = http.StatusServiceUnavailable, "no provider is available (cooling down or at max_in_flight)"
	}
	st.outcome = outcomeExhausted
	if st.timedOut() {
		status, msg, st.outcome = http.StatusGatewayTimeout, "request exceeded the total timeout", outcomeTimeout
	} else if len(st.attempts) == 0 {
		st.outcome = outcomeUpstreamError
	}
	st.status = status
	writeError(w, d, status, msg)
	return nil
}

// relayForwarded copies the chosen provider's answer to a forwarded call
// and sets the request's outcome. A body cut after the status went out can
// only abort the connection: never a second status.
func (h *Handler) relayForwarded(w http.ResponseWriter, st *requestState, a *attempt) {
	defer a.resp.Body.Close()
	idle := time.Duration(h.Timeouts.Idle)
	reason := copyResponse(w, a.resp, idle, func() { a.cancel(errIdleTimeout) })
	switch {
	case reason == "" && a.status < 400:
		st.outcome = outcomeSuccess
	case reason == "" && a.status < 500:
		st.outcome = outcomeClientError
	case reason == "":
		st.outcome = outcomeUpstreamError
	case reason == "client_gone" || st.r.Context().Err() != nil:
		st.outcome = outcomeClientAbort
	default:
		st.outcome = outcomeStreamError
		st.relay.Reason = reason
		switch cause := context.Cause(a.ctx); {
		case errors.Is(cause, errIdleTimeout):
			st.relay.Reason = "idle_timeout"
		case errors.Is(cause, errTotalTimeout):
			st.relay.Reason = "total_timeout"
		}
	}
	if st.outcome == outcomeStreamError {
		panic(http.ErrAbortHandler) // forward's deferred finish still logs the request
	}
}
