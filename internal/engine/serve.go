package engine

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/llmhedge/caddy-llm-hedge/internal/health"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// refuseMethod answers a completion path asked with another method than
// POST as a forwarded call is refused: one request log line (its method and
// bounded path) and the requests metric. A WebSocket upgrade gets 426:
// Codex opens its Responses WebSocket first and falls back to HTTP at once
// on a 426 only (on any other status it retries the handshake five times).
func (h *Engine) refuseMethod(w http.ResponseWriter, r *http.Request, d wire.Dialect) {
	st := newRequestState(h, r, d)
	st.forwarded = true
	defer finish(st)
	if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		st.refuse(w, http.StatusUpgradeRequired, "WebSocket is not served on this completion path: use POST over HTTP")
		return
	}
	w.Header().Set("Allow", http.MethodPost)
	st.refuse(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on this completion path: use POST", r.Method))
}

// serveCompletion is the request path of a completion: read the body once,
// plan the candidates, race attempts until one is ready, commit it and
// relay, or answer with the error in the client's dialect.
func (h *Engine) serveCompletion(w http.ResponseWriter, r *http.Request, d wire.Dialect) error {
	st := newRequestState(h, r, d)
	defer func() {
		finish(st)
		st.lease.release() // after drain (below): no attempt reads the body
		st.releaseAnswers()
	}()

	body, lease, err := readLeasedBody(r, h.MaxBody)
	st.lease = lease
	if err != nil {
		if errors.Is(err, wire.ErrBodyTooLarge) {
			st.refuse(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds the %d-byte limit (max_body)", h.MaxBody))
			return nil
		}
		st.refuse(w, bodyStatus(err), err.Error())
		return nil
	}
	req, err := wire.ParseCompletion(d, r.URL.Path, r.URL.RawQuery, body)
	if err != nil {
		st.refuse(w, http.StatusBadRequest, err.Error())
		return nil
	}
	req.SizeClass = health.SizeClass(len(body))
	if h.affinity != nil {
		req.SessionKey = sessionKey(d, body, &req.Top, r.Header, h.AffinityHeader)
	}
	st.req = req
	pinResponse(st, body)
	h.hedgeBudget.RecordRequestN(st.start, st.inputEstimate())
	h.retryBudget.RecordRequest(st.start)

	ctx, cancel := h.requestContext(r)
	defer cancel()
	st.ctx = ctx

	winner := race(st, r)
	defer st.drain()
	if winner == nil {
		answerFailure(w, st)
		return nil
	}
	commit(w, r, st, winner)
	return nil
}
