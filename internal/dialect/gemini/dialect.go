package gemini

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// Google's Gemini API: paths that carry
// the model, the key in a header or the query, the stream chunks (each a
// whole GenerateContentResponse, with no event names), their fake 200s,
// usage, and Google's error shape. A stream has no terminal event: every
// candidate gets a finishReason and then the body ends.

// The methods of a model a Gemini client calls.
const (
	geminiGenerate      = "generateContent"
	geminiStreamMethod  = "streamGenerateContent"
	geminiCountTokens   = "countTokens"
	geminiRetryInfoType = "type.googleapis.com/google.rpc.RetryInfo"
)

// geminiDialect is Google's Gemini API, served as dialect `gemini`.
type Dialect struct{}

func (Dialect) String() string { return "gemini" }

// isCompletionPath: generateContent and streamGenerateContent of a model
// (countTokens is an aux path).
// A model that is not path-safe still makes it one, so that parseRequest
// refuses it with a 400 rather than letting it pass as another path.
func (Dialect) IsCompletionPath(path string) bool {
	_, method, ok := geminiPathShape(path)
	return ok && method != geminiCountTokens
}

// completionPath is the shape of a Gemini completion path; the model of an
// attempt's path is its own (upstreamPath).
func (Dialect) CompletionPath(string) string {
	return "/v1beta/models/gemini-2.5-flash:generateContent"
}

// upstreamPath is the client's path with the upstream model in it (a
// rewrite or a fallback renames it); a path geminiPath refuses never gets
// here (isCompletionPath).
func (Dialect) UpstreamPath(clientPath, model string) string {
	return RewritePath(strings.TrimSuffix(clientPath, "/"), model)
}

var geminiAuxPaths = []wire.AuxPath{
	{Method: http.MethodGet, Path: "/v1beta/models"},
	{Method: http.MethodGet, Path: "/v1beta/models/{id}"},
	{Method: http.MethodPost, Path: "/v1beta/models/{id}:countTokens"},
	{Method: http.MethodGet, Path: "/v1/models"},
	{Method: http.MethodGet, Path: "/v1/models/{id}"},
	{Method: http.MethodPost, Path: "/v1/models/{id}:countTokens"},
}

func (Dialect) AuxPaths() []wire.AuxPath { return geminiAuxPaths }

// sniffAux claims a /v1beta/ path, a countTokens call or a request with
// Google's key header, over the others. A client that only sends ?key=
// on a shared path (GET /v1/models) reads as OpenAI's.
func (Dialect) SniffAux(path string, h wire.HeaderGetter) int {
	if strings.HasPrefix(path, "/v1beta/") || strings.HasSuffix(path, ":"+geminiCountTokens) || h.Get("x-goog-api-key") != "" {
		return 3
	}
	return 0
}

// The errors never echo the path or the model: a client's path is bounded
// only by the request line's limit (KiBs), and the message reaches the
// answer and the request log line.
var (
	errNotModelMethod = errors.New("path: not a Gemini model method")
	errPathModel      = fmt.Errorf("model in the path: a Gemini model name is 1 to %d letters, digits and - . _ @, not starting with a dot", wire.MaxModelLen)
)

// parseRequest reads the model from the path and the stream mode from
// the method and ?alt=sse: a streamGenerateContent without it answers
// with one JSON array, handled as a non-stream body (no hedge, the
// response timeout). The body must be a JSON object; its fields are the
// provider's business.
func (Dialect) ParseRequest(path, rawQuery string, body []byte) (*wire.Request, error) {
	model, method, ok := geminiPathShape(strings.TrimSuffix(path, "/"))
	if !ok || method == geminiCountTokens {
		return nil, errNotModelMethod
	}
	if !ValidModel(model) {
		return nil, errPathModel
	}
	if it, ok := jsonscan.Open(body, 0, 0); !ok || !it.IsObject() {
		if !jsonscan.Valid(body) {
			return nil, wire.ErrInvalidJSON
		}
		return nil, jsonscan.ErrScan
	}
	req := &wire.Request{
		Body:       body,
		Model:      model,
		Stream:     IsStream(method) && IsSSE(rawQuery),
		ModelStart: -1,
	}
	// The validating walk, which leaves where the members stand for
	// their readers (SessionKey).
	if req.Top.IndexWatching(body, objectWords) != nil {
		return nil, wire.ErrInvalidJSON
	}
	return req, nil
}

// bodyFor: the model is in the path, so every attempt sends the body as is.
func (Dialect) BodyFor(req *wire.Request, _ string) []byte { return req.Body }

// sessionKey is the request's cachedContent: with affinity on, requests
// that use one cache go to one provider (the cache lives there). Gemini
// has no other conversation key.
func (Dialect) SessionKey(body []byte, top *jsonscan.Top, _ http.Header) string {
	return CachedContent(body, top)
}

var geminiCredentialHeaders = []string{"X-Goog-Api-Key", "X-Goog-User-Project"}

func (Dialect) CredentialHeaders() []string { return geminiCredentialHeaders }

func (Dialect) SetAuth(h http.Header, key string) { h.Set("X-Goog-Api-Key", key) }

// inspect keeps the stream's end state in cs: the candidates, and a
// blocked prompt (no candidates) as a finished candidate 0, so
// cs.allFinished is geminiStream.done.
func (Dialect) Inspect(ev sse.Event, withText bool, cs *wire.ChoiceSet) wire.EventInfo {
	if cs == nil {
		return InspectGeminiStream(ev, withText, nil)
	}
	st := Stream{candidates: *cs}
	info := InspectGeminiStream(ev, withText, &st)
	*cs = st.candidates
	if st.blocked {
		cs.Note(0, true)
	}
	return info
}

// terminalName: Gemini sends no terminal event (the gate never sees one).
func (Dialect) TerminalName(sse.Event) string { return "end of body" }

// finishGrace: every candidate's finishReason completes the answer, and
// the body then ends; the relay waits a grace for that end.
func (Dialect) FinishGrace() bool { return true }

// streamEnd: a Gemini stream ends with the body, nothing is synthesized.
func (Dialect) StreamEnd() []byte { return nil }

func (Dialect) CheckBody(body []byte) (reason string, err error) { return CheckGeminiBody(body) }

func (Dialect) CheckBodyReject(body []byte, reject [][]byte) error {
	return CheckGeminiBodyReject(body, reject)
}

func (Dialect) ObserveEvent(u *wire.Usage, ev sse.Event) { ObserveGeminiEvent(u, ev) }

func (Dialect) ObserveBody(u *wire.Usage, body []byte) { ObserveGeminiBody(u, body) }

func (Dialect) ModelMissing(body []byte) bool { return geminiModelMissing(body) }

func (Dialect) PromptTooLong(body []byte) bool { return PromptTooLong(body) }

func (Dialect) Classify(status int, body []byte, passThroughKey bool) wire.FailClass {
	return Classify(status, body, passThroughKey)
}

// retryDelay is the RetryInfo of a 429 RESOURCE_EXHAUSTED body.
func (Dialect) RetryDelay(body []byte) (time.Duration, bool) { return RetryDelay(body) }

func (Dialect) ErrorType(status int) string { return geminiStatus(status) }

func (Dialect) ErrorJSON(status int, message string) []byte {
	return ErrorJSON(status, message)
}

func (Dialect) ErrorJSONRetry(status int, message string, retryAfterSecs int) []byte {
	return ErrorJSONRetry(status, message, retryAfterSecs)
}

func (Dialect) ErrorEvent(status int, message string) []byte {
	return ErrorEvent(status, message)
}

// geminiPath splits a Gemini model path,
// /v1beta/models/{model}:{method} or /v1/models/{model}:{method}, with
// method generateContent, streamGenerateContent or countTokens. ok is
// false for any other path and for a model that is not path-safe (see
// geminiValidModel): the model is spliced back into the upstream path, so
// a name that could change that path's structure is refused, not cleaned.
func Path(path string) (model, method string, ok bool) {
	model, method, ok = geminiPathShape(path)
	if !ok || !ValidModel(model) {
		return "", "", false
	}
	return model, method, true
}

// geminiPathShape splits a Gemini model path as geminiPath does, whatever
// the model between the prefix and the method.
func geminiPathShape(path string) (model, method string, ok bool) {
	rest, found := strings.CutPrefix(path, "/v1beta/models/")
	if !found {
		rest, found = strings.CutPrefix(path, "/v1/models/")
	}
	if !found {
		return "", "", false
	}
	i := strings.LastIndexByte(rest, ':')
	if i < 0 {
		return "", "", false
	}
	model, method = rest[:i], rest[i+1:]
	switch method {
	case geminiGenerate, geminiStreamMethod, geminiCountTokens:
	default:
		return "", "", false
	}
	return model, method, true
}

// CheckPathModel is Gemini's wire.ModelInPath: its model is a path segment.
func (Dialect) CheckPathModel(name string) error {
	if !ValidModel(name) {
		return errors.New("a Gemini model name is letters, digits and - . _ @")
	}
	return nil
}

// ValidModel reports whether name can stand as one path segment
// without escaping: 1 to maxModelLen bytes of ASCII letters, digits and
// - . _ @, not starting with a dot (so never "." or ".."). That excludes
// /, ?, #, %, \, :, spaces and control characters, raw or encoded.
func ValidModel(name string) bool {
	if name == "" || len(name) > wire.MaxModelLen || name[0] == '.' {
		return false
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-', c == '.', c == '_', c == '@':
		default:
			return false
		}
	}
	return true
}

// geminiRewritePath returns path with its model replaced by newModel,
// keeping the API version and the method. A path that is not a Gemini
// model path, or a newModel that is not path-safe, leaves path unchanged
// (the configured model names are checked with geminiValidModel when the
// module is provisioned).
func RewritePath(path, newModel string) string {
	model, method, ok := Path(path)
	if !ok || !ValidModel(newModel) {
		return path
	}
	prefix := path[:len(path)-len(model)-1-len(method)]
	return prefix + newModel + ":" + method
}

// geminiIsStream reports whether method streams (possibly as a JSON array:
// see geminiIsSSE).
func IsStream(method string) bool { return method == geminiStreamMethod }

// geminiIsSSE reports whether a raw query asks for server-sent events
// (alt=sse, the first alt parameter deciding, as url.Values.Get does).
// Without it streamGenerateContent answers with one JSON array of chunks,
// which the proxy handles as a non-stream body.
func IsSSE(rawQuery string) bool {
	for param := range strings.SplitSeq(rawQuery, "&") {
		name, value, _ := strings.Cut(param, "=")
		if wire.QueryName(name) != "alt" {
			continue
		}
		v, err := url.QueryUnescape(value)
		return err == nil && strings.EqualFold(v, "sse")
	}
	return false
}

// geminiClientKey returns the key the client sent: the x-goog-api-key
// header, else the first key query parameter; "" when there is neither.
// It is what a provider without a key of its own passes through.
func ClientKey(h http.Header, rawQuery string) string {
	if k := strings.TrimSpace(h.Get("x-goog-api-key")); k != "" {
		return k
	}
	for param := range strings.SplitSeq(rawQuery, "&") {
		name, value, _ := strings.Cut(param, "=")
		if wire.QueryName(name) != "key" {
			continue
		}
		if v, err := url.QueryUnescape(value); err == nil && v != "" {
			return v
		}
	}
	return ""
}

func (Dialect) CachedInInput() bool { return true }
