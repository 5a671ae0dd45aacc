package engine

import (
	"fmt"
	"strings"

	"github.com/llmhedge/caddy-llm-hedge/internal/cloud"
	"github.com/llmhedge/caddy-llm-hedge/internal/dialect/anthropic"
	"github.com/llmhedge/caddy-llm-hedge/internal/dialect/gemini"
	"github.com/llmhedge/caddy-llm-hedge/internal/dialect/openai"
	"github.com/llmhedge/caddy-llm-hedge/internal/dialect/responses"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// The dialects and clouds the module speaks, in one place and in order: the
// order is the one the path sniff tries (the highest match wins, ties go to
// the first listed) and error messages name them in. Adding a dialect is its
// file(s) and one entry here; adding a cloud, its protocol file and one
// entry in protocols.

// dialects are the wire formats clients speak.
var dialects = []wire.Dialect{dialectAnthropic, dialectGemini, dialectOpenAI, dialectResponses}

// alsoServedBy lists, for a client dialect, the provider `api` values
// besides its own that serve it: OpenAI and the compatible servers serve
// the Responses API under the same base URL and key as Chat Completions.
var alsoServedBy = map[wire.Dialect][]wire.Dialect{
	dialectResponses: {dialectOpenAI},
}

// protocols are the clouds a provider reaches a model through (`api
// azure|bedrock|vertex`), each with the dialect a provider of it reports as
// its own (for apiServes) and its constructor. Vertex serves two dialects
// (Anthropic and Gemini), which its serves method says: dialectNone here.
var protocols = []protocolInfo{
	{"azure", dialectOpenAI, cloud.NewAzure},
	{"bedrock", dialectAnthropic, cloud.NewBedrock},
	{"vertex", wire.DialectNone, cloud.NewVertex},
}

// parseDialect reads the `api` option of a provider.
func parseDialect(s string) (wire.Dialect, bool) {
	if s == "" {
		return wire.DialectNone, true
	}
	for _, d := range dialects {
		if strings.EqualFold(s, d.String()) {
			return d, true
		}
	}
	return wire.DialectNone, false
}

// dialectNames lists the registered dialects, for a configuration error.
func dialectNames() string {
	names := make([]string, len(dialects))
	for i, d := range dialects {
		names[i] = d.String()
	}
	return strings.Join(names, ", ")
}

// dialectOfPath infers the dialect of a request from its path. Only the
// completion endpoints are LLM requests; every other path (models,
// count_tokens, files, ...) is forwarded without hedging.
func dialectOfPath(path string) wire.Dialect {
	path = strings.TrimSuffix(path, "/")
	for _, d := range dialects {
		if d.IsCompletionPath(path) {
			return d
		}
	}
	return wire.DialectNone
}

// apiServes reports whether a provider whose `api` is api takes requests
// of the client dialect d: its own dialect, and the ones d's file
// registered in alsoServedBy (`api openai` serves the Responses API too).
// dialectNone on either side: any.
func apiServes(api, d wire.Dialect) bool {
	if api == wire.DialectNone || d == wire.DialectNone || api == d {
		return true
	}
	for _, a := range alsoServedBy[d] {
		if a == api {
			return true
		}
	}
	return false
}

// auxListed reports whether method and path are one of the aux paths of
// any dialect (the other paths); when only the path is, allow is the
// method it takes.
func auxListed(method, p string) (listed bool, allow string) {
	p = strings.TrimSuffix(p, "/")
	for _, d := range dialects {
		if l, a := auxListedIn(d.AuxPaths(), method, p); l {
			return true, ""
		} else if a != "" {
			allow = a
		}
	}
	return false, allow
}

func auxListedIn(paths []wire.AuxPath, method, p string) (listed bool, allow string) {
	for _, a := range paths {
		if auxPathMatch(a.Path, p) {
			if a.Method == method {
				return true, ""
			}
			allow = a.Method
		}
	}
	return false, allow
}

// auxPathMatch matches a path against an aux path pattern, where each
// `{id}` is one non-empty path segment.
func auxPathMatch(pattern, p string) bool {
	if !strings.Contains(pattern, "{id}") {
		return pattern == p
	}
	for {
		pseg, prest, pmore := strings.Cut(pattern, "/")
		seg, rest, more := strings.Cut(p, "/")
		if pmore != more || !auxSegmentMatch(pseg, seg) {
			return false
		}
		if !pmore {
			return true
		}
		pattern, p = prest, rest
	}
}

// auxSegmentMatch matches one path segment against a pattern segment in
// which `{id}` stands for a non-empty id (`{id}:countTokens` too).
func auxSegmentMatch(pseg, seg string) bool {
	pre, suf, ok := strings.Cut(pseg, "{id}")
	if !ok {
		return pseg == seg
	}
	return len(seg) > len(pre)+len(suf) && strings.HasPrefix(seg, pre) && strings.HasSuffix(seg, suf)
}

// dialectOfAuxPath guesses the dialect of a non-completion path, for the
// error shape and the auth header of a forwarded request. guessed: nothing
// but the fallback claims it (a path no dialect lists, no header or prefix
// of one), so the logs name no dialect for it.
func dialectOfAuxPath(path string, h wire.HeaderGetter) (best wire.Dialect, guessed bool) {
	best, rate := wire.DialectNone, 0
	for _, d := range dialects {
		if r := d.SniffAux(path, h); r > rate {
			best, rate = d, r
		}
	}
	return best, rate <= wire.SniffGuess && !listsPath(best, strings.TrimSuffix(path, "/"))
}

// listsPath reports whether p is one of d's aux paths, by any method.
func listsPath(d wire.Dialect, p string) bool {
	for _, a := range d.AuxPaths() {
		if auxPathMatch(a.Path, p) {
			return true
		}
	}
	return false
}

// modelMissing reports whether an error body says the requested model does
// not exist, in the words of any dialect (an OpenAI-compatible server may
// front either API).
func modelMissing(body []byte) bool {
	for _, d := range dialects {
		if d.ModelMissing(body) {
			return true
		}
	}
	return false
}

var dialectOpenAI wire.Dialect = openai.Dialect{}

var dialectAnthropic wire.Dialect = anthropic.Dialect{}

var dialectGemini wire.Dialect = gemini.Dialect{}

var dialectResponses wire.Dialect = responses.Dialect{}

// protocolInfo is one registered protocol: its name, the dialect a provider
// of it reports as its own (for apiServes), and its constructor.
type protocolInfo struct {
	name   string
	native wire.Dialect
	ctor   cloud.Ctor
}

// apiChat is the api of a provider that speaks only OpenAI Chat
// Completions (an OpenAI-compatible server: vLLM, Ollama, LM Studio, Groq,
// DeepSeek, OpenRouter): it serves Chat clients natively, is sent no
// Responses, files or other OpenAI paths (only the models list besides),
// and can translate responses and anthropic.
const apiChat = "chat"

func parseProtocol(s string) (protocolInfo, bool) {
	for _, pi := range protocols {
		if strings.EqualFold(s, pi.name) {
			return pi, true
		}
	}
	return protocolInfo{}, false
}

// apiNames lists every `api` value: the dialects and the protocols.
func APINames() string {
	names := dialectNames() + ", " + apiChat
	for _, pi := range protocols {
		names += ", " + pi.name
	}
	return names
}

// unknownAPI is the error for an api option that names neither a dialect
// nor a cloud, with every accepted value.
func unknownAPI(v string) error {
	return fmt.Errorf("api: %q is not one of %s", v, APINames())
}

// CheckAPI refuses an api no provider can have: neither a dialect's name
// nor a cloud's.
func CheckAPI(api string) error {
	if _, ok := parseDialect(api); (!ok || api == "") && !CloudAPI(api) && !strings.EqualFold(api, apiChat) {
		return unknownAPI(api)
	}
	return nil
}

// CloudAPI reports whether api names a cloud protocol (bedrock, vertex,
// azure).
func CloudAPI(api string) bool {
	_, ok := parseProtocol(api)
	return ok
}
