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
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"

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
	var tr *translate.Translation
	var err error
	if st.dialect == dialectGemini && st.req.Stream && st.r.URL.Query().Get("alt") != "sse" {
		// The translated stream is written as Gemini's alt=sse events; a
		// client asking for one JSON array of chunks is not served so.
		losses = []translate.Loss{{What: "a stream as one JSON array (streamGenerateContent without alt=sse)", Material: true}}
	} else if tr, err = xl.pair.Translate(clientBody(st.req), upstream); err != nil {
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

// clientBody is the client's body as a translation reads it: a Gemini
// client's stream mode is in its path, so a streamed one is marked in the
// body (translate.WithGeminiStream).
func clientBody(req *wire.Request) []byte {
	if req.Dialect == dialectGemini && req.Stream {
		return translate.WithGeminiStream(req.Body)
	}
	return req.Body
}

// translateRequest is the upstream request of a translated attempt: the
// target dialect's body for model (tr when the plan translated it
// already), its path and query.
func (xl *xlTarget) translateRequest(req *wire.Request, model string, tr *translate.Translation) (treq *wire.Request, path, query string, _ *translate.Translation, err error) {
	if tr == nil {
		if tr, err = xl.pair.Translate(clientBody(req), model); err != nil {
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
		x := newXLBody(a.resp.Body, a.xlReq.NewStream())
		x.readOn, x.grace, x.abort = a.translationReadsOn(), defaultFinishGrace, func() { a.cancel(errFinishGrace) }
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

// translateError puts a translated attempt's error answer in the client's
// shape, after the target's dialect classified it.
func (a *attempt) translateError() {
	if a.errBody != nil {
		_, a.errBody = a.xl.pair.Error(a.status, a.errBody)
		a.errHeader = http.Header{"Content-Type": {"application/json"}}
	}
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
	st.outcome = OutcomeClientError
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
	// The body search last: an agent's body is hundreds of kilobytes, and
	// most handlers translate nothing.
	if st.dialect.String() != translate.Anthropic || !h.translates(st.dialect) || !bytes.Contains(st.req.Body, []byte(`"thinking"`)) {
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
