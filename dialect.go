package llmhedge

import "strings"

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
	case "/v1/messages":
		return dialectAnthropic
	case "/v1/chat/completions", "/chat/completions":
		return dialectOpenAI
	}
	return dialectNone
}

// dialectOfAuxPath guesses the dialect of a non-completion path, for the
// error shape and the auth header of a forwarded request.
func dialectOfAuxPath(path string, h interface{ Get(string) string }) dialect {
	if strings.HasPrefix(path, "/v1/messages") || h.Get("anthropic-version") != "" || h.Get("x-api-key") != "" {
		return dialectAnthropic
	}
	return dialectOpenAI
}
