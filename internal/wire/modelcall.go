package wire

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
)

// ModelCall is a call other than a completion that is about one model: a
// token count, which names it in its body (Anthropic, Responses) or its
// path (Gemini), or a model's GET. The proxy sends it only to providers
// that serve that model, with their model rewrite applied, as a
// completion would: a count from a provider that does not serve the model
// is another model's count, or a 404 the client did not earn.
type ModelCall struct {
	Model string
	// The model's escaped path segment [segStart, segEnd), when inPath;
	// else its raw JSON string [valStart, valEnd) in the body.
	segStart, segEnd int
	valStart, valEnd int
	inPath           bool
}

// ModelCallOf reads the model a call is about; false when the call is
// about no one model, or names none this proxy can read (the provider
// then answers as it would).
func ModelCallOf(method, escapedPath string, body []byte) (ModelCall, bool) {
	var mc ModelCall
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
		mc.Model = JSONStringValue(body[mc.valStart:mc.valEnd])
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
		mc.Model, mc.inPath = m, true
		mc.segStart = len(prefix)
		mc.segEnd = mc.segStart + len(seg)
	}
	if mc.Model == "" || CheckModelName(mc.Model) != nil {
		return mc, false
	}
	return mc, true
}

// Rewrite returns the escaped path and the body with upstream as the
// model (one escaped path segment, or the body's model string), the rest
// as the client sent it; unchanged when upstream is the model.
func (mc ModelCall) Rewrite(escapedPath string, body []byte, upstream string) (string, []byte) {
	if upstream == mc.Model {
		return escapedPath, body
	}
	if mc.inPath {
		return escapedPath[:mc.segStart] + url.PathEscape(upstream) + escapedPath[mc.segEnd:], body
	}
	out := make([]byte, 0, len(body)+len(upstream)+2)
	out = append(out, body[:mc.valStart]...)
	out = AppendJSONString(out, upstream)
	out = append(out, body[mc.valEnd:]...)
	return escapedPath, out
}
