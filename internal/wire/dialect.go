package wire

import (
	"net/http"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
)

// Package wire is the contract between the request engine (the root
// package) and the dialects (internal/dialect/*): the small interfaces a
// dialect implements, the optional capabilities the engine discovers by a
// type assertion once per provider or per commit (never per event), and
// the types they share: the request, usage, event info, failure class and
// the continuation transcript.
//
// A Dialect is the wire format of an LLM API: how the request body, the
// stream events, the answers and the errors are shaped, and where clients
// send them. Each dialect is one package holding a stateless value, listed
// in order in the root's dialects.go; adding one is its package, one entry
// there, its tests and simulator support.
// Methods take a value receiver of an empty struct: calling them through
// the interface allocates nothing, so the stream hot path may.
type Dialect interface {
	Router
	Codec
	Inspector
	ErrorShaper
}

// Router says where a dialect's clients send their calls and where its
// providers read a key.
type Router interface {
	// String is the dialect's name: the `api` option value, the metrics
	// label and the log field.
	String() string

	// IsCompletionPath reports whether a request path (no trailing slash)
	// is this dialect's completion endpoint.
	IsCompletionPath(path string) bool
	// CompletionPath is the provider's canonical completion path for a
	// client's completion path (one IsCompletionPath accepts): a client
	// that calls `/chat/completions` or `/messages` (a base URL that
	// already ends in /v1) reaches the same endpoint as one that calls
	// the /v1 path. A dialect with one endpoint ignores clientPath.
	CompletionPath(clientPath string) string
	// AuxPaths are the other calls its clients make: read-only or token
	// counts, so they may move to another provider after a 5xx.
	AuxPaths() []AuxPath
	// SniffAux rates how surely a non-completion request speaks this
	// dialect: 0 not, SniffGuess a fallback with no evidence, the highest
	// wins (ties: the first registered).
	SniffAux(path string, h HeaderGetter) int
	// UpstreamPath is the escaped path an attempt sends for a client's
	// completion path and the upstream model: CompletionPath for the
	// dialects with the model in the body.
	UpstreamPath(clientPath, model string) string

	// CredentialHeaders are where this dialect's clients put a key and
	// choose the account it acts for: removed when a provider has its own.
	CredentialHeaders() []string
	// SetAuth puts the provider's key where this dialect reads it.
	SetAuth(h http.Header, key string)
}

// Codec reads and rewrites request bodies and reads complete answers.
type Codec interface {
	// ParseRequest validates a completion request and reads what the
	// proxy routes on: the body, and for a dialect that carries the model
	// or the stream mode there, the path and raw query.
	ParseRequest(path, rawQuery string, body []byte) (*Request, error)
	// BodyFor is the request body for an upstream model (a fallback or
	// a rewrite renames it).
	BodyFor(req *Request, model string) []byte
	// SessionKey returns the conversation key of a request body for
	// affinity, or "".
	SessionKey(body []byte, top *jsonscan.Top, header http.Header) string

	// CheckBody detects a fake 200 in a complete non-stream body: the
	// reason and an error naming it, or "", nil for a real answer.
	CheckBody(body []byte) (reason string, err error)
	// CheckBodyReject fails a non-stream body whose answer text holds one
	// of the reject phrases, case-insensitively.
	CheckBodyReject(body []byte, reject [][]byte) error
	// ObserveBody records the usage a complete body reports.
	ObserveBody(u *Usage, body []byte)
	// CachedInInput reports whether the usage's Input already counts the
	// cached prompt tokens (OpenAI, Gemini) or not (Anthropic).
	CachedInInput() bool
}

// Inspector is the per-event hot path of a stream: it must not allocate.
type Inspector interface {
	// Inspect classifies one stream event; withText also returns the raw
	// output text, and cs (when not nil) notes the choices it carries.
	Inspect(ev sse.Event, withText bool, cs *ChoiceSet) EventInfo
	// ObserveEvent records the usage a stream event reports.
	ObserveEvent(u *Usage, ev sse.Event)
	// TerminalName names a terminal event, for the gate's message.
	TerminalName(ev sse.Event) string
	// FinishGrace reports whether a finished answer can precede the
	// terminal event (OpenAI's finish_reason before [DONE]): the relay
	// then waits only a grace for it and synthesizes it if it is missing.
	FinishGrace() bool
	// StreamEnd is the terminal event the relay writes for an upstream
	// that finished (FinishGrace) but did not send it; nil for none.
	StreamEnd() []byte
}

// ErrorShaper reads a provider's error answers and writes the proxy's own
// errors in the dialect's shape.
type ErrorShaper interface {
	// ModelMissing reports whether an upstream error body says the
	// requested model does not exist.
	ModelMissing(body []byte) bool
	// PromptTooLong reports whether a 400 error body says the prompt is
	// over the model's context window (retry context_fallback).
	PromptTooLong(body []byte) bool
	// Classify classifies a non-200 answer (ClassifyAnswer, or the
	// dialect's reading of its error body); passThroughKey as there.
	Classify(status int, body []byte, passThroughKey bool) FailClass
	// RetryDelay reads a retry hint from an error body, for an answer
	// without Retry-After; ok false when there is none.
	RetryDelay(body []byte) (d time.Duration, ok bool)

	// ErrorType is the error type this dialect uses for an HTTP status.
	ErrorType(status int) string
	// ErrorJSON renders an error body (before commit); ErrorEvent the SSE
	// event that ends a committed stream with a failure.
	ErrorJSON(status int, message string) []byte
	ErrorEvent(status int, message string) []byte
}

// Resumable is the capability of a dialect that can continue a cut
// stream (resume.go in the root): the engine asserts it once per commit.
type Resumable interface {
	// NewResumer follows a committed stream of req for a continuation;
	// nil when this request cannot be continued (several choices, ...).
	NewResumer(req *Request) Resumer
}

// ModelInPath is the capability of a dialect whose requests carry the
// model in the URL path (Gemini): a model the proxy routes to (a `model`
// rewrite's target) must stand as one path segment, checked at provision.
type ModelInPath interface {
	// CheckPathModel says why name cannot be a path segment, or nil.
	CheckPathModel(name string) error
}

// Prefiller is the capability of a dialect whose providers may continue a
// cut stream from an assistant turn holding the delivered text (SPEC 12):
// on the routes (`api` values) that continue such a turn as written.
type Prefiller interface {
	PrefillsOn(api string) bool
}

// NewResumer is d's resumer for req, or nil when d cannot continue it.
func NewResumer(d Dialect, req *Request) Resumer {
	if r, ok := d.(Resumable); ok {
		return r.NewResumer(req)
	}
	return nil
}

// DialectNone marks a path that is not an LLM completion (forwarded as
// is), and a provider that serves whichever dialect the request speaks.
var DialectNone Dialect

// SniffGuess is the SniffAux rate of a dialect that claims a path on no
// evidence (OpenAI's, for any path): good for an error shape, not for
// naming the client's dialect in a log.
const SniffGuess = 1

// headerGetter is the part of a header the dialect sniff reads.
type HeaderGetter interface{ Get(string) string }

// auxPath is one non-completion call: `{id}` is one path segment, or
// the start of one when text follows it (`{id}:countTokens`).
type AuxPath struct{ Method, Path string }

// eventClass is what one upstream event means for the attempt.
type EventClass uint8

const (
	EvPrelude   EventClass = iota // buffered, not committed: message_start, content_block_start, ping, comments, role-only/empty OpenAI deltas, usage-only chunks, content_block_stop, message_delta
	EvOutput                      // carries model output: Anthropic content_block_delta; OpenAI chunk whose choices[].delta has non-empty content, reasoning_content, reasoning, tool_calls, function_call or refusal
	EvFinish                      // OpenAI chunk with a finish_reason set (not null, not ""), Anthropic message_delta with stop_reason refusal, max_tokens or model_context_window_exceeded: output for the gate, and the answer is done
	EvTerminal                    // Anthropic message_stop; OpenAI [DONE]; with By set (Responses' response.incomplete), an answer even before any output
	EvError                       // `event: error`, or data whose JSON has a non-null top-level "error" (or Anthropic "type":"error")
	EvMalformed                   // data that is not a JSON object (other than OpenAI's [DONE])
)

func (c EventClass) String() string {
	switch c {
	case EvPrelude:
		return "prelude"
	case EvOutput:
		return "output"
	case EvFinish:
		return "finish"
	case EvTerminal:
		return "terminal"
	case EvError:
		return "error"
	case EvMalformed:
		return "malformed"
	}
	return "unknown"
}

// eventInfo is what a dialect's inspect learned from one event.
type EventInfo struct {
	Class  EventClass
	By     string // the payload that made it output or finish, for the commit log
	Text   []byte // raw JSON string of the output text (only when asked for)
	ErrVal []byte // raw value of the top-level "error" member, if any
	// Seq is the raw sequence_number of a valid Responses event (the
	// first one), read in the same walk: the resumer need not look again.
	Seq []byte
	// Plain (asked for with the text) says the event is the one answer's
	// text and nothing else, as the dialect's resumer reads it: Text (nil
	// for none) is all it adds, and the class says whether it finished.
	// The resumer then need not walk the event again.
	Plain bool
	// UsageRead says the walk saw every member ObserveEvent would read
	// (each once, spelled plainly): Usage and Model are their raw values
	// (nil when absent), and an InfoObserver reads them instead of
	// walking the event again.
	UsageRead    bool
	Usage, Model []byte
	// Counts (Gemini) are the token counts read from Usage in the same
	// walk, as the dialect's observer records them. Responses: those of
	// a final response object's usage, with its first model string in
	// Model, when the walk read them (Counts.Read).
	Counts UsageCounts
	// UsageFinal (Responses) says Usage is the response object of the
	// event that ends the response (its usage counts), not of one that
	// starts it (its model only).
	UsageFinal bool
}

// UsageCounts are the token counts a walk read from an event's usage
// member (Has* for the counts present): the observer records them without
// walking the member again. Read is false when there was nothing to read
// (no usage member, or one that is not an object).
type UsageCounts struct {
	Input, Output, CacheRead          int64
	HasInput, HasOutput, HasCacheRead bool
	Read                              bool
}

// InfoObserver is the capability of a dialect whose Inspect reads the
// usage members in its walk (EventInfo.UsageRead): ObserveInfo records
// what ObserveEvent would, from info. The relay asserts it once.
type InfoObserver interface {
	ObserveInfo(u *Usage, ev sse.Event, info EventInfo)
}

// classifyEvent tells what an event means for the gate and the relay. It
// looks at the event name and walks the JSON once, without allocating.
func ClassifyEvent(d Dialect, ev sse.Event) EventClass {
	return d.Inspect(ev, false, nil).Class
}

// choiceSet tracks the choices of an OpenAI stream (n > 1 streams several,
// interleaved, each with its own finish_reason): which indexes were seen
// and which of them finished. Indexes 0..255 are bits (OpenAI caps n at
// 128); any other index is never taken as finished, so such a stream ends
// cleanly only with [DONE].
type ChoiceSet struct {
	seen, finished [4]uint64
	other          bool // a choice with an index outside 0..255 (or not an integer)
	// Memo is what the stream's chunks repeat (Gemini's usageMetadata),
	// kept with the choices because both live as long as the stream and
	// travel together from the gate to the relay; nil until used.
	Memo *Memo
}

// Memo remembers one JSON object a stream sends again and again, as the
// bytes it had in the last chunk that was read whole, and the counts read
// from it. An object is self-delimiting: a chunk whose member starts with
// the same bytes holds the same valid object, which reads the same, so
// one comparison replaces a walk.
type Memo struct {
	Raw    []byte
	Counts UsageCounts
	// Split, when not 0, is where a number that changes from event to
	// event stands in what they repeat (Responses' sequence_number):
	// Raw[:Split] comes before it and Raw[Split:] after it.
	Split int
	// Frame is what stands around the text of a chunk's one candidate
	// (Gemini) or of a whole chunk (OpenAI): Frame[:FrameSplit] before the
	// text string, the rest after.
	Frame      []byte
	FrameSplit int
	// FrameOdd (OpenAI) says the chunks end in an "obfuscation" member,
	// whose string changes from chunk to chunk: Frame stops before it.
	// FrameNull says they carry "usage":null. FrameMisses counts the
	// frames kept since one was last met (a stream whose chunks never
	// repeat stops keeping them: MemoMisses).
	FrameOdd, FrameNull bool
	FrameMisses         int
	// FrameBy names what the frame's hole holds when it is not the
	// answer's text: (OpenAI) the delta member whose value holds it,
	// tool_calls (a call's arguments), reasoning_content, reasoning or
	// refusal; (Gemini) "thought", a thought part's text. Such chunks
	// give no text.
	FrameBy string
	// Tail is what followed the usage in a chunk, to the end of its data
	// (Gemini: modelVersion, responseId and the close), when the walk
	// read nothing there but the model; TailModel is where the model's
	// value stands in it ({0, 0}: none). Responses: what followed a text
	// delta up to the integer sequence_number that closed it.
	Tail      []byte
	TailModel [2]int
	// Chunk (Gemini) is the last plain chunk around its text:
	// Chunk[:ChunkSplit] before the text string, the rest after it, in
	// which the usage and the model stand at ChunkUsage and ChunkModel
	// ({0, 0}: none); ChunkCounts were read from that usage.
	Chunk                  []byte
	ChunkSplit             int
	ChunkUsage, ChunkModel [2]int
	ChunkCounts            UsageCounts
	ChunkMisses            int    // as FrameMisses
	ChunkBy                string // as FrameBy: "thought" for a thought's chunk
}

// MemoMisses is how many frames (or chunks) a stream keeps, one after
// another, without meeting any of them again before it stops keeping
// them: the copies would cost a stream whose chunks never repeat (a
// timestamp or an id that changes every chunk) more than they save.
const MemoMisses = 3

// Remember keeps a copy of raw (a valid object) and its counts, reusing
// the memo's buffer.
func (m *Memo) Remember(raw []byte, c UsageCounts) {
	if cap(m.Raw) < len(raw) { // room for the counts to grow a digit or a member
		m.Raw = make([]byte, 0, len(raw)+len(raw)/2)
	}
	m.Raw = append(m.Raw[:0], raw...)
	m.Counts, m.Split = c, 0
}

// Reset empties the memo, keeping its buffers: what one stream repeated
// says nothing about the next, and a frame means something else in
// another dialect (Gemini's starts at the candidates, OpenAI's at the
// chunk).
func (m *Memo) Reset() {
	*m = Memo{Raw: m.Raw[:0], Frame: m.Frame[:0], Tail: m.Tail[:0], Chunk: m.Chunk[:0]}
}

// RememberFrame keeps what stands before and after a text.
func (m *Memo) RememberFrame(before, after []byte) {
	m.Frame = append(append(m.Frame[:0], before...), after...)
	m.FrameSplit = len(before)
}

// RememberTail keeps what followed a chunk's usage and where its model
// value stood in it.
func (m *Memo) RememberTail(tail []byte, model [2]int) {
	m.Tail = append(m.Tail[:0], tail...)
	m.TailModel = model
}

// RememberAround keeps before and after, which stand on either side of a
// number the events do not repeat.
func (m *Memo) RememberAround(before, after []byte) {
	m.Raw = append(append(m.Raw[:0], before...), after...)
	m.Counts, m.Split = UsageCounts{}, len(before)
}

// SameChoices reports whether cs and o saw the same choices finish the
// same way (their memos aside).
func (cs *ChoiceSet) SameChoices(o *ChoiceSet) bool {
	return cs.seen == o.seen && cs.finished == o.finished && cs.other == o.other
}

// note records one choice of a chunk; index is -1 when it is not usable.
func (cs *ChoiceSet) Note(index int64, finished bool) {
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
func (cs *ChoiceSet) AllFinished() bool {
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
func (cs *ChoiceSet) Merge(other *ChoiceSet) {
	for i := range cs.seen {
		cs.seen[i] |= other.seen[i]
		cs.finished[i] |= other.finished[i]
	}
	cs.other = cs.other || other.other
}

var DoneEvent = []byte("data: [DONE]\n\n")
