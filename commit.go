package llmhedge

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/caddyserver/caddy/v2"
)

// finishGrace is how long an OpenAI stream that sent its finish_reason may
// take to send [DONE] before the proxy ends it as a success itself.
const finishGrace = time.Second

// commit is the irreversible moment (SPEC t3): the winner's status,
// headers and buffered events go to the client, then the rest of the
// stream is relayed. From here on a failure can only be reported in-band.
func (h *Handler) commit(w http.ResponseWriter, r *http.Request, st *requestState, a *attempt) {
	defer a.cancel(nil)
	defer a.resp.Body.Close()
	copyHeader(w.Header(), a.resp.Header)
	st.status = http.StatusOK
	if a.body != nil {
		w.Header().Set("Content-Length", strconv.Itoa(len(a.body)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(a.body)
		st.drain()
		st.outcome = outcomeSuccess
		return
	}
	hdr := w.Header()
	hdr.Del("Content-Length")
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_, err := w.Write(a.gate.buffered())
	if err == nil {
		err = rc.Flush()
	}
	st.drain() // the client has its first token; now reap the losers
	if err != nil {
		st.outcome = outcomeClientAbort
		return
	}
	opts := relayOptions{
		Idle:          time.Duration(h.Timeouts.Idle),
		FinishGrace:   finishGrace,
		Choices:       a.gate.choices,
		DropMalformed: *h.Stream.DropMalformed,
		Coalesce:      true,
		OnStall: func(gap time.Duration) {
			h.logger.Warn("upstream stream stalled", zap.String("provider", a.p.name),
				zap.Duration("gap", gap), zap.Duration("idle_timeout", time.Duration(h.Timeouts.Idle)))
		},
	}
	st.relay = relayStream(st.ctx, w, rc.Flush, a.rd, st.dialect, &a.usage, opts, func() { a.cancel(errIdleTimeout) })
	switch {
	case st.relay.Complete:
		st.outcome = outcomeSuccess
		a.p.health.onSuccess(clock(), false)
	// Only the relay can tell a client that left from one that hung up
	// after reading the error event: that is no abort.
	case st.relay.Reason == "client_gone":
		st.outcome = outcomeClientAbort
	default:
		st.outcome = outcomeStreamError
		if st.relay.Reason != "total_timeout" {
			a.p.health.onFailureIn(a.epoch, clock(), h.cooldown, "stream_"+st.relay.Reason, 0, 0, st.plan.model, false)
		}
	}
}

var errIdleTimeout = errors.New("no stream event within the idle timeout")

// copyHeader copies an upstream response header for the client, without
// hop-by-hop fields.
func copyHeader(dst, src http.Header) {
	for k, v := range src {
		dst[k] = v
	}
	for _, k := range hopHeaders {
		if k != "Content-Length" {
			delete(dst, k)
		}
	}
}

// forwardOnce sends a non-completion request to one provider. The path is
// the client's escaped path, checked by checkEscapedPath: it stays under the
// provider's base path.
func (h *Handler) forwardOnce(ctx context.Context, r *http.Request, p *provider, d dialect, body []byte, repl *caddy.Replacer) (*http.Response, error) {
	var rd io.Reader
	if len(body) > 0 {
		rd = bytes.NewReader(body)
	}
	up, err := http.NewRequestWithContext(ctx, r.Method, p.url(r.URL.EscapedPath(), p.upstreamQuery(r.URL.RawQuery)), rd)
	if err != nil {
		return nil, err
	}
	up.Header = p.upstreamHeader(r.Header, d, repl)
	up.ContentLength = int64(len(body))
	noReplay(up)
	return p.transport.RoundTrip(up)
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
