package sim

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
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
)

// request holds the fields of a request body the simulator acts on.
type request struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
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

	body        []byte
	req         request
	fault       *faultRule
	model       string // reported in the response
	modelJSON   []byte // model, quoted
	id          string
	created     int64
	inputTokens int
	buf         []byte // reused for each event
}

// route reads the endpoint and dialect from the request. Paths match by
// suffix, so base URLs with a prefix ("/v1", "/anthropic/v1") work.
func route(r *http.Request) (endpoint, string, wire) {
	p := strings.TrimSuffix(r.URL.Path, "/")
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
	case r.Header.Get("X-Api-Key") != "", r.Header.Get("Anthropic-Version") != "":
		return anthropicWire{}
	case r.Header.Get("Authorization") != "":
		return openaiWire{}
	}
	return anthropicWire{}
}

func (ex *exchange) serve() {
	ep, method, w := route(ex.r)
	ex.wire = w
	switch {
	case ep == endpointUnknown:
		ex.fail(http.StatusNotFound, "Not Found: "+ex.r.Method+" "+ex.r.URL.Path)
		return
	case ex.r.Method != method:
		ex.w.Header().Set("Allow", method)
		ex.fail(http.StatusMethodNotAllowed, "Method Not Allowed: use "+method)
		return
	case !ex.authorized(ep):
		ex.fail(http.StatusUnauthorized, "")
		return
	}
	if !ex.readBody(ep) {
		return
	}

	ex.fault = ex.p.pickFault(ex.req.Model)
	if ex.fault != nil {
		ex.s.rec.faulted(ex.rec, &ex.fault.Fault)
		if !ex.fault.Kind.midStream() {
			ex.strikeNow()
			return
		}
	}

	switch ep {
	case endpointMessages, endpointChat:
		ex.generate()
	case endpointCountTokens:
		ex.sendJSON(countTokensBody(ex.inputTokens), 0)
	case endpointModels:
		ex.sendJSON(modelsBody(ex.p.cfg.Model), 0)
	}
}

// authorized checks the configured key in the header of the dialect; the
// models list, shared by both, accepts either header.
func (ex *exchange) authorized(ep endpoint) bool {
	key := ex.p.cfg.Key
	if key == "" {
		return true
	}
	anthropicOK := ex.r.Header.Get("X-Api-Key") == key
	openaiOK := ex.r.Header.Get("Authorization") == "Bearer "+key
	switch {
	case ep == endpointModels:
		return anthropicOK || openaiOK
	case ex.wire.name() == "openai":
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
	ex.body = body
	ex.inputTokens = max(1, len(body)/4)
	if ep == endpointModels {
		return true
	}
	if err := json.Unmarshal(body, &ex.req); err != nil {
		ex.fail(http.StatusBadRequest, "The request body is not valid JSON: "+err.Error())
		return false
	}
	if ex.req.Model == "" && ep != endpointCountTokens {
		ex.fail(http.StatusBadRequest, "model: Field required")
		return false
	}
	ex.s.rec.update(ex.rec, func(rec *RequestRecord) { rec.Model, rec.Stream = ex.req.Model, ex.req.Stream })
	ex.model = ex.req.Model
	if ex.p.cfg.Model != "" {
		ex.model = ex.p.cfg.Model
	}
	return true
}

// generate answers a completion request, streaming or not.
func (ex *exchange) generate() {
	ex.id = ex.wire.idPrefix() + strconv.FormatUint(ex.s.ids.Add(1), 16)
	ex.s.rec.update(ex.rec, func(rec *RequestRecord) { rec.ID = ex.id })
	ex.created = now().Unix()
	first := ex.p.firstTokenDelay()
	if ex.req.Stream {
		ex.stream(first)
		return
	}
	if !ex.wait(first + time.Duration(len(ex.p.deltas))*ex.p.tokenDelay) {
		return
	}
	ex.sendJSON(ex.wire.completion(ex), len(ex.p.deltas))
}

// stream sends the event sequence of the dialect, with the mid-stream fault
// striking before the delta numbered fault.After.
func (ex *exchange) stream(first time.Duration) {
	f := ex.fault
	if f != nil && f.Kind == FaultCut {
		// The connection ends with the cut stream, as when a provider drops it.
		ex.w.Header().Set("Connection", "close")
	}
	ex.startSSE()
	if !ex.wire.streamStart(ex) {
		return
	}
	n := len(ex.p.deltas)
	for i := 0; i <= n; i++ {
		if f != nil && min(f.After, n) == i {
			if !ex.wait(time.Duration(f.Delay)) {
				return
			}
			switch f.Kind {
			case FaultCut:
				return
			case FaultStall:
				ex.stall()
				return
			case FaultMalformed:
				if !ex.emit(ex.wire.malformedEvent()) {
					return
				}
			}
		}
		if i == n {
			break
		}
		delay := ex.p.tokenDelay
		if i == 0 {
			delay = first
		}
		if !ex.wait(delay) || !ex.wire.streamDelta(ex, i) {
			return
		}
		ex.s.rec.deltas(ex.rec, 1, now())
	}
	ex.wire.streamEnd(ex)
}

// wait waits d, and reports false if the client went away meanwhile.
func (ex *exchange) wait(d time.Duration) bool {
	ctx := ex.r.Context()
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// stall sends nothing until the client goes away, or the module unloads:
// then the connection drops, for a stall never ends in a response.
func (ex *exchange) stall() {
	select {
	case <-ex.r.Context().Done():
	case <-ex.s.unloaded:
		panic(http.ErrAbortHandler)
	}
}

// writeHeader sends the status line and records it.
func (ex *exchange) writeHeader(status int, contentType string) {
	ex.w.Header().Set("Content-Type", contentType)
	ex.w.WriteHeader(status)
	ex.s.rec.status(ex.rec, status)
}

func (ex *exchange) startSSE() {
	h := ex.w.Header()
	h.Set("Cache-Control", "no-cache")
	ex.writeHeader(http.StatusOK, "text/event-stream")
}

// emit writes one or more complete events and flushes them, reporting false
// if they could not be sent.
func (ex *exchange) emit(events ...[]byte) bool {
	for _, e := range events {
		if _, err := ex.w.Write(e); err != nil {
			return false
		}
	}
	return ex.rc.Flush() == nil
}

// sendJSON sends a complete 200 JSON body carrying deltas content deltas,
// unless a mid-stream fault mangles it.
func (ex *exchange) sendJSON(body []byte, deltas int) {
	if f := ex.fault; f != nil && f.Kind.midStream() {
		if !ex.wait(time.Duration(f.Delay)) {
			return
		}
		switch f.Kind {
		case FaultStall:
			ex.stall()
			return
		case FaultCut:
			// Half the promised length, then a dropped connection.
			ex.w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			ex.writeHeader(http.StatusOK, "application/json")
			ex.w.Write(body[:len(body)/2])
			ex.rc.Flush()
			panic(http.ErrAbortHandler)
		case FaultMalformed:
			body = body[:len(body)/2]
		}
	}
	ex.writeHeader(http.StatusOK, "application/json")
	if _, err := ex.w.Write(body); err == nil && deltas > 0 {
		ex.s.rec.deltas(ex.rec, deltas, now())
	}
}

// fail answers with an error in the request's dialect.
func (ex *exchange) fail(status int, message string) {
	if message == "" {
		message = ex.wire.defaultMessage(status, ex.req.Model)
	}
	ex.writeHeader(status, "application/json")
	ex.w.Write(ex.wire.errorBody(status, message))
}

// quotedModel is the reported model as a JSON string.
func (ex *exchange) quotedModel() []byte {
	if ex.modelJSON == nil {
		ex.modelJSON = mustJSON(ex.model)
	}
	return ex.modelJSON
}
