package sim

import (
	"encoding/json"
	"net/http"
	"strings"
)

// responsesWire is the OpenAI Responses API. Its errors are OpenAI's.
type responsesWire struct{ openaiWire }

// statusPreviousNotFound answers a previous_response_id this simulator does
// not know.
const statusPreviousNotFound = http.StatusNotFound

type responsesUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

type responsesError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// responsesPart is an output_text content part.
type responsesPart struct {
	Type        string     `json:"type"`
	Annotations []struct{} `json:"annotations"`
	Logprobs    []struct{} `json:"logprobs"`
	Text        string     `json:"text"`
}

// responsesItem is an assistant message output item.
type responsesItem struct {
	ID      string          `json:"id"`
	Type    string          `json:"type"`
	Status  string          `json:"status"`
	Content []responsesPart `json:"content"`
	Role    string          `json:"role"`
}

type responsesReasoning struct {
	Effort  *string `json:"effort"`
	Summary *string `json:"summary"`
}

type responsesTextConfig struct {
	Format struct {
		Type string `json:"type"`
	} `json:"format"`
}

// responsesObject is the response object, as created, streamed and
// retrieved.
type responsesObject struct {
	ID                 string               `json:"id"`
	Object             string               `json:"object"`
	CreatedAt          int64                `json:"created_at"`
	Status             string               `json:"status"`
	Background         bool                 `json:"background"`
	CompletedAt        *int64               `json:"completed_at"`
	Error              *responsesError      `json:"error"`
	IncompleteDetails  *responsesIncomplete `json:"incomplete_details"`
	Instructions       json.RawMessage      `json:"instructions"`
	MaxOutputTokens    *int                 `json:"max_output_tokens"`
	Model              string               `json:"model"`
	Output             []any                `json:"output"` // message or function_call items
	ParallelToolCalls  bool                 `json:"parallel_tool_calls"`
	PreviousResponseID *string              `json:"previous_response_id"`
	Reasoning          responsesReasoning   `json:"reasoning"`
	Store              bool                 `json:"store"`
	Temperature        float64              `json:"temperature"`
	Text               responsesTextConfig  `json:"text"`
	ToolChoice         string               `json:"tool_choice"`
	Tools              []struct{}           `json:"tools"`
	TopP               float64              `json:"top_p"`
	Truncation         string               `json:"truncation"`
	Usage              *responsesUsage      `json:"usage"`
	User               *string              `json:"user"`
	Metadata           json.RawMessage      `json:"metadata"`
}

// responsesIncomplete is why a response is incomplete.
type responsesIncomplete struct {
	Reason string `json:"reason"`
}

// responsesTextEnd is the status a text answer ends with, and its event.
func responsesTextEnd(ex *exchange) (status, event string) {
	if ex.lengthStop() {
		return "incomplete", "response.incomplete"
	}
	return "completed", "response.completed"
}

// The stream events other than the text deltas, which are written by hand.
type (
	responsesResponseEvent struct {
		Type           string          `json:"type"`
		Response       responsesObject `json:"response"`
		SequenceNumber int             `json:"sequence_number"`
	}
	responsesItemEvent struct {
		Type           string `json:"type"`
		OutputIndex    int    `json:"output_index"`
		Item           any    `json:"item"`
		SequenceNumber int    `json:"sequence_number"`
	}
	responsesPartEvent struct {
		Type           string        `json:"type"`
		ItemID         string        `json:"item_id"`
		OutputIndex    int           `json:"output_index"`
		ContentIndex   int           `json:"content_index"`
		Part           responsesPart `json:"part"`
		SequenceNumber int           `json:"sequence_number"`
	}
	responsesTextDoneEvent struct {
		Type           string     `json:"type"`
		ItemID         string     `json:"item_id"`
		OutputIndex    int        `json:"output_index"`
		ContentIndex   int        `json:"content_index"`
		Text           string     `json:"text"`
		Logprobs       []struct{} `json:"logprobs"`
		SequenceNumber int        `json:"sequence_number"`
	}
	responsesErrorEvent struct {
		Type           string  `json:"type"`
		Code           string  `json:"code"`
		Message        string  `json:"message"`
		Param          *string `json:"param"`
		SequenceNumber int     `json:"sequence_number"`
	}
)

var responsesMalformed = sseEvent("response.output_text.delta",
	[]byte(`{"type":"response.output_text.delta","item_id":"msg_sim","output_index":0,"cont`))

func (responsesWire) name() string     { return "responses" }
func (responsesWire) idPrefix() string { return "resp_sim_" }

// routeResponses routes the Responses API paths; p has no trailing slash.
func routeResponses(r *http.Request, p string) (ep endpoint, method string, ok bool) {
	if strings.HasSuffix(p, "/responses") {
		return endpointResponses, http.MethodPost, true
	}
	id, action, found := responsesPath(p)
	if !found {
		return endpointUnknown, "", false
	}
	switch {
	case action == "" && id == "compact":
		return endpointCompact, http.MethodPost, true
	case action == "" && id == "input_tokens":
		return endpointInputTokens, http.MethodPost, true
	case action == "" && r.Method == http.MethodDelete:
		return endpointDeleteResponse, http.MethodDelete, true
	case action == "":
		return endpointGetResponse, http.MethodGet, true
	case action == "cancel":
		return endpointCancelResponse, http.MethodPost, true
	case action == "input_items":
		return endpointResponseInputItems, http.MethodGet, true
	}
	return endpointUnknown, "", false
}

// responsesPath splits ".../responses/{id}[/{action}]".
func responsesPath(p string) (id, action string, ok bool) {
	i := strings.LastIndex(p, "/responses/")
	if i < 0 {
		return "", "", false
	}
	id, action, _ = strings.Cut(p[i+len("/responses/"):], "/")
	if id == "" || strings.Contains(action, "/") {
		return "", "", false
	}
	return id, action, true
}

// errorWith is an OpenAI error body with an explicit param and code.
func errorWith(message, typ, param, code string) []byte {
	type detail struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	}
	d := detail{Message: message, Type: typ}
	if param != "" {
		d.Param = &param
	}
	if code != "" {
		d.Code = &code
	}
	return mustJSON(struct {
		Error detail `json:"error"`
	}{d})
}

// failWith answers status with an OpenAI error body.
func (ex *exchange) failWith(status int, body []byte) {
	ex.writeHeader(status, "application/json")
	ex.w.Write(body)
}

// resolveResponse checks the response ids a Responses API request names:
// an unknown previous_response_id or path id is 404. For the endpoints of a
// stored response, the model of that response is the request's, so faults
// with a model glob apply to it.
func (ex *exchange) resolveResponse(ep endpoint) bool {
	switch ep {
	case endpointResponses, endpointCompact, endpointInputTokens:
		prev := ex.req.PreviousResponseID
		if prev == "" || ex.s.store.get(prev) != nil {
			return true
		}
		ex.s.rec.previousNotFound()
		ex.failWith(statusPreviousNotFound, errorWith("Previous response with id '"+prev+"' not found.",
			"invalid_request_error", "previous_response_id", "previous_response_not_found"))
		return false
	}
	if !ep.storedEndpoint() {
		return true
	}
	ex.pathID, _, _ = responsesPath(strings.TrimSuffix(ex.r.URL.Path, "/"))
	ex.stored = ex.s.store.get(ex.pathID)
	if ex.stored == nil {
		ex.failWith(http.StatusNotFound, errorWith("Response with id '"+ex.pathID+"' not found.",
			"invalid_request_error", "", ""))
		return false
	}
	ex.req.Model = ex.stored.model
	return true
}

// beginResponse builds the response this request creates and stores it
// (unless the request says store: false) with status.
func (ex *exchange) beginResponse(status string) {
	ex.newID()
	sr := &storedResponse{
		id:           ex.id,
		msgID:        "msg_sim_" + strings.TrimPrefix(ex.id, "resp_sim_"),
		model:        ex.model,
		created:      ex.created,
		prevID:       ex.req.PreviousResponseID,
		instructions: ex.req.Instructions,
		metadata:     ex.req.Metadata,
		store:        ex.req.Store == nil || *ex.req.Store,
		text:         ex.p.text,
		call:         ex.call,
		usage:        responsesUsageOf(ex),
		status:       status,
	}
	ex.stored = sr
	if sr.store {
		sr.input = inputItems(ex.req.Input, sr.msgID)
		ex.s.store.put(sr)
	}
}

// responsesUsageOf counts the cached tokens in the input, as OpenAI does.
func responsesUsageOf(ex *exchange) responsesUsage {
	var u responsesUsage
	u.InputTokens = ex.inputTokens + ex.p.cfg.CacheRead
	u.InputTokensDetails.CachedTokens = ex.p.cfg.CacheRead
	u.OutputTokens = len(ex.p.deltas)
	u.TotalTokens = u.InputTokens + u.OutputTokens
	return u
}

// message is the output item with its text so far, and its status.
func (sr *storedResponse) message(status, text string) responsesItem {
	item := responsesItem{ID: sr.msgID, Type: "message", Status: status, Content: []responsesPart{}, Role: "assistant"}
	if status == "completed" || status == "incomplete" {
		item.Content = append(item.Content, textPart(text))
	}
	return item
}

func textPart(text string) responsesPart {
	return responsesPart{Type: "output_text", Annotations: []struct{}{}, Logprobs: []struct{}{}, Text: text}
}

// object renders the response with a status; a completed one carries its
// output and usage.
func (sr *storedResponse) object(status string, completedAt int64, e *responsesError) responsesObject {
	o := responsesObject{
		ID:                sr.id,
		Object:            "response",
		CreatedAt:         sr.created,
		Status:            status,
		Error:             e,
		Instructions:      sr.instructions,
		Model:             sr.model,
		Output:            []any{},
		ParallelToolCalls: true,
		Store:             sr.store,
		Temperature:       1,
		ToolChoice:        "auto",
		Tools:             []struct{}{},
		TopP:              1,
		Truncation:        "disabled",
		Metadata:          sr.metadata,
	}
	o.Text.Format.Type = "text"
	if sr.prevID != "" {
		o.PreviousResponseID = &sr.prevID
	}
	if len(o.Metadata) == 0 {
		o.Metadata = json.RawMessage(`{}`)
	}
	switch status {
	case "completed":
		o.CompletedAt = &completedAt
		o.Output = append(o.Output, sr.outputItem())
		o.Usage = &sr.usage
	case "incomplete":
		o.IncompleteDetails = &responsesIncomplete{Reason: "max_output_tokens"}
		o.Output = append(o.Output, sr.message("incomplete", sr.text))
		o.Usage = &sr.usage
	}
	return o
}

func (ex *exchange) nextSeq() int {
	n := ex.seq
	ex.seq++
	return n
}

func (ex *exchange) emitResponse(typ string, o responsesObject) bool {
	return ex.emit(sseEvent(typ, mustJSON(responsesResponseEvent{typ, o, ex.nextSeq()})))
}
