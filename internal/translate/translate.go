package translate

import (
	"errors"
	"fmt"
	"strings"

	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
)

// The four wire formats, by the names the Caddyfile's `api` and
// `translate` use.
const (
	Anthropic = "anthropic"
	OpenAI    = "openai"
	Responses = "responses"
	Gemini    = "gemini"
)

// Loss is one thing of a client request that a translation could not carry.
type Loss struct {
	// What names the feature in the client's words, e.g. "server tool
	// web_search_20250305" or "cache_control breakpoints".
	What string
	// Material losses change what the request asks for: the candidate must
	// be skipped. Advisory ones change how it is served: proceed, and say so.
	Material bool
}

func (l Loss) String() string {
	if l.Material {
		return l.What + " (refused)"
	}
	return l.What + " (dropped)"
}

// Material reports whether any loss is material: then the candidate
// cannot serve the request and nothing may be sent to it.
func Material(losses []Loss) bool {
	for _, l := range losses {
		if l.Material {
			return true
		}
	}
	return false
}

// Describe names the losses of one kind (material or advisory) in one
// line, for a refusal message or a response header; "" when there are none.
func Describe(losses []Loss, material bool) string {
	var b strings.Builder
	for _, l := range losses {
		if l.Material != material {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(l.What)
	}
	return b.String()
}

// Pair translates between one client format and one target format.
type Pair interface {
	Client() string
	Target() string
	// Translate translates a client request body into the target's body
	// for targetModel, keeping the stream flag (a streamed Chat request
	// also asks for usage), with every loss; when Material(t.Losses) the
	// body must not be sent. err is a body that is not a valid request of
	// the client's format. The Translation reads the target's answers to
	// this request, including what depends on it (a Responses client's
	// custom tools).
	Translate(body []byte, targetModel string) (*Translation, error)
	// Request is Translate for answers read by Response and NewStream,
	// which know nothing of the request: what only Translate's answers
	// can carry (custom tools) is a material loss here.
	Request(body []byte, targetModel string) (out []byte, losses []Loss, err error)
	// Response translates the target's complete non-stream answer into
	// the client's. An answer that cannot be carried exactly (arguments
	// that do not parse, an unknown stop reason) is an error.
	Response(body []byte) ([]byte, error)
	// NewStream returns the translator of one streamed attempt.
	NewStream() Stream
	// Error translates the target's error answer (status and body) into
	// the client's error shape, keeping what agents act on: overload,
	// rate limits and context overflow.
	Error(status int, body []byte) (int, []byte)
}

// Translation is one request translated: the target's body, what it
// lost, and the way back for the target's answers to it.
type Translation struct {
	Body   []byte
	Losses []Loss

	response  func(body []byte) ([]byte, error)
	newStream func() Stream
	// needs names what the answers carry only through this Translation.
	needs []string
}

// Response translates the target's complete non-stream answer into the
// client's. An answer that cannot be carried exactly (arguments that do
// not parse, an unknown stop reason) is an error.
func (t *Translation) Response(body []byte) ([]byte, error) { return t.response(body) }

// NewStream returns the translator of one streamed attempt.
func (t *Translation) NewStream() Stream { return t.newStream() }

// requestOnly is Pair.Request from Pair.Translate.
func requestOnly(p Pair, body []byte, model string) ([]byte, []Loss, error) {
	t, err := p.Translate(body, model)
	if err != nil {
		return nil, nil, err
	}
	losses := t.Losses
	for _, n := range t.needs {
		losses = addLoss(losses, n, true)
	}
	return t.Body, losses, nil
}

// Stream translates one streamed answer, event by event.
type Stream interface {
	// Event consumes one target SSE event and appends the client's SSE
	// bytes (possibly none) to dst. An error means the stream cannot be
	// carried on: the caller writes Fail's bytes and ends the response.
	Event(dst []byte, ev sse.Event) ([]byte, error)
	// End is called at the upstream's end of body: it appends the last
	// client bytes, or returns an error when the target stream did not
	// finish properly (never a clean stop then).
	End(dst []byte) ([]byte, error)
	// Fail appends the client's error event for err (from Event or End,
	// or the caller's own, e.g. a read error), in the client's format.
	// After Fail the stream is finished.
	Fail(dst []byte, err error) []byte
}

// Finisher is a Stream whose target can finish its answer before what
// ends its stream: Chat's finish_reason, which the usage chunk and [DONE]
// follow; Gemini's finishReason, which the end of the body follows.
// Finished reports that it did: End then completes the client's answer.
// The engine ends such a stream after a grace, as it does a native one,
// when the target sends nothing more and does not close.
type Finisher interface {
	Finished() bool
}

// For returns the translation that serves client-format requests with a
// target-format provider.
func For(client, target string) (Pair, bool) {
	for _, p := range pairs {
		if p.Client() == client && p.Target() == target {
			return p, true
		}
	}
	return nil, false
}

// Pairs lists the supported (client, target) pairs, for configuration checks.
func Pairs() [][2]string {
	out := make([][2]string, 0, len(pairs))
	for _, p := range pairs {
		out = append(out, [2]string{p.Client(), p.Target()})
	}
	return out
}

var pairs = []Pair{
	anthropicToChat{},
	responsesToAnthropic{},
	anthropicToGemini{},
	anthropicToResponses{},
	chatToAnthropic{},
	chatToGemini{},
	chatToResponses{},
	geminiToAnthropic{},
	geminiToChat{},
	responsesToGemini{},
	responsesToChat{},
}

// TargetPath is the path (and query) of a completion request of the
// target format: Gemini names the model and the stream mode in it; the
// others in the body.
func TargetPath(target, model string, stream bool) string {
	switch target {
	case Anthropic:
		return "/v1/messages"
	case OpenAI:
		return "/v1/chat/completions"
	case Responses:
		return "/v1/responses"
	case Gemini:
		if stream {
			return "/v1beta/models/" + model + ":streamGenerateContent?alt=sse"
		}
		return "/v1beta/models/" + model + ":generateContent"
	}
	return ""
}

// UpstreamError is an error event or error object the target sent inside
// a stream, mapped to the client's error type.
type UpstreamError struct {
	Status  int    // the HTTP status the error type stands for
	Type    string // the client format's error type
	Code    string // the client format's error code, if it has one
	Message string
}

func (e *UpstreamError) Error() string {
	return fmt.Sprintf("upstream error %s: %s", e.Type, e.Message)
}

// ErrAfterEnd is Event's error for an event after the target's terminal
// one: the client's answer is complete and nothing more is written for it.
var ErrAfterEnd = errors.New("translate: upstream event after the end of the answer")

// errMalformed marks target events that are not what the target's format
// allows at that point.
var errMalformed = errors.New("translate: malformed upstream stream")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errMalformed, fmt.Sprintf(format, args...))
}
