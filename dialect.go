package llmhedge

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
)

// dialect is the wire format of an LLM API: it decides how the request
// body, the stream events and the errors are shaped.
type dialect uint8

const (
	dialectNone dialect = iota // not an LLM completion path: forwarded as is
	dialectAnthropic
	dialectOpenAI
)

func (d dialect) String() string {
	switch d {
	case dialectAnthropic:
		return "anthropic"
	case dialectOpenAI:
		return "openai"
	}
	return "none"
}

// parseDialect reads the `api` option of a provider.
func parseDialect(s string) (dialect, bool) {
	switch strings.ToLower(s) {
	case "anthropic":
		return dialectAnthropic, true
	case "openai":
		return dialectOpenAI, true
	case "":
		return dialectNone, true
	}
	return dialectNone, false
}

// dialectOfPath infers the dialect of a request from its path. Only the
// completion endpoints are LLM requests; every other path (models,
// count_tokens, files, ...) is forwarded without hedging.
func dialectOfPath(path string) dialect {
	switch strings.TrimSuffix(path, "/") {
	case "/v1/messages", "/messages":
		return dialectAnthropic
	case "/v1/chat/completions", "/chat/completions":
		return dialectOpenAI
	}
	return dialectNone
}

// completionPath is the provider's canonical completion path of dialect
// d: a client that calls `/chat/completions` or `/messages` (a base URL
// that already ends in /v1) reaches the same endpoint as one that calls
// `/v1/chat/completions`.
func completionPath(d dialect) string {
	if d == dialectAnthropic {
		return "/v1/messages"
	}
	return "/v1/chat/completions"
}

// auxPaths are the calls besides completions that every dialect serves
// (SPEC 10, other paths): read-only or token counts, so they may move to
// another provider after a 5xx. `{id}` is one path segment.
var auxPaths = []struct{ method, path string }{
	{http.MethodGet, "/v1/models"},
	{http.MethodGet, "/v1/models/{id}"},
	{http.MethodPost, "/v1/messages/count_tokens"},
	{http.MethodPost, "/v1/responses/input_tokens"},
}

// auxListed reports whether method and path are one of auxPaths; when only
// the path is, allow is the method it takes.
func auxListed(method, p string) (listed bool, allow string) {
	p = strings.TrimSuffix(p, "/")
	for _, a := range auxPaths {
		match := a.path == p
		if prefix, ok := strings.CutSuffix(a.path, "{id}"); ok {
			id, found := strings.CutPrefix(p, prefix)
			match = found && id != "" && !strings.Contains(id, "/")
		}
		if match {
			if a.method == method {
				return true, ""
			}
			allow = a.method
		}
	}
	return false, allow
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

// dialectOfAuxPath guesses the dialect of a non-completion path, for the
// error shape and the auth header of a forwarded request.
func dialectOfAuxPath(path string, h interface{ Get(string) string }) dialect {
	if strings.HasPrefix(path, "/v1/messages") || h.Get("anthropic-version") != "" || h.Get("x-api-key") != "" {
		return dialectAnthropic
	}
	return dialectOpenAI
}
