package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/http/httptrace"
	"slices"
	"sync/atomic"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/cloud"
	"github.com/llmhedge/caddy-llm-hedge/internal/health"
	"github.com/llmhedge/caddy-llm-hedge/internal/limit"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/stream"
	"github.com/llmhedge/caddy-llm-hedge/internal/translate"
	"github.com/llmhedge/caddy-llm-hedge/internal/upconn"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// Bounds of what one attempt reads before commit.
const (
	maxErrorBody    = wire.MaxErrorBody
	maxResponseBody = 64 << 20 // a non-stream completion
)

// attempt is one try of a request on one provider, from sending the
// request (t0) to being ready to commit (t2) or failing.
type attempt struct {
	n         int // 1-based number within the request
	p         *provider
	model     string          // model sent upstream (rewritten)
	reason    string          // why it started: initial, hedge_triggered, retry, failover, fallback, context_fallback, probe
	key       *health.PoolKey // the configured key it uses; nil: the client's own
	lease     *bodyLease      // the request body's buffer (bodylease.go)
	keySent   int64           // its place among the sends with key
	keyBefore int64           // the attempts awaiting a response on key when it was sent
	epoch     int64           // p's health epoch when the attempt began (admin resets)

	// bookkeeping counts (outcome.go), to check their pairing, and two
	// flags in the rest of their word
	begun, ended, verdicts int8
	probe                  bool // the half-open probe of p's breaker
	keyAnswered            bool // a response came: no longer awaited on key (candidates.go)
	offset                 time.Duration
	start                  time.Time

	ctx      context.Context
	cancel   context.CancelCauseFunc
	tailWait stream.Deadline // bounds the read of a complete stream's tail (reuseConn)
	upConn   answerConn      // the cleartext HTTP/1.1 connection the response came on, if any (attempt_conn.go)
	header   http.Header     // the upstream request's header, built at launch (launchHeader)

	// outcome, written by the attempt's goroutine before it reports
	resp       *http.Response
	status     int
	class      wire.FailClass
	err        error
	retryAfter time.Duration
	hasRA      bool
	noRetry    bool   // x-should-retry: false
	notKey     bool   // a refusal that is the provider's, not its key's (cloud.Verdict)
	errBody    []byte // upstream error body (bounded), passed through for request-level errors
	errHeader  http.Header
	rd         *sse.Reader
	gate       *stream.Gate
	track      wire.Resumer // the continuation's resumer, told the gate's events (tracked)
	tracked    bool         // track was set up at launch (it is nil when the request cannot be continued)
	body       []byte       // complete non-stream body
	answer     *[]byte      // the pooled buffer it was read into (answer_body.go)
	firstEvent time.Duration
	commitBy   string // the payload of the event that committed a stream (gate.committedBy)
	elapsed    time.Duration
	usage      wire.Usage
	outcome    string // for the decision chain

	xl    *xlTarget              // serving the client's format by translation (translate.go); nil: native
	xlReq *translate.Translation // the request translated, and the way back for its answers
}

func (a *attempt) ok() bool { return a.class == wire.ClassNone && a.err == nil }

// secret is the configured key's secret, or "" (the client's own).
func (a *attempt) secret() string {
	if a.key == nil {
		return ""
	}
	return a.key.Secret
}

// launchHeader sets what the attempt sends in, on the request's
// goroutine (launch): its translation of the client's format, if any, and
// the upstream request's header, in the dialect the provider is sent.
// header_up's placeholders read and write the request's own state
// (Caddy's {http.request.uuid} makes the request's id on first use and
// keeps it in the request's vars and access log fields), and a hedge's
// attempt runs beside the first one.
func (a *attempt) launchHeader(r *http.Request, req *wire.Request) {
	d := req.Dialect
	if a.xl = a.p.translation(d); a.xl != nil {
		d = a.xl.target
	}
	a.header = a.p.upstreamHeader(r, d, a.secret())
}

// run performs the attempt until it is ready to commit or has failed, then
// reports on done. It never writes to the client.
func (h *Engine) run(a *attempt, req *wire.Request, r *http.Request, done chan<- *attempt) {
	defer func() { a.elapsed = time.Since(a.start); done <- a }()
	client := req.Dialect
	path, query := req.Dialect.UpstreamPath(r.URL.Path, a.model), a.p.upstreamQuery(r.URL.RawQuery)
	if a.xl != nil { // set at launch (launchHeader)
		treq, tpath, tquery, tr, err := a.xl.translateRequest(req, a.model, a.xlReq)
		if err != nil {
			a.fail(wire.ClassRequest, fmt.Errorf("provider %s: translating to %s: %w", a.p.name, a.xl.target, err))
			return
		}
		req, path, query, a.xlReq = treq, tpath, tquery, tr
		h.obs.Translation(a.p.name, client.String(), "sent")
	}
	body := upstreamBody(a.p.proto, req, a.model)
	var sent atomic.Bool
	trace := httptrace.WithClientTrace(a.ctx, &httptrace.ClientTrace{
		WroteRequest: func(info httptrace.WroteRequestInfo) { sent.Store(info.Err == nil) },
		GotConn: func(info httptrace.GotConnInfo) {
			if c, ok := info.Conn.(*upconn.Conn); ok {
				a.upConn.c = c
			}
		},
		PutIdleConn: a.connIdle,
	})
	up, err := http.NewRequestWithContext(trace, http.MethodPost, a.p.url(path, query), a.lease.Reader(body))
	if err != nil {
		a.fail(wire.ClassConnect, fmt.Errorf("provider %s: building request: %w", a.p.name, err))
		return
	}
	up.GetBody = func() (io.ReadCloser, error) { return a.lease.Reader(body), nil }
	up.Header = a.header
	if a.xl != nil && a.secret() == "" && a.p.proto == nil {
		// A client's credential never crosses vendors. With a key of its
		// own (translate requires one) upstreamHeader removed every
		// dialect's credential headers before setting the provider's, and
		// a cloud is sent none of the client's: deleting the client's
		// headers here would remove the provider's own key where both
		// formats use the same header (Authorization: an OpenAI client on
		// a Responses or Chat-only target, a Responses client on Chat).
		for _, k := range client.CredentialHeaders() {
			up.Header.Del(k)
		}
	}
	up.Header.Set("Content-Type", "application/json")
	up.ContentLength = int64(len(body))
	if a.p.proto != nil {
		if err := a.p.proto.Prepare(a.ctx, up, req, a.model, body, a.lease.bodies()); err != nil {
			a.fail(wire.ClassConnect, fmt.Errorf("provider %s: %s: %w", a.p.name, a.p.proto, err))
			return
		}
	}
	rebody := noReplay(up)

	limit, cause := a.p.firstByte, wire.ErrFirstByteTimeout
	if !req.Stream {
		limit, cause = time.Duration(h.Timeouts.Response), wire.ErrResponseTimeout
	}
	timer := time.AfterFunc(limit, func() { a.cancel(cause) })
	defer func() {
		// The timer may fire while the committing event is handled: then
		// the attempt's context is gone and it must not be committed.
		if !timer.Stop() && a.ok() {
			c := wire.ClassFirstByteTimeout
			if !req.Stream {
				c = wire.ClassResponseTimeout
			}
			a.fail(c, fmt.Errorf("provider %s: %w", a.p.name, cause))
		}
	}()

	resp, err := roundTrip(a.p.transport, up, rebody)
	if err != nil {
		a.fail(wire.ClassifyTransportError(err, a.ctx, r.Context()), fmt.Errorf("provider %s: %w", a.p.name, err))
		if a.class == wire.ClassReset && sent.Load() && !wire.Unprocessed(err) {
			// A silent route: the provider took the whole request
			// and closed without a response byte. Another try there would
			// only wait as long again; the next candidate starts at once.
			a.noRetry = true
		}
		return
	}
	a.resp, a.status = resp, resp.StatusCode
	a.noteRateLimits(resp.Header)
	var verdict cloud.Verdict
	if a.p.proto != nil {
		verdict = a.p.proto.Response(resp)
	}
	if resp.StatusCode != http.StatusOK {
		h.readUpstreamError(a, req.Dialect, r.Context())
		if a.xl != nil {
			a.translateError()
		}
		if verdict.Class != wire.ClassNone && a.class != wire.ClassClientAbort {
			a.class, a.notKey = verdict.Class, verdict.NotKey
		}
		if verdict.Credential != "" {
			orDiscard(h.log).Error("cloud refused the provider's own credentials: fix them; requests fail over meanwhile",
				slog.String("provider", a.p.name), slog.String("api", a.p.proto.String()),
				slog.String("credentials", verdict.Credential), slog.String("error", loggedError(a.p, a.err)))
		}
		return
	}
	if isEventStream(resp.Header) {
		if !req.Stream {
			// Nothing streams a request that did not ask for it; read as a
			// body, an endless stream would hold the attempt for
			// timeouts.response.
			a.fail(wire.ClassMalformed, fmt.Errorf("provider %s: answered a non-streaming request with an event stream", a.p.name))
			return
		}
		if a.xl != nil {
			_ = a.translateAnswer()
		}
		h.gateStream(a, client, r.Context())
		return
	}
	h.readCompleteBody(a, req.Dialect, r.Context())
	if a.xl != nil && a.ok() {
		if err := a.translateAnswer(); err != nil {
			a.fail(wire.ClassMalformed, fmt.Errorf("provider %s: translating its answer: %w", a.p.name, err))
		}
	}
	if req.Stream && a.ok() {
		// The client asked for a stream and its SDK would choke on a JSON
		// body: a provider that ignores `stream` is as broken as a fake-200.
		a.fail(wire.ClassMalformed, fmt.Errorf("provider %s: answered a streaming request with %q, not an event stream",
			a.p.name, resp.Header.Get("Content-Type")))
	}
}

func (a *attempt) fail(c wire.FailClass, err error) {
	a.class, a.err = c, err
	if a.resp != nil {
		a.resp.Body.Close()
	}
}

// readUpstreamError keeps a bounded copy of a non-200 body (a request-level
// error is passed to the client as is) and the retry hints: Retry-After,
// else the one in the body in dialect d's words (Gemini's RetryInfo).
func (h *Engine) readUpstreamError(a *attempt, d wire.Dialect, clientCtx context.Context) {
	resp := a.resp
	a.errBody, _ = io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	a.errHeader = resp.Header
	a.retryAfter, a.hasRA = limit.ParseRetryAfter(resp.Header, clock())
	if !a.hasRA && d != wire.DialectNone {
		a.retryAfter, a.hasRA = d.RetryDelay(a.errBody)
	}
	a.noRetry = !limit.ShouldRetry(resp.Header)
	c := wire.ClassifyAnswer(resp.StatusCode, a.errBody, a.p.passThroughKey())
	if d != wire.DialectNone {
		c = d.Classify(resp.StatusCode, a.errBody, a.p.passThroughKey())
	}
	if c == wire.ClassModelNotFound && !modelMissing(a.errBody) {
		c = wire.ClassRequest
	}
	if clientCtx.Err() != nil {
		c = wire.ClassClientAbort
	}
	a.fail(c, fmt.Errorf("provider %s: status %d: %s", a.p.name, resp.StatusCode, wire.UpstreamMessage(a.errBody)))
}

// bodyReadsAhead: the answer is an HTTP/1.x chunked body, whose reader
// (net/http's) reads on into the next chunk and may wait there with the
// events before it already returned.
func (a *attempt) bodyReadsAhead() bool {
	return a.resp.ProtoMajor == 1 && slices.Contains(a.resp.TransferEncoding, "chunked")
}

// gateStream reads events until the first valid one (commit-ready) or a
// failure. The buffered events stay in the gate; nothing is written yet.
func (h *Engine) gateStream(a *attempt, d wire.Dialect, clientCtx context.Context) {
	a.rd = sse.Get(a.resp.Body, int(h.Stream.MaxBuffer)) // back to the pool at the end of its commit
	a.gate = stream.NewGate(d, h.rejects, int(h.Stream.MaxBuffer), defaultGateEvents)
	a.gate.Track, a.gate.Usage = a.track, &a.usage
	for {
		ev, err := a.rd.Next()
		if err != nil {
			c := wire.ClassClosedEarly
			var sf *cloud.StreamFault
			if errors.Is(err, sse.ErrEventTooLarge) {
				c = wire.ClassMalformed
			} else if errors.As(err, &sf) {
				c = sf.Class
				if c.PassedThrough() {
					// The request's own error, reported in the stream (a
					// Bedrock validationException): the client's answer, a
					// 400 in its dialect as over HTTP, not an empty 200.
					a.status, a.errHeader = http.StatusBadRequest, http.Header{"Content-Type": {"application/json"}}
					a.errBody = d.ErrorJSON(http.StatusBadRequest, sf.Msg)
				}
			} else if a.ctx.Err() != nil || clientCtx.Err() != nil {
				c = wire.ClassifyTransportError(err, a.ctx, clientCtx)
				if c == wire.ClassFirstByteTimeout && a.gate.Events() > 0 {
					// Alive but silent: what the operator must know to tell
					// a hung provider from a model that reasons before it
					// writes (OpenAI's reasoning models, Gemini's thinking).
					err = fmt.Errorf("no output within %v, after %d events without any: the provider was answering, and a model that reasons before its first output may need a longer first_byte or first_byte_timeout", a.p.firstByte, a.gate.Events())
				}
			}
			a.fail(c, fmt.Errorf("provider %s: reading first event: %w", a.p.name, err))
			return
		}
		switch a.gate.Feed(ev) {
		case stream.GateCommit:
			a.firstEvent = time.Since(a.start)
			a.commitBy = a.gate.CommittedBy()
			return
		case stream.GateFail:
			a.fail(a.gate.Failed().Class(), fmt.Errorf("provider %s: first event: %w", a.p.name, a.gate.Err()))
			return
		}
	}
}

// readCompleteBody reads a non-stream 200 whole and checks it is a real
// completion, not an error dressed as a success.
func (h *Engine) readCompleteBody(a *attempt, d wire.Dialect, clientCtx context.Context) {
	body, err := a.readAnswer(a.resp.Body, a.resp.ContentLength, maxResponseBody)
	a.resp.Body.Close()
	if err != nil {
		a.fail(wire.ClassifyTransportError(err, a.ctx, clientCtx), fmt.Errorf("provider %s: reading response: %w", a.p.name, err))
		return
	}
	if len(body) > maxResponseBody {
		a.fail(wire.ClassMalformed, fmt.Errorf("provider %s: response over %d bytes", a.p.name, maxResponseBody))
		return
	}
	if reason, err := wire.CheckBody(d, body); err != nil {
		c := wire.ClassFake200
		if reason == "malformed_body" {
			c = wire.ClassMalformed
		}
		a.fail(c, fmt.Errorf("provider %s: %w", a.p.name, err))
		return
	}
	if err := wire.CheckBodyReject(d, body, h.rejects); err != nil {
		a.fail(wire.ClassRejected, fmt.Errorf("provider %s: %w", a.p.name, err))
		return
	}
	a.body = body
	a.firstEvent = time.Since(a.start)
	a.usage.ObserveBody(d, body)
}

func isEventStream(h http.Header) bool {
	ct := h.Get("Content-Type")
	switch ct { // the providers' spellings, without the parser's allocations
	case "text/event-stream", "text/event-stream; charset=utf-8", "text/event-stream;charset=UTF-8":
		return true
	}
	mt, _, _ := mime.ParseMediaType(ct)
	return mt == "text/event-stream"
}
