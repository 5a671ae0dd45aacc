package llmhedge

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// modelCall is a forwarded call about one model: a token count, which
// names it in its body (Anthropic, Responses) or its path (Gemini), or a
// model's GET. It goes only to the providers whose `models` serve that
// model, with their `model` rewrite applied, as a completion would: a
// count from a provider that does not serve the model is another model's
// count, or a 404 the client did not earn.
type modelCall struct {
	model string
	// seg is the model's escaped path segment [segStart, segEnd) of the
	// escaped path; without it, the model is the body's [valStart, valEnd).
	segStart, segEnd int
	valStart, valEnd int
	inPath           bool
	escapedPath      string
	body             []byte
}

// modelCallOf reads the model a forwarded call is about; false when the
// call is about no one model, or names none this proxy can read (the
// provider then answers as it would).
func modelCallOf(method, escapedPath string, body []byte) (modelCall, bool) {
	mc := modelCall{escapedPath: escapedPath, body: body}
	p := strings.TrimSuffix(escapedPath, "/")
	switch {
	case method == http.MethodPost && (p == "/v1/messages/count_tokens" || p == "/v1/responses/input_tokens"):
		it, ok := jsonscan.Open(body, 0, 0)
		if !ok || !it.IsObject() {
			return mc, false
		}
		found := false
		for it.Next() {
			start := it.Pos
			v := it.Value()
			if v == nil {
				return mc, false
			}
			if it.KeyIs("model") { // the last of duplicate keys counts
				found = jsonscan.IsString(v)
				mc.valStart, mc.valEnd = start, start+len(v)
			}
		}
		if !found || !it.End() {
			return mc, false
		}
		mc.model = wire.JSONStringValue(body[mc.valStart:mc.valEnd])
	default:
		prefix := "/v1/models/"
		if strings.HasPrefix(p, "/v1beta/models/") {
			prefix = "/v1beta/models/"
		} else if !strings.HasPrefix(p, prefix) {
			return mc, false
		}
		seg := p[len(prefix):]
		switch {
		case method == http.MethodPost && strings.HasSuffix(seg, ":countTokens"):
			seg = strings.TrimSuffix(seg, ":countTokens")
		case method == http.MethodGet || method == http.MethodHead:
		default:
			return mc, false
		}
		if seg == "" || strings.ContainsAny(seg, "/:") {
			return mc, false
		}
		m, err := url.PathUnescape(seg)
		if err != nil {
			return mc, false
		}
		mc.model, mc.inPath = m, true
		mc.segStart = len(prefix)
		mc.segEnd = mc.segStart + len(seg)
	}
	if mc.model == "" || wire.CheckModelName(mc.model) != nil {
		return mc, false
	}
	return mc, true
}

// serving keeps the candidates that serve the call's model in dialect d.
func (mc modelCall) serving(cands []*provider, d wire.Dialect) []*provider {
	out := cands[:0:0]
	for _, p := range cands {
		if p.serves(d, mc.model) {
			out = append(out, p)
		}
	}
	return out
}

// forProvider is the escaped path and the body provider p gets: the model
// rewritten by p's `model` rules, everything else as the client sent it.
func (mc modelCall) forProvider(p *provider) (string, []byte) {
	up := p.upstreamModel(mc.model)
	if up == mc.model {
		return mc.escapedPath, mc.body
	}
	if mc.inPath {
		return mc.escapedPath[:mc.segStart] + url.PathEscape(up) + mc.escapedPath[mc.segEnd:], mc.body
	}
	out := make([]byte, 0, len(mc.body)+len(up)+2)
	out = append(out, mc.body[:mc.valStart]...)
	out = wire.AppendJSONString(out, up)
	out = append(out, mc.body[mc.valEnd:]...)
	return mc.escapedPath, out
}
