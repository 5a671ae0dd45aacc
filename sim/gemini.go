package sim

import (
	"cmp"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The Gemini API endpoints (generativelanguage, v1beta and v1).
const (
	endpointGeminiGenerate endpoint = iota + 64 // POST .../models/{model}:generateContent and :streamGenerateContent
	endpointGeminiCount                         // POST .../models/{model}:countTokens
	endpointGeminiModels                        // GET .../models
	endpointGeminiModel                         // GET .../models/{model}
)

// geminiWire is the Gemini API. Unlike the other dialects it is made for one
// request: the model and the streaming mode are in the path, not the body,
// and the framing of a stream (SSE with ?alt=sse, else one JSON array)
// needs the count of chunks sent.
type geminiWire struct {
	ex     *exchange
	model  string // from the path
	stream bool   // :streamGenerateContent
	sse    bool   // ?alt=sse; a stream without it is a JSON array of chunks
	chunks int    // chunks of the stream sent so far
	data   []byte // the chunk being sent
}

// The status names of google.rpc.Code that Gemini reports in error.status.
func geminiStatus(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		return "INVALID_ARGUMENT"
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case http.StatusForbidden:
		return "PERMISSION_DENIED"
	case http.StatusNotFound, http.StatusMethodNotAllowed:
		return "NOT_FOUND"
	case http.StatusConflict:
		return "ABORTED"
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case 499:
		return "CANCELLED"
	case http.StatusNotImplemented:
		return "UNIMPLEMENTED"
	case http.StatusServiceUnavailable, statusOverloaded:
		return "UNAVAILABLE"
	case http.StatusGatewayTimeout:
		return "DEADLINE_EXCEEDED"
	}
	if status >= 500 {
		return "INTERNAL"
	}
	return "FAILED_PRECONDITION"
}

var (
	geminiSSEEnd     = []byte("\r\n\r\n")
	geminiMalformed  = []byte(`{"candidates": [{"content": {"parts": [{"te`)
	geminiKeyInvalid = []map[string]any{{
		"@type":  "type.googleapis.com/google.rpc.ErrorInfo",
		"reason": "API_KEY_INVALID",
		"domain": "googleapis.com",
	}}
)

// routeGemini routes the Gemini API paths; p has no trailing slash. A
// method after a colon (":generateContent") is Gemini's alone; the model
// list and model paths are shared with the other APIs and are Gemini's with
// a Gemini credential or a /v1beta/ path.
func routeGemini(r *http.Request, p string) (endpoint, string, wire, bool) {
	if i := strings.LastIndex(p, "/models/"); i >= 0 {
		name, method, colon := strings.Cut(p[i+len("/models/"):], ":")
		if strings.Contains(name, "/") {
			return endpointUnknown, "", nil, false
		}
		w := &geminiWire{model: name}
		switch {
		case colon && method == "generateContent":
			return endpointGeminiGenerate, http.MethodPost, w, true
		case colon && method == "streamGenerateContent":
			w.stream, w.sse = true, r.URL.Query().Get("alt") == "sse"
			return endpointGeminiGenerate, http.MethodPost, w, true
		case colon && method == "countTokens":
			return endpointGeminiCount, http.MethodPost, w, true
		case colon:
			return endpointUnknown, "", w, true
		case geminiRequest(r):
			return endpointGeminiModel, http.MethodGet, w, true
		}
		return endpointUnknown, "", nil, false
	}
	if strings.HasSuffix(p, "/models") && geminiRequest(r) {
		return endpointGeminiModels, http.MethodGet, &geminiWire{}, true
	}
	return endpointUnknown, "", nil, false
}

// geminiRequest reports whether a request on a path the APIs share is a
// Gemini one.
func geminiRequest(r *http.Request) bool {
	return strings.Contains(r.URL.Path, "/v1beta/") || r.Header.Get("X-Goog-Api-Key") != "" ||
		(r.URL.RawQuery != "" && r.URL.Query().Has("key"))
}

// bind ties the dialect to its request; the model and streaming mode come
// from the path.
func (w *geminiWire) bind(ex *exchange) {
	w.ex = ex
	ex.req.Model, ex.req.Stream = w.model, w.stream
}

// geminiKey is the API key of a request: the x-goog-api-key header, else the
// key query parameter, as Google's front end reads them.
func geminiKey(r *http.Request) string {
	if k := r.Header.Get("X-Goog-Api-Key"); k != "" {
		return k
	}
	if r.URL.RawQuery == "" {
		return ""
	}
	return r.URL.Query().Get("key")
}

// unauthorized answers a request without the configured key as Gemini
// does: 403 without a key, 400 API_KEY_INVALID with a wrong one.
func (w *geminiWire) unauthorized(ex *exchange) {
	if geminiKey(ex.r) == "" {
		ex.fail(http.StatusForbidden, "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.")
		return
	}
	ex.writeHeader(http.StatusBadRequest, "application/json; charset=UTF-8")
	ex.w.Write(geminiErrorBody(http.StatusBadRequest, "API key not valid. Please pass a valid API key.", geminiKeyInvalid))
}

func (*geminiWire) name() string     { return "gemini" }
func (*geminiWire) idPrefix() string { return "sim-gemini-" }

// geminiErrorBody is {"error":{"code","message","status","details"?}}.
func geminiErrorBody(status int, message string, details []map[string]any) []byte {
	type detail struct {
		Code    int              `json:"code"`
		Message string           `json:"message"`
		Status  string           `json:"status"`
		Details []map[string]any `json:"details,omitempty"`
	}
	return mustJSON(struct {
		Error detail `json:"error"`
	}{detail{status, message, geminiStatus(status), details}})
}

// errorBody is Gemini's error; a 429 carries a RetryInfo detail when the
// fault has a Retry-After.
func (w *geminiWire) errorBody(status int, message string) []byte {
	var details []map[string]any
	if status == http.StatusTooManyRequests && w.ex != nil && w.ex.fault != nil {
		if d, ok := retryDelay(w.ex.fault.RetryAfter); ok {
			details = []map[string]any{{
				"@type":      "type.googleapis.com/google.rpc.RetryInfo",
				"retryDelay": strconv.FormatInt(int64(d/time.Second), 10) + "s",
			}}
		}
	}
	return geminiErrorBody(status, message, details)
}

// retryDelay reads a Retry-After value: seconds, or an HTTP date.
func retryDelay(v string) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
		return time.Duration(n) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(0, t.Sub(now()).Round(time.Second)), true
	}
	return 0, false
}

func (*geminiWire) defaultMessage(status int, model string) string {
	switch status {
	case http.StatusBadRequest:
		return "The input token count (250000) exceeds the maximum number of tokens allowed (1048576)."
	case http.StatusUnauthorized:
		return "Request had invalid authentication credentials."
	case http.StatusForbidden:
		return "The caller does not have permission"
	case http.StatusNotFound:
		return "models/" + model + " is not found for API version v1beta, or is not supported for generateContent. Call ListModels to see the list of available models and their supported methods."
	case http.StatusRequestEntityTooLarge:
		return "Request payload size exceeds the limit."
	case http.StatusTooManyRequests:
		return "Resource has been exhausted (e.g. check quota)."
	case http.StatusInternalServerError:
		return "An internal error has occurred. Please retry or report the issue."
	case http.StatusServiceUnavailable, statusOverloaded:
		return "The model is overloaded. Please try again later."
	case http.StatusGatewayTimeout:
		return "Deadline expired before operation could complete."
	}
	return "Error " + strconv.Itoa(status)
}

// usage is the usageMetadata of the whole response. Cached tokens are part
// of the prompt, as Gemini counts them.
func (w *geminiWire) usage(b []byte, ex *exchange, final bool) []byte {
	prompt := ex.inputTokens + ex.p.cfg.CacheRead
	b = append(b, `"usageMetadata":{"promptTokenCount":`...)
	b = strconv.AppendInt(b, int64(prompt), 10)
	total := prompt
	if final {
		b = append(b, `,"candidatesTokenCount":`...)
		b = strconv.AppendInt(b, int64(len(ex.p.deltas)), 10)
		total += len(ex.p.deltas)
	}
	b = append(b, `,"totalTokenCount":`...)
	b = strconv.AppendInt(b, int64(total), 10)
	if ex.p.cfg.CacheRead > 0 {
		b = append(b, `,"cachedContentTokenCount":`...)
		b = strconv.AppendInt(b, int64(ex.p.cfg.CacheRead), 10)
	}
	b = append(b, `,"promptTokensDetails":[{"modality":"TEXT","tokenCount":`...)
	b = strconv.AppendInt(b, int64(prompt), 10)
	return append(b, `}]}`...)
}

// chunk appends one GenerateContentResponse with text (a JSON string); the
// final one has finishReason STOP and the complete usage.
func (w *geminiWire) chunk(b []byte, ex *exchange, text []byte, final bool) []byte {
	b = append(b, `{"candidates":[{"content":{"parts":[{"text":`...)
	b = append(b, text...)
	return w.chunkEnd(b, ex, final)
}

// chunkEnd closes a chunk's parts and candidate and appends the finish (on
// the final one), the usage, the model version and the response id.
func (w *geminiWire) chunkEnd(b []byte, ex *exchange, final bool) []byte {
	b = append(b, `}],"role":"model"},`...)
	switch {
	case final && ex.lengthStop():
		b = append(b, `"finishReason":"MAX_TOKENS",`...)
	case final:
		b = append(b, `"finishReason":"STOP",`...)
	}
	b = append(b, `"index":0}],`...)
	b = w.usage(b, ex, final)
	b = append(b, `,"modelVersion":`...)
	b = append(b, ex.quotedModel()...)
	b = append(b, `,"responseId":"`...)
	b = append(b, ex.id...)
	return append(b, `"}`...)
}

func (w *geminiWire) completion(ex *exchange) []byte {
	return w.chunk(nil, ex, mustJSON(ex.p.text), true)
}

// emitChunk frames data as the next element of the stream: an SSE event
// "data: {...}\r\n\r\n", or an element of the JSON array.
func (w *geminiWire) emitChunk(ex *exchange, data []byte) bool {
	b := ex.buf[:0]
	switch {
	case w.sse:
		b = append(b, "data: "...)
	case w.chunks == 0:
		b = append(b, '[')
	default:
		b = append(b, "\n,\r\n"...)
	}
	b = append(b, data...)
	if w.sse {
		b = append(b, geminiSSEEnd...)
	}
	w.chunks++
	ex.buf = b
	return ex.emit(b)
}

// streamStart sends nothing: Gemini's first chunk carries text.
func (*geminiWire) streamStart(*exchange) bool { return true }

func (w *geminiWire) streamDelta(ex *exchange, i int) bool {
	w.data = w.chunk(w.data[:0], ex, ex.p.responsesDeltas[i], false)
	return w.emitChunk(ex, w.data)
}

func (w *geminiWire) streamEnd(ex *exchange) bool {
	if !w.emitChunk(ex, w.chunk(nil, ex, []byte(`""`), true)) {
		return false
	}
	if w.sse {
		return true
	}
	return ex.emit([]byte("\n]"))
}

func (w *geminiWire) streamError(status int, message string) []byte {
	return append(append([]byte("data: "), w.errorBody(status, message)...), geminiSSEEnd...)
}

// malformedEvent is half a chunk, in the framing of the stream.
func (w *geminiWire) malformedEvent() []byte {
	var b []byte
	switch {
	case w.sse:
		b = append(b, "data: "...)
	case w.chunks == 0:
		b = append(b, '[')
	default:
		b = append(b, "\n,\r\n"...)
	}
	b = append(b, geminiMalformed...)
	if w.sse {
		b = append(b, geminiSSEEnd...)
	}
	w.chunks++
	return b
}

// fake200 answers 200 with Gemini's error object: the body, the first and
// only chunk of an SSE stream, or the only element of a JSON-array stream.
// Without a status in the fault it is 503 UNAVAILABLE, Gemini's overload.
func (w *geminiWire) fake200(ex *exchange, status int, message string) {
	if ex.fault.Status == 0 {
		status = http.StatusServiceUnavailable
	}
	body := w.errorBody(status, cmp.Or(message, w.defaultMessage(status, w.model)))
	if !w.stream {
		ex.writeHeader(http.StatusOK, "application/json; charset=UTF-8")
		ex.w.Write(body)
		return
	}
	ex.startSSE()
	_ = w.emitChunk(ex, body) && (w.sse || ex.emit([]byte("\n]")))
}

// contentType is that of a stream.
func (w *geminiWire) contentType() string {
	if w.sse {
		return "text/event-stream"
	}
	return "application/json; charset=UTF-8"
}

// geminiCountBody answers :countTokens.
func geminiCountBody(tokens int) []byte {
	b := strconv.AppendInt([]byte(`{"totalTokens":`), int64(tokens), 10)
	b = append(b, `,"promptTokensDetails":[{"modality":"TEXT","tokenCount":`...)
	b = strconv.AppendInt(b, int64(tokens), 10)
	return append(b, `}]}`...)
}

// geminiModel is a Model of the Gemini API.
type geminiModel struct {
	Name                       string   `json:"name"`
	Version                    string   `json:"version"`
	DisplayName                string   `json:"displayName"`
	Description                string   `json:"description"`
	InputTokenLimit            int      `json:"inputTokenLimit"`
	OutputTokenLimit           int      `json:"outputTokenLimit"`
	SupportedGenerationMethods []string `json:"supportedGenerationMethods"`
	Temperature                float64  `json:"temperature"`
	TopP                       float64  `json:"topP"`
	TopK                       int      `json:"topK"`
	MaxTemperature             float64  `json:"maxTemperature"`
	Thinking                   bool     `json:"thinking"`
}

func newGeminiModel(id string) geminiModel {
	return geminiModel{
		Name: "models/" + id, Version: "001", DisplayName: id, Description: "llm_sim model",
		InputTokenLimit: 1048576, OutputTokenLimit: 65536,
		SupportedGenerationMethods: []string{"generateContent", "countTokens"},
		Temperature:                1, TopP: 0.95, TopK: 64, MaxTemperature: 2, Thinking: true,
	}
}

// geminiModelsBody answers GET .../models: the configured model, or a
// simulated one.
func geminiModelsBody(model string) []byte {
	return mustJSON(struct {
		Models []geminiModel `json:"models"`
	}{[]geminiModel{newGeminiModel(cmp.Or(model, "gemini-sim-1"))}})
}

// geminiModelBody answers GET .../models/{model}.
func geminiModelBody(model string) []byte {
	return mustJSON(newGeminiModel(model))
}
