package engine

// Cross-vendor translation in the engine (SPEC 19, docs/translation.md):
// a provider with `translate <format>` serves clients of that format in
// its own, through internal/translate. The translated attempt speaks the
// target's dialect upstream (path, body, auth, classification of its
// errors and fake 200s); its answer reaches the gate, the relay and the
// client already in the client's dialect, so everything after the attempt
// is the same code as for a native one. A continuation never crosses
// formats, and what cannot be carried skips the candidate before a byte
// is sent.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/genai"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/stream"
	"github.com/llmhedge/caddy-llm-hedge/internal/translate"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// HeaderTranslated names, on an answer a translating provider served, the
// formats (`anthropic->openai`); HeaderDropped what the translation
// dropped with notice (advisory losses), when anything.
const (
	HeaderTranslated = "Llm-Hedge-Translated"
	HeaderDropped    = "Llm-Hedge-Translation-Dropped"
)

// xlTarget is how a provider serves one client format by translation.
type xlTarget struct {
	pair   translate.Pair
	target wire.Dialect // the provider's own dialect the pair speaks
}

// translations provisions a provider's `translate` formats: each needs a
// pair from it to a dialect the provider serves natively, and the
// provider's own key or cloud credentials (a client's credential never
// crosses vendors).
func (p *provider) translations(pc *ProviderConfig) error {
	if len(pc.Translate) == 0 {
		return nil
	}
	if p.passThroughKey() {
		return fmt.Errorf("translate: provider needs its own key (a client's credential never crosses vendors)")
	}
	p.xl = make(map[wire.Dialect]*xlTarget, len(pc.Translate))
	for _, name := range pc.Translate {
		d, ok := parseDialect(name)
		if !ok || d == wire.DialectNone {
			return fmt.Errorf("translate: %q is not one of %s", name, dialectNames())
		}
		if p.native(d) {
			return fmt.Errorf("translate %s: the provider serves %s natively", name, d)
		}
		if p.xl[d] != nil {
			return fmt.Errorf("translate %s: named twice", name)
		}
		t, err := p.translationTo(d)
		if err != nil {
			return err
		}
		p.xl[d] = t
	}
	return nil
}

// translationTo finds the pair from client dialect d to a dialect the
// provider speaks (its `api`, or one its cloud serves).
func (p *provider) translationTo(d wire.Dialect) (*xlTarget, error) {
	var formats []string
	for _, t := range dialects {
		if t == d || !p.native(t) {
			continue
		}
		if pair, ok := translate.For(d.String(), t.String()); ok {
			return &xlTarget{pair: pair, target: t}, nil
		}
		formats = append(formats, t.String())
	}
	if p.dialect == wire.DialectNone && p.proto == nil {
		return nil, fmt.Errorf("translate %s: the provider needs an api (the format it speaks)", d)
	}
	return nil, fmt.Errorf("translate %s: no translation from %s to %s (supported: %s)", d, d, strings.Join(formats, ", "), pairNames())
}

func pairNames() string {
	var names []string
	for _, pr := range translate.Pairs() {
		names = append(names, pr[0]+"->"+pr[1])
	}
	return strings.Join(names, ", ")
}

// native reports whether the provider takes requests of dialect d as they
// are.
func (p *provider) native(d wire.Dialect) bool {
	if p.chatOnly {
		return d == dialectOpenAI
	}
	return apiServes(p.dialect, d) && (p.proto == nil || p.proto.Serves(d))
}

// translation is how p serves dialect d by translation, or nil when it
// serves it natively (or not at all).
func (p *provider) translation(d wire.Dialect) *xlTarget {
	if p.xl == nil || p.native(d) {
		return nil
	}
	return p.xl[d]
}

// carries reports whether p may be sent the request: a provider serving
// the client's format natively always; one translating it when the
// translation loses nothing material. It is asked when the candidate is
// about to be launched, so a request a native provider answers is never
// translated. A refused candidate is named in the decision chain
// (translate_skip) and counted, and nothing is sent to it; what it could
// not carry is kept for the refusal when no candidate is left. The
// translation is kept for the attempts (xlDone).
func carries(st *requestState, p *provider) bool {
	h := st.h
	xl := p.translation(st.dialect)
	if xl == nil {
		return true
	}
	upstream := p.upstreamModel(st.plan.model)
	if st.translated(p, upstream, st.req) != nil {
		return true
	}
	var losses []translate.Loss
	tr, err := xl.pair.Translate(xlSource(st.req), upstream)
	if err != nil {
		losses = []translate.Loss{{What: err.Error(), Material: true}}
	} else {
		losses = tr.Losses
	}
	if translate.Material(losses) {
		if !slices.Contains(st.xlRefusedBy, p) {
			st.skip(p, "translate_skip")
			st.xlRefused = append(st.xlRefused, losses...)
			st.xlRefusedBy = append(st.xlRefusedBy, p)
			h.obs.Translation(p.name, st.dialect.String(), "skipped")
		}
		return false
	}
	if st.xlDone == nil {
		st.xlDone = make(map[*provider]xlDone, 1)
	}
	st.xlDone[p] = xlDone{model: upstream, req: st.req, tr: tr}
	return true
}

// xlSource is the client's body as Translate reads it: a Gemini client
// names its stream mode in the path (streamGenerateContent), which
// translate.WithGeminiStream marks in the body, else the target would be
// asked for a complete answer where the client waits for a stream.
func xlSource(req *wire.Request) []byte {
	if req.Dialect == dialectGemini && req.Stream {
		return translate.WithGeminiStream(req.Body)
	}
	return req.Body
}

// xlDone is a request translated for a provider when the plan was made,
// reused by its attempts (a Translation is read-only).
type xlDone struct {
	model string
	req   *wire.Request
	tr    *translate.Translation
}

// translated is the plan's translation of req for p's model, or nil.
func (st *requestState) translated(p *provider, model string, req *wire.Request) *translate.Translation {
	if d, ok := st.xlDone[p]; ok && d.model == model && d.req == req {
		return d.tr
	}
	return nil
}

// translateRequest is the upstream request of a translated attempt: the
// target dialect's body for model (tr when the plan translated it
// already), its path and query.
func (xl *xlTarget) translateRequest(req *wire.Request, model string, tr *translate.Translation) (treq *wire.Request, path, query string, _ *translate.Translation, err error) {
	if tr == nil {
		if tr, err = xl.pair.Translate(xlSource(req), model); err != nil {
			return nil, "", "", nil, err
		}
	}
	if translate.Material(tr.Losses) {
		return nil, "", "", nil, fmt.Errorf("translation would lose %s", translate.Describe(tr.Losses, true))
	}
	t := *req
	t.Dialect, t.Body, t.Model = xl.target, tr.Body, model
	path, query, _ = strings.Cut(translate.TargetPath(xl.target.String(), model, req.Stream), "?")
	return &t, path, query, tr, nil
}

// translateAnswer turns a translated attempt's 200 into the client's
// dialect: a stream is translated event by event as the gate and the
// relay read it; a complete body at once (an answer that cannot be carried
// exactly fails the attempt, before commit).
func (a *attempt) translateAnswer() error {
	if isEventStream(a.resp.Header) {
		x := &xlBody{rd: sse.NewReader(a.resp.Body, 0), s: a.xlReq.NewStream(), body: a.resp.Body,
			readOn: a.translationReadsOn(), grace: defaultFinishGrace, abort: func() { a.cancel(errFinishGrace) }}
		if a.usage.Finish.On {
			// The span reports the target's finish reasons in its words
			// (a complete body's are read before it is translated): read
			// from its events, not from the client's the translation writes.
			x.finish, x.target = &a.usage.Finish, a.xl.target.String()
			a.usage.Finish.On = false
		}
		a.resp.Body = x
		return nil
	}
	if a.body == nil {
		return nil
	}
	out, err := a.xlReq.Response(a.body)
	if err != nil {
		return err
	}
	a.body = out
	return nil
}

// errFinishGrace ends a translated attempt whose target finished its
// answer and then held it past the grace (xlBody).
var errFinishGrace = errors.New("the target held its finished answer past the finish grace")

// translateError puts a translated attempt's error answer in the client's
// shape, after the target's dialect classified it.
func (a *attempt) translateError() {
	if a.errBody != nil {
		_, a.errBody = a.xl.pair.Error(a.status, a.errBody)
		a.errHeader = http.Header{"Content-Type": {"application/json"}}
	}
}

// xlBody is a translated event stream: the target's events in, the
// client's SSE bytes out. A target stream that cannot be carried on ends
// with the client's error event (translate's Fail), never a clean stop;
// a read error of the upstream is returned as is (the relay reports it).
// A target stream that ends before its terminal event (End's error: every
// translator's End fails only for that) just ends, unfinished: the relay
// reports it as it does a native one, upstream_cut, and writes the
// client's error event; a Fail event there would read, in the log, as an
// error event the provider sent.
type xlBody struct {
	rd   *sse.Reader
	s    translate.Stream
	body io.Closer
	buf  []byte
	off  int
	err  error
	// finish, when the attempt is traced, takes the finish reasons of the
	// target's events, in the target's dialect.
	finish *genai.FinishReasons
	target string
	// readOn: read on for the rest of an event cut at the end of a read
	// that filled the reader's room, holding what is translated. Only
	// where the relay keeps its own such shortcut (an HTTP/2 or
	// Content-Length body): over a cleartext connection the relay is told
	// at the wait and flushes there, and an HTTP/1.x chunked body may
	// wait inside that read, so there the translated events go to the
	// relay first, not held across a wait.
	readOn bool
	// grace is how long a target that finished its answer (Chat's
	// finish_reason, Gemini's finishReason) may hold it before what ends
	// it (the usage chunk, [DONE], the end of the body), as the relay
	// gives a native one (FinishGrace): then abort ends the pending read
	// and the client's answer is finished as at the body's end, not held
	// until the idle timeout. 0: no grace.
	grace      time.Duration
	abort      func()
	graceTimer *time.Timer
	graceOver  atomic.Bool // abort was the grace's
}

func (x *xlBody) Read(p []byte) (int, error) {
	for x.off >= len(x.buf) {
		if x.err != nil {
			return 0, x.err
		}
		x.buf, x.off = x.buf[:0], 0
		x.waitGrace()
		x.translate(x.rd.Next())
		// The events read with it are translated too, and (readOn) an
		// event cut at the end of that read is read on (its rest is
		// arriving, as the relay's reader sees it), up to a bound (a
		// backlog is handed over in parts): the relay then writes the
		// burst to the client at once, as it does a native one, instead of
		// flushing each event.
		for x.err == nil {
			if ev, ok := x.rd.Buffered(); ok {
				x.translate(ev, nil)
			} else if x.readOn && x.rd.Arriving() && len(x.buf) < stream.CoalesceMax {
				x.waitGrace()
				x.translate(x.rd.Next())
			} else {
				break
			}
		}
	}
	n := copy(p, x.buf[x.off:])
	x.off += n
	return n, nil
}

// translate appends the client's bytes for one target event (or the end
// of the target's stream, or its read error) to x.buf.
func (x *xlBody) translate(ev sse.Event, err error) {
	switch {
	case errors.Is(err, io.EOF), err != nil && x.graceOver.Load():
		// The body's end, or the grace passed after the target finished
		// its answer (its read was given up): the answer is complete.
		x.err = io.EOF
		if x.buf, err = x.s.End(x.buf); err != nil {
			x.err = io.ErrUnexpectedEOF
		}
	case err != nil:
		x.err = err
	default:
		if x.finish != nil {
			x.finish.ObserveEvent(x.target, ev.Data)
		}
		if x.buf, err = x.s.Event(x.buf, ev); errors.Is(err, translate.ErrAfterEnd) {
			x.err = io.EOF
		} else if err != nil {
			x.buf = x.s.Fail(x.buf, err)
			x.err = io.EOF
		}
	}
	if x.graceTimer != nil && (x.err != nil || !x.s.(translate.Finisher).Finished()) {
		x.graceTimer.Stop() // the answer ended (at the usage chunk, say): the attempt is left alone
	}
}

// waitGrace starts the grace before the first read after the target
// finished its answer (the client's wait for what precedes it is not the
// target's).
func (x *xlBody) waitGrace() {
	if x.graceTimer != nil || x.grace <= 0 {
		return
	}
	if f, ok := x.s.(translate.Finisher); ok && f.Finished() {
		x.graceTimer = time.AfterFunc(x.grace, func() {
			x.graceOver.Store(true)
			x.abort()
		})
	}
}

func (x *xlBody) Close() error { return x.body.Close() }

// translationReadsOn is xlBody's readOn for this answer: the relay's rule
// for its own reads of this body.
func (a *attempt) translationReadsOn() bool {
	return stream.ReadsOnForRest(a.directConn(), a.bodyReadsAhead())
}

// translationHeaders names a translated answer's formats and what it
// dropped, on the client's response.
func translationHeaders(h http.Header, st *requestState, a *attempt) {
	h.Set(HeaderTranslated, st.dialect.String()+"->"+a.xl.target.String())
	if s := translate.Describe(a.xlReq.Losses, false); s != "" {
		h.Set(HeaderDropped, s)
	}
}

// refuseUntranslatable answers a request no candidate could carry, when
// every candidate of the plan was a translating one skipped for a material
// loss: the client's 400 naming what could not be carried. It reports
// whether it answered.
func refuseUntranslatable(w http.ResponseWriter, st *requestState) bool {
	if len(st.xlRefusedBy) == 0 || len(st.xlRefusedBy) < len(st.plan.cands) {
		return false
	}
	st.outcome = outcomeClientError
	status, body := translate.Refusal(st.dialect.String(), st.xlRefused)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
	st.status = status
	return true
}

// failback prepares, once per request, what an Anthropic request sends to
// a native Anthropic provider when a provider of the handler translates
// Anthropic: a history a translation served may need thinking off
// (translate.AnthropicFailback; an advisory loss, in the log).
func failback(st *requestState) {
	h := st.h
	if st.dialect.String() != translate.Anthropic || !bytes.Contains(st.req.Body, []byte(`"thinking"`)) || !h.translates(st.dialect) {
		return
	}
	body, losses, err := translate.AnthropicFailback(st.req.Body)
	if err != nil || len(losses) == 0 {
		return
	}
	f := *st.req
	f.Body = body
	st.failback, st.failbackOf = &f, st.req
	orDiscard(h.log).Info("failback to the original vendor: "+translate.Describe(losses, false),
		slog.String("dialect", st.dialect.String()))
}

// translates reports whether any provider serves dialect d by translation.
func (h *Engine) translates(d wire.Dialect) bool {
	for _, p := range h.providers {
		if p.xl[d] != nil {
			return true
		}
	}
	return false
}

// requestFor is the request an attempt on p sends: the failback body for a
// native Anthropic provider, else the request as the client sent it (a
// translating provider translates it in run).
func (st *requestState) requestFor(p *provider) *wire.Request {
	if st.failback != nil && st.req == st.failbackOf && p.native(st.dialect) {
		return st.failback
	}
	return st.req
}
