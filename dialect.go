package llmhedge

import (
	"net/http"
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

// choiceSet tracks the choices of an OpenAI stream (n > 1 streams several,
// interleaved, each with its own finish_reason): which indexes were seen
// and which of them finished. Indexes 0..255 are bits (OpenAI caps n at
// 128); any other index is never taken as finished, so such a stream ends
// cleanly only with [DONE].
type choiceSet struct {
	seen, finished [4]uint64
	other          bool // a choice with an index outside 0..255 (or not an integer)
}

// note records one choice of a chunk; index is -1 when it is not usable.
func (cs *choiceSet) note(index int64, finished bool) {
	if index < 0 || index >= 256 {
		cs.other = true
		return
	}
	w, bit := index>>6, uint64(1)<<(index&63)
	cs.seen[w] |= bit
	if finished {
		cs.finished[w] |= bit
	}
}

// allFinished reports whether a choice was seen and every choice seen has
// its finish_reason: only then is the answer complete without [DONE].
func (cs *choiceSet) allFinished() bool {
	if cs.other {
		return false
	}
	seen := false
	for i := range cs.seen {
		if cs.seen[i]&^cs.finished[i] != 0 {
			return false
		}
		seen = seen || cs.seen[i] != 0
	}
	return seen
}

// merge adds the choices other saw to cs.
func (cs *choiceSet) merge(other *choiceSet) {
	for i := range cs.seen {
		cs.seen[i] |= other.seen[i]
		cs.finished[i] |= other.finished[i]
	}
	cs.other = cs.other || other.other
}

var doneEvent = []byte("data: [DONE]\n\n")
