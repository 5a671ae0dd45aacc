package llmhedge

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
)

// dialect is the wire format of an LLM API: how the request body, the
// stream events, the answers and the errors are shaped, and where clients
// send them. Each dialect is its own file(s) holding a stateless value,
// listed in order in dialects.go; adding one is its files, one entry there,
// its tests and simulator support.
// Methods take a value receiver of an empty struct: calling them through
// the interface allocates nothing, so the stream hot path may.
type dialect interface {
	// String is the dialect's name: the `api` option value, the metrics
	// label and the log field.
	String() string

	// isCompletionPath reports whether a request path (no trailing slash)
	// is this dialect's completion endpoint.
	isCompletionPath(path string) bool
	// completionPath is the provider's canonical completion path for a
	// client's completion path (one isCompletionPath accepts): a client
	// that calls `/chat/completions` or `/messages` (a base URL that
	// already ends in /v1) reaches the same endpoint as one that calls
	// the /v1 path. A dialect with one endpoint ignores clientPath.
	completionPath(clientPath string) string
	// auxPaths are the other calls its clients make: read-only or token
	// counts, so they may move to another provider after a 5xx.
	auxPaths() []auxPath
	// sniffAux rates how surely a non-completion request speaks this
	// dialect: 0 not, the highest wins (ties: the first registered).
	sniffAux(path string, h headerGetter) int

	// parseRequest validates a completion request and reads what the
	// proxy routes on: the body, and for a dialect that carries the model
	// or the stream mode there, the path and raw query.
	parseRequest(path, rawQuery string, body []byte) (*llmRequest, error)
	// upstreamPath is the escaped path an attempt sends for a client's
	// completion path and the upstream model: completionPath for the
	// dialects with the model in the body.
	upstreamPath(clientPath, model string) string
	// bodyFor is the request body for an upstream model (a fallback or
	// a rewrite renames it).
	bodyFor(req *llmRequest, model string) []byte
	// sessionKey returns the conversation key of a request body for
	// affinity, or "".
	sessionKey(body []byte, header http.Header) string

	// credentialHeaders are where this dialect's clients put a key and
	// choose the account it acts for: removed when a provider has its own.
	credentialHeaders() []string
	// setAuth puts the provider's key where this dialect reads it.
	setAuth(h http.Header, key string)

	// inspect classifies one stream event; withText also returns the raw
	// output text, and cs (when not nil) notes the choices it carries.
	inspect(ev sse.Event, withText bool, cs *choiceSet) eventInfo
	// terminalName names a terminal event, for the gate's message.
	terminalName(ev sse.Event) string
	// finishGrace reports whether a finished answer can precede the
	// terminal event (OpenAI's finish_reason before [DONE]): the relay
	// then waits only a grace for it and synthesizes it if it is missing.
	finishGrace() bool
	// streamEnd is the terminal event the relay writes for an upstream
	// that finished (finishGrace) but did not send it; nil for none.
	streamEnd() []byte

	// checkBody detects a fake 200 in a complete non-stream body: the
	// reason and an error naming it, or "", nil for a real answer.
	checkBody(body []byte) (reason string, err error)
	// checkBodyReject fails a non-stream body whose answer text holds one
	// of the reject phrases, case-insensitively.
	checkBodyReject(body []byte, reject [][]byte) error
	// observeEvent and observeBody record the usage a stream event or a
	// complete body reports.
	observeEvent(u *usage, ev sse.Event)
	observeBody(u *usage, body []byte)
	// modelMissing reports whether an upstream error body says the
	// requested model does not exist.
	modelMissing(body []byte) bool
	// promptTooLong reports whether a 400 error body says the prompt is
	// over the model's context window (retry context_fallback).
	promptTooLong(body []byte) bool
	// classify classifies a non-200 answer (classifyAnswer, or the
	// dialect's reading of its error body); passThroughKey as there.
	classify(status int, body []byte, passThroughKey bool) failClass
	// retryDelay reads a retry hint from an error body, for an answer
	// without Retry-After; ok false when there is none.
	retryDelay(body []byte) (d time.Duration, ok bool)

	// errorType is the error type this dialect uses for an HTTP status.
	errorType(status int) string
	// errorJSON renders an error body (before commit); errorEvent the SSE
	// event that ends a committed stream with a failure.
	errorJSON(status int, message string) []byte
	errorEvent(status int, message string) []byte

	// cachedInInput reports whether the usage's Input already counts the
	// cached prompt tokens (OpenAI, Gemini) or not (Anthropic).
	cachedInInput() bool
	// newResumer follows a committed stream of req for a continuation
	// (resume.go); nil when the dialect cannot continue it.
	newResumer(req *llmRequest) resumer
}

// dialectNone marks a path that is not an LLM completion (forwarded as
// is), and a provider that serves whichever dialect the request speaks.
var dialectNone dialect

// headerGetter is the part of a header the dialect sniff reads.
type headerGetter interface{ Get(string) string }

// auxPath is one non-completion call: `{id}` is one path segment, or
// the start of one when text follows it (`{id}:countTokens`).
type auxPath struct{ method, path string }

// eventClass is what one upstream event means for the attempt.
type eventClass uint8

const (
	evPrelude   eventClass = iota // buffered, not committed: message_start, content_block_start, ping, comments, role-only/empty OpenAI deltas, usage-only chunks, content_block_stop, message_delta
	evOutput                      // carries model output: Anthropic content_block_delta; OpenAI chunk whose choices[].delta has non-empty content, reasoning_content, reasoning, tool_calls, function_call or refusal
	evFinish                      // OpenAI chunk with a finish_reason set (not null, not ""): output for the gate, and the answer is done
	evTerminal                    // Anthropic message_stop; OpenAI [DONE]
	evError                       // `event: error`, or data whose JSON has a non-null top-level "error" (or Anthropic "type":"error")
	evMalformed                   // data that is not a JSON object (other than OpenAI's [DONE])
)

func (c eventClass) String() string {
	switch c {
	case evPrelude:
		return "prelude"
	case evOutput:
		return "output"
	case evFinish:
		return "finish"
	case evTerminal:
		return "terminal"
	case evError:
		return "error"
	case evMalformed:
		return "malformed"
	}
	return "unknown"
}

// eventInfo is what a dialect's inspect learned from one event.
type eventInfo struct {
	class  eventClass
	by     string // the payload that made it output or finish, for the commit log
	text   []byte // raw JSON string of the output text (only when asked for)
	errVal []byte // raw value of the top-level "error" member, if any
}

// classifyEvent tells what an event means for the gate and the relay. It
// looks at the event name and walks the JSON once, without allocating.
func classifyEvent(d dialect, ev sse.Event) eventClass {
	return d.inspect(ev, false, nil).class
}

// parseDialect reads the `api` option of a provider.
func parseDialect(s string) (dialect, bool) {
	if s == "" {
		return dialectNone, true
	}
	for _, d := range dialects {
		if strings.EqualFold(s, d.String()) {
			return d, true
		}
	}
	return dialectNone, false
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
func dialectOfPath(path string) dialect {
	path = strings.TrimSuffix(path, "/")
	for _, d := range dialects {
		if d.isCompletionPath(path) {
			return d
		}
	}
	return dialectNone
}

// apiServes reports whether a provider whose `api` is api takes requests
// of the client dialect d: its own dialect, and the ones d's file
// registered in alsoServedBy (`api openai` serves the Responses API too).
// dialectNone on either side: any.
func apiServes(api, d dialect) bool {
	if api == dialectNone || d == dialectNone || api == d {
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
		if l, a := auxListedIn(d.auxPaths(), method, p); l {
			return true, ""
		} else if a != "" {
			allow = a
		}
	}
	return false, allow
}

func auxListedIn(paths []auxPath, method, p string) (listed bool, allow string) {
	for _, a := range paths {
		if auxPathMatch(a.path, p) {
			if a.method == method {
				return true, ""
			}
			allow = a.method
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
func dialectOfAuxPath(path string, h headerGetter) dialect {
	best, rate := dialectNone, 0
	for _, d := range dialects {
		if r := d.sniffAux(path, h); r > rate {
			best, rate = d, r
		}
	}
	return best
}
