package sim

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
)

// maxBody bounds a request body; larger ones get 413. A variable for tests.
var maxBody int64 = 64 << 20

// endpoint is what a request asks for.
type endpoint uint8

const (
	endpointUnknown endpoint = iota
	endpointMessages
	endpointCountTokens
	endpointChat
	endpointModels
	endpointResponses          // POST /v1/responses
	endpointCompact            // POST /v1/responses/compact
	endpointInputTokens        // POST /v1/responses/input_tokens
	endpointGetResponse        // GET /v1/responses/{id}
	endpointDeleteResponse     // DELETE /v1/responses/{id}
	endpointCancelResponse     // POST /v1/responses/{id}/cancel
	endpointResponseInputItems // GET /v1/responses/{id}/input_items
)

// storedEndpoint reports whether ep acts on a stored response named in the
// path; those requests have no body to decode.
func (ep endpoint) storedEndpoint() bool {
	return ep >= endpointGetResponse && ep <= endpointResponseInputItems
}

// request holds the fields of a request body the simulator acts on.
type request struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`

	// Responses API.
	PreviousResponseID string          `json:"previous_response_id"`
	Input              json.RawMessage `json:"input"`
	Instructions       json.RawMessage `json:"instructions"`
	Metadata           json.RawMessage `json:"metadata"`
	Store              *bool           `json:"store"`

	// The conversation, read for an assistant prefill: Anthropic and chat
	// messages, Gemini contents (the Responses API's is Input).
	Messages json.RawMessage `json:"messages"`
	Contents json.RawMessage `json:"contents"`

	// The tools offered, read for a scripted tool call (Config.ToolCalls).
	Tools json.RawMessage `json:"tools"`
}

// exchange is one request being served.
type exchange struct {
	s    *Simulator
	p    *plan
	w    http.ResponseWriter
	r    *http.Request
	rc   *http.ResponseController
	rec  *RequestRecord
	wire wire
	ep   endpoint

	req         request
	fault       *faultRule
	model       string // reported in the response
	modelJSON   []byte // model, quoted
	id          string
	created     int64
	inputTokens int
	bodyLen     int
	buf         []byte // reused for each event

	// A scripted tool loop: the call this request is answered with (nil
	// for a text answer), and the turn (TurnToolCall, TurnToolResult or "").
	call *scriptedCall
	turn string

	// Responses API: the id in the path, the stored response it names or
	// that this request creates, and the next event's sequence_number.
	pathID string
	stored *storedResponse
	seq    int
}

// lengthStop reports whether a text answer ends at the output-token limit
// (Config.LengthStop).
func (ex *exchange) lengthStop() bool { return ex.p.cfg.LengthStop && ex.call == nil }

// route reads the endpoint and dialect from the request. Paths match by
// suffix, so base URLs with a prefix ("/v1", "/anthropic/v1") work.
func route(r *http.Request) (endpoint, string, wire) {
	p := strings.TrimSuffix(r.URL.Path, "/")
	if ep, method, w, ok := routeGemini(r, p); ok {
		return ep, method, w
	}
	if ep, method, ok := routeResponses(r, p); ok {
		return ep, method, responsesWire{}
	}
	switch {
	case strings.HasSuffix(p, "/messages/count_tokens"):
		return endpointCountTokens, http.MethodPost, anthropicWire{}
	case strings.HasSuffix(p, "/messages"):
		return endpointMessages, http.MethodPost, anthropicWire{}
	case strings.HasSuffix(p, "/chat/completions"):
		return endpointChat, http.MethodPost, openaiWire{}
	case strings.HasSuffix(p, "/models"):
		return endpointModels, http.MethodGet, guessWire(r)
	}
	return endpointUnknown, "", guessWire(r)
}

// guessWire picks the error dialect of a path both APIs share or neither has.
func guessWire(r *http.Request) wire {
	p := r.URL.Path
	switch {
	case strings.Contains(p, "/chat/"), strings.Contains(p, "/completions"),
		strings.Contains(p, "/responses"), strings.Contains(p, "/embeddings"):
		return openaiWire{}
	case geminiRequest(r):
		return &geminiWire{}
	case r.Header.Get("X-Api-Key") != "", r.Header.Get("Anthropic-Version") != "":
		return anthropicWire{}
	case r.Header.Get("Authorization") != "":
		return openaiWire{}
	}
	return anthropicWire{}
}

func (ex *exchange) serve() {
	if serveGeminiObjects(ex) || serveFiles(ex) || serveConversations(ex) {
		return
	}
	ep, method, w := route(ex.r)
	ex.wire, ex.ep = w, ep
	gw, gemini := w.(*geminiWire)
	if gemini {
		gw.bind(ex)
	}
	switch {
	case ep == endpointUnknown:
		ex.fail(http.StatusNotFound, "Not Found: "+ex.r.Method+" "+ex.r.URL.Path)
		return
	case ex.r.Method != method:
		ex.w.Header().Set("Allow", method)
		ex.fail(http.StatusMethodNotAllowed, "Method Not Allowed: use "+method)
		return
	case !ex.authorized(ep) && gemini:
		gw.unauthorized(ex)
		return
	case !ex.authorized(ep):
		ex.fail(http.StatusUnauthorized, "")
		return
	}
	if !ex.readBody(ep) || !ex.resolveResponse(ep) {
		return
	}
	if (ep == endpointMessages || ep == endpointChat || ep == endpointResponses) && !ex.chargeQuota() {
		return
	}
	if !prepareAnswer(ex, ep) {
		return
	}

	ex.fault = ex.p.pickFault(ex.req.Model, ex.r.Header, ex.turn)
	if ex.fault != nil {
		ex.s.rec.faulted(ex.rec, &ex.fault.Fault)
		if !ex.fault.Kind.midStream() {
			ex.strikeNow()
			return
		}
	}

	switch ep {
	case endpointMessages, endpointChat, endpointGeminiGenerate:
		ex.generate()
	case endpointGeminiCount:
		ex.sendJSON(geminiCountBody(ex.inputTokens), 0)
	case endpointGeminiModels:
		ex.sendJSON(geminiModelsBody(ex.p.cfg.Model), 0)
	case endpointGeminiModel:
		ex.sendJSON(geminiModelBody(ex.req.Model), 0)
	case endpointCountTokens:
		ex.sendJSON(countTokensBody(ex.inputTokens), 0)
	case endpointModels:
		ex.sendJSON(modelsBody(ex.p.cfg.Model), 0)
	case endpointResponses:
		ex.generate()
		ex.s.store.settle(ex.stored)
	case endpointCompact:
		compact(ex)
	case endpointInputTokens:
		ex.sendJSON(inputTokensBody(ex.inputTokens), 0)
	default:
		serveStored(ex, ep)
	}
}

// authorized checks the configured key in the header of the dialect; the
// models list, shared by both, accepts either header.
func (ex *exchange) authorized(ep endpoint) bool {
	if ex.p.cfg.Key == "" && len(ex.p.cfg.Keys) == 0 {
		return true
	}
	if ex.p.cfg.Key != "" && ex.authorizedWith(ep, ex.p.cfg.Key) {
		return true
	}
	for _, k := range ex.p.cfg.Keys {
		if ex.authorizedWith(ep, k) {
			return true
		}
	}
	return false
}

func (ex *exchange) authorizedWith(ep endpoint, key string) bool {
	anthropicOK := ex.r.Header.Get("X-Api-Key") == key
	openaiOK := ex.r.Header.Get("Authorization") == "Bearer "+key
	switch {
	case ep == endpointModels:
		return anthropicOK || openaiOK
	case ex.wire.name() == "gemini":
		return geminiKey(ex.r) == key
	case ex.wire.name() == "openai", ex.wire.name() == "responses":
		return openaiOK
	}
	return anthropicOK
}

// readBody reads and decodes the body, answering 413 or 400 when it cannot.
func (ex *exchange) readBody(ep endpoint) bool {
	body, err := io.ReadAll(http.MaxBytesReader(ex.w, ex.r.Body, maxBody))
	ex.s.rec.update(ex.rec, func(rec *RequestRecord) { rec.BodySize = int64(len(body)) })
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		ex.fail(http.StatusRequestEntityTooLarge, "")
		return false
	case err != nil:
		ex.fail(http.StatusBadRequest, "reading the request body: "+err.Error())
		return false
	}
	ex.inputTokens = max(1, len(body)/4)
	ex.bodyLen = len(body)
	gw, gemini := ex.wire.(*geminiWire)
	if ep == endpointModels || ep.storedEndpoint() || ep == endpointGeminiModels || ep == endpointGeminiModel {
		return true
	}
	if err := json.Unmarshal(body, &ex.req); err != nil {
		ex.fail(http.StatusBadRequest, "The request body is not valid JSON: "+err.Error())
		return false
	}
	if gemini {
		gw.bind(ex) // the model and stream are the path's, not the body's
	}
	if ex.req.Model == "" && ep != endpointCountTokens && ep != endpointInputTokens {
		ex.fail(http.StatusBadRequest, "model: Field required")
		return false
	}
	ex.s.rec.update(ex.rec, func(rec *RequestRecord) {
		rec.Model, rec.Stream, rec.PreviousResponseID = ex.req.Model, ex.req.Stream, ex.req.PreviousResponseID
	})
	ex.model = ex.req.Model
	if ex.p.cfg.Model != "" {
		ex.model = ex.p.cfg.Model
	}
	return resolveFiles(ex, body) && resolveGeminiObjects(ex, body) && resolveConversation(ex, body) && checkThinking(ex, body)
}
