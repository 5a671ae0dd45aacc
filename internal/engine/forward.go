package engine

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// auxCandidates orders the providers of dialect d for a non-completion
// call: any model, by priority then weight.
func (h *Engine) auxCandidates(d wire.Dialect) []*provider {
	out := make([]*provider, 0, len(h.providers))
	for _, p := range h.providers {
		// A cloud takes completions only; a Chat-only server completions
		// and its models list (chatModels).
		if apiServes(p.dialect, d) && p.proto == nil && !p.chatOnly {
			out = append(out, p)
		}
	}
	slices.SortStableFunc(out, func(a, b *provider) int { return cmp.Compare(a.cfg.Priority, b.cfg.Priority) })
	return out
}

// forward serves a call that is not a completion: the models list and token counts, and the paths the forward globs list;
// every other path is 404. It goes to one provider with failover on
// connection errors, and on a 5xx too for the listed paths and GET/HEAD
// (they are side-effect free); never hedged. It gets the request log
// line, metrics, max_in_flight (held until the body is copied) and the
// idle timeout while the body is copied.
func (h *Engine) forward(w http.ResponseWriter, r *http.Request) error {
	d, guessed := dialectOfAuxPath(r.URL.Path, r.Header)
	st := newRequestState(h, r, d)
	st.forwarded, st.dialectGuessed = true, guessed
	defer finish(st)
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
	ctx, cancel := h.requestContext(r)
	defer cancel()
	st.ctx = ctx
	cands, ok := forwardTargets(w, st, d)
	if !ok {
		return nil
	}
	if d == dialectOpenAI && chatModelsPath(r.Method, r.URL.Path) {
		cands = withChatOnly(h.providers, cands)
	}
	if len(cands) == 0 {
		// No provider takes this API's other paths (a pool of clouds or of
		// api chat servers only): nothing is cooling down, nothing can serve.
		st.refuse(w, http.StatusNotFound, fmt.Sprintf("no provider here serves %s for the %s API", clipPath(r.URL.EscapedPath()), d))
		return nil
	}
	// A call about one model goes to the providers serving it, with their
	// model rewrite, as a completion would (wire.ModelCall).
	mc, about := wire.ModelCallOf(r.Method, r.URL.EscapedPath(), body)
	if about {
		cands = slices.DeleteFunc(cands, func(p *provider) bool { return !p.serves(d, mc.Model) })
		if len(cands) == 0 {
			st.refuse(w, http.StatusNotFound, fmt.Sprintf("model %q: no configured provider serves it for the %s API", mc.Model, d))
			return nil
		}
	}
	for i, p := range cands {
		if p.busy() {
			st.skip(p, "busy_skip")
			continue
		}
		if ok, probe := p.health.Admit(clock(), ""); probe {
			declineProbe(p) // a forwarded call is not a fair probe of a completion path
		} else if !ok && (i < len(cands)-1 || len(st.attempts) > 0) {
			st.skip(p, "cooldown_skip")
			continue // open: skip it, unless it is the last hope
		}
		a := &attempt{n: len(st.attempts) + 1, p: p, reason: "initial", start: time.Now()}
		if a.n > 1 {
			a.reason = "failover"
			if st.discover != nil && st.discover.misses > 0 {
				a.reason = launchDiscoverReason
			}
		}
		a.offset = a.start.Sub(st.start)
		a.ctx, a.cancel = attemptContext(ctx)
		defer a.cancel(nil)
		st.attempts = append(st.attempts, a)
		a.begin()
		path, body := r.URL.EscapedPath(), body
		if about {
			path, body = mc.Rewrite(path, body, p.upstreamModel(mc.Model))
		}
		resp, err := h.forwardOnce(a.ctx, r, p, d, path, body)
		if err != nil {
			a.end()
			a.class, a.err = wire.ClassifyTransportError(err, a.ctx, r.Context()), fmt.Errorf("provider %s: %w", p.name, err)
			h.obs.Attempt(p.name, "failed_"+string(a.class))
			if !a.class.ProviderLevel() { // the client left, or total ran out
				a.outcome = "client_abort"
				if a.class == wire.ClassTotalTimeout {
					a.outcome = "total_timeout"
				}
				break
			}
			a.outcome = "provider_error"
			continue
		}
		a.resp, a.status = resp, resp.StatusCode
		if st.discover != nil {
			if forwardMissed(st, a, i == len(cands)-1) {
				continue // not there: the next candidate, no failover
			}
			if a.errBody != nil { // read to tell: relayed as it came
				a.end()
				if a.class == wire.ClassObjectMissing && st.objectUnsure() {
					a.outcome = "discover_miss"
					st.answerHolderDown(w, cands) // holder.go
					return nil
				}
				a.outcome = "request_error"
				st.winner, st.status, st.outcome = a, a.status, OutcomeClientError
				passThrough(w, a)
				return nil
			}
			if resp.StatusCode < 400 {
				endDiscovery(st, p, false)
			}
		}
		if move5xx && resp.StatusCode >= 500 {
			h.readUpstreamError(a, d, r.Context()) // kept for the answer if no other provider serves it
			a.end()
			h.obs.Attempt(p.name, "failed_"+string(a.class))
			a.outcome = "provider_error"
			if a.class == wire.ClassClientAbort {
				a.outcome = "client_abort"
				break
			}
			continue
		}
		a.firstEvent = max(time.Since(a.start), time.Millisecond)
		a.outcome = "request_success"
		noteCreated(st, a) // objects.go
		st.winner, st.status = a, resp.StatusCode
		relayForwarded(w, st, a)
		return nil
	}
	if r.Context().Err() != nil {
		st.outcome = OutcomeClientAbort
		return nil
	}
	for _, a := range slices.Backward(st.attempts) {
		if a.errBody != nil && !st.timedOut() {
			// no provider did better than a 5xx: the latest one is the answer
			st.outcome, st.status = OutcomeExhausted, a.status
			passThrough(w, a)
			return nil
		}
	}
	status, msg := http.StatusBadGateway, "no provider could serve the request"
	if len(st.attempts) == 0 {
		status, msg = http.StatusServiceUnavailable, "no provider is available (cooling down or at max_in_flight)"
	}
	st.outcome = OutcomeExhausted
	if st.timedOut() {
		status, msg, st.outcome = http.StatusGatewayTimeout, "request exceeded the total timeout", OutcomeTimeout
	} else if len(st.attempts) == 0 {
		st.outcome = OutcomeUpstreamError
	}
	st.status = status
	wire.WriteError(w, d, status, msg)
	return nil
}

// relayForwarded copies the chosen provider's answer to a forwarded call
// and sets the request's outcome. A body cut after the status went out can
// only abort the connection: never a second status.
func relayForwarded(w http.ResponseWriter, st *requestState, a *attempt) {
	h := st.h
	defer a.resp.Body.Close()
	idle := time.Duration(h.Timeouts.Idle)
	reason := copyResponse(w, a.resp, idle, func() { a.cancel(errIdleTimeout) })
	switch {
	case reason == "" && a.status < 400:
		st.outcome = OutcomeSuccess
	case reason == "" && a.status < 500:
		st.outcome = OutcomeClientError
	case reason == "":
		st.outcome = OutcomeUpstreamError
	case reason == "client_gone" || st.r.Context().Err() != nil:
		st.outcome, a.outcome = OutcomeClientAbort, "client_abort"
	default:
		st.outcome, a.outcome = OutcomeStreamError, "stream_error"
		st.relay.Reason = reason
		switch cause := context.Cause(a.ctx); {
		case errors.Is(cause, errIdleTimeout):
			st.relay.Reason = "idle_timeout"
		case errors.Is(cause, wire.ErrTotalTimeout):
			st.relay.Reason = "total_timeout"
		}
	}
	if st.outcome == OutcomeStreamError {
		panic(http.ErrAbortHandler) // forward's deferred finish still logs the request
	}
}

// forwardOnce sends a non-completion request to one provider. The path is
// the client's escaped path, checked by checkEscapedPath: it stays under the
// provider's base path (a model segment rewritten by the provider's `model`
// rules is one escaped segment: wire.ModelCall).
func (h *Engine) forwardOnce(ctx context.Context, r *http.Request, p *provider, d wire.Dialect, escapedPath string, body []byte) (*http.Response, error) {
	var rd io.Reader
	if len(body) > 0 {
		rd = bytes.NewReader(body)
	}
	up, err := http.NewRequestWithContext(ctx, r.Method, p.url(escapedPath, p.upstreamQuery(r.URL.RawQuery)), rd)
	if err != nil {
		return nil, err
	}
	up.Header = p.upstreamHeader(r, d, p.key)
	up.ContentLength = int64(len(body))
	return roundTrip(p.transport, up, noReplay(up))
}

// copyResponse relays a forwarded response as is. An upstream that sends
// nothing for idle (a slow client does not count) is cut: abort is called
// and the read fails. It returns why the copy ended early: "" when
// complete, else client_gone or read_error.
func copyResponse(w http.ResponseWriter, resp *http.Response, idle time.Duration, abort func()) string {
	copyHeader(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	timer := stoppedTimer()
	if idle > 0 {
		timer = time.AfterFunc(idle, abort)
	}
	defer timer.Stop()
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			timer.Stop()
			if _, werr := w.Write(buf[:n]); werr != nil {
				return "client_gone"
			}
			_ = rc.Flush()
			if idle > 0 {
				timer.Reset(idle)
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return "read_error"
			}
			return ""
		}
	}
}

// CheckForwardGlob refuses a forward glob that cannot match a request path.
func CheckForwardGlob(g string) error {
	if g != "*" && !strings.HasPrefix(g, "/") {
		return fmt.Errorf("%q: a path glob starts with / (or is * for every path)", g)
	}
	if _, err := path.Match(g, ""); err != nil {
		return fmt.Errorf("%q: %w", g, err)
	}
	return nil
}

// forwards reports whether a forward glob lists the (checked) path.
func (h *Engine) forwards(p string) bool {
	for _, g := range h.Forward {
		if GlobMatch(g, p) {
			return true
		}
	}
	return false
}

// checkEscapedPath refuses a request path that could leave the provider's
// base path or change the upstream URL's structure once a server decodes
// it: dot-segments, raw or encoded, and encoded `/`, `?`, `#` and `\`.
func checkEscapedPath(p string) error {
	if !strings.HasPrefix(p, "/") {
		return errors.New("request path must start with /")
	}
	for i := 0; i+2 < len(p); i++ {
		if p[i] != '%' {
			continue
		}
		switch strings.ToUpper(p[i+1 : i+3]) {
		case "2F", "3F", "23", "5C":
			return errors.New("request path holds an encoded /, ?, # or \\")
		}
	}
	for seg := range strings.SplitSeq(p, "/") {
		dec, err := url.PathUnescape(seg)
		if err != nil {
			return errors.New("request path holds an invalid escape")
		}
		if dec == "." || dec == ".." {
			return errors.New("request path holds a dot-segment (. or ..)")
		}
	}
	return nil
}

// zstdMaxWindow bounds the memory a zstd frame may ask for (level 19
// asks for 8 MiB; the clients that compress, Codex at level 3, 2 MiB).
const zstdMaxWindow = 8 << 20

// chatModelsPath reports whether a call is the models list or one model
// (GET /v1/models[/{id}]): what an OpenAI-compatible server (api chat)
// serves besides Chat Completions.
func chatModelsPath(method, p string) bool {
	if method != http.MethodGet {
		return false
	}
	p = strings.TrimSuffix(p, "/")
	rest, ok := strings.CutPrefix(p, "/v1/models")
	return ok && (rest == "" || (strings.HasPrefix(rest, "/") && !strings.Contains(rest[1:], "/")))
}

// withChatOnly adds the api chat providers of all to the candidates of a
// models call, in priority order.
func withChatOnly(all, cands []*provider) []*provider {
	n := len(cands)
	for _, p := range all {
		if p.chatOnly {
			cands = append(cands, p)
		}
	}
	if len(cands) > n {
		slices.SortStableFunc(cands, func(a, b *provider) int { return cmp.Compare(a.cfg.Priority, b.cfg.Priority) })
	}
	return cands
}

// clipPath bounds a request path quoted in an error message.
func clipPath(p string) string {
	if len(p) > 128 {
		return p[:128] + "..."
	}
	return p
}
