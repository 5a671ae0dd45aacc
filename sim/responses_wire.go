package sim

// The Responses wire of the simulator: its answers, streams, errors and fake 200s.

import (
	"net/http"
	"strconv"
)

func (w responsesWire) completion(ex *exchange) []byte {
	ex.beginResponse("in_progress")
	completedAt := now().Unix()
	status, _ := responsesTextEnd(ex)
	ex.s.store.finish(ex.stored, status, completedAt, nil)
	return mustJSON(ex.stored.object(status, completedAt, nil))
}

// streamStart sends response.created, response.in_progress, and the added
// message item and output_text part.
func (w responsesWire) streamStart(ex *exchange) bool {
	ex.beginResponse("in_progress")
	sr := ex.stored
	o := sr.object("in_progress", 0, nil)
	return ex.emitResponse("response.created", o) &&
		ex.emitResponse("response.in_progress", o) &&
		ex.emit(sseEvent("response.output_item.added", mustJSON(responsesItemEvent{
			"response.output_item.added", 0, sr.message("in_progress", ""), ex.nextSeq(),
		}))) &&
		ex.emit(sseEvent("response.content_part.added", mustJSON(responsesPartEvent{
			"response.content_part.added", sr.msgID, 0, 0, textPart(""), ex.nextSeq(),
		})))
}

// streamDelta writes one response.output_text.delta, reusing the exchange's
// buffer so a delta allocates nothing.
func (w responsesWire) streamDelta(ex *exchange, i int) bool {
	b := append(ex.buf[:0], "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\""...)
	b = append(b, ex.stored.msgID...)
	b = append(b, `","output_index":0,"content_index":0,"delta":`...)
	b = append(b, ex.p.responsesDeltas[i]...)
	b = append(b, `,"logprobs":[],"sequence_number":`...)
	b = strconv.AppendInt(b, int64(ex.nextSeq()), 10)
	b = append(b, "}\n\n"...)
	ex.buf = b
	return ex.emit(b)
}

// streamEnd sends the done events of the text, part and item, then
// response.completed with the output and usage.
func (w responsesWire) streamEnd(ex *exchange) bool {
	sr := ex.stored
	text := ex.p.text
	status, event := responsesTextEnd(ex)
	if !ex.emit(sseEvent("response.output_text.done", mustJSON(responsesTextDoneEvent{
		"response.output_text.done", sr.msgID, 0, 0, text, []struct{}{}, ex.nextSeq(),
	}))) || !ex.emit(sseEvent("response.content_part.done", mustJSON(responsesPartEvent{
		"response.content_part.done", sr.msgID, 0, 0, textPart(text), ex.nextSeq(),
	}))) || !ex.emit(sseEvent("response.output_item.done", mustJSON(responsesItemEvent{
		"response.output_item.done", 0, sr.message(status, text), ex.nextSeq(),
	}))) {
		return false
	}
	completedAt := now().Unix()
	ex.s.store.finish(sr, status, completedAt, nil)
	return ex.emitResponse(event, sr.object(status, completedAt, nil))
}

// streamError is the error event: a request-level error in a 200 stream.
func (w responsesWire) streamError(status int, message string) []byte {
	return sseEvent("error", mustJSON(responsesErrorEvent{
		Type: "error", Code: responsesErrorCode(status), Message: message,
	}))
}

func (responsesWire) malformedEvent() []byte { return responsesMalformed }

// responsesErrorCode is the code of an error event or failed response.
func responsesErrorCode(status int) string {
	if status >= 500 {
		return "server_error"
	}
	typ, code := openaiErrorKind(status)
	if code == "" {
		return typ
	}
	return code
}

// fake200Wire is a dialect whose fake-200 is more than an error body or a
// single error event.
type fake200Wire interface {
	fake200(ex *exchange, status int, message string)
}

// fake200 answers 200 with an error. A status below 500 is a request-level
// error: the `error` event as the only event of a stream, the error body
// otherwise. From 500 on, the response is created and fails before any
// content: response.created, response.in_progress and response.failed, or a
// response object with status "failed" when not streaming. Endpoints other
// than POST /v1/responses get the error body.
func (w responsesWire) fake200(ex *exchange, status int, message string) {
	if ex.ep != endpointResponses || status < 500 {
		if ex.req.Stream && ex.ep == endpointResponses {
			ex.startSSE()
			ex.emit(sseEvent("error", mustJSON(responsesErrorEvent{
				Type: "error", Code: responsesErrorCode(status), Message: message, SequenceNumber: ex.nextSeq(),
			})))
			return
		}
		ex.writeHeader(http.StatusOK, "application/json")
		ex.w.Write(w.errorBody(status, message))
		return
	}
	ex.beginResponse("in_progress")
	e := &responsesError{Code: responsesErrorCode(status), Message: message}
	ex.s.store.finish(ex.stored, "failed", 0, e)
	failed := ex.stored.object("failed", 0, e)
	if !ex.req.Stream {
		ex.writeHeader(http.StatusOK, "application/json")
		ex.w.Write(mustJSON(failed))
		return
	}
	ex.startSSE()
	o := ex.stored.object("in_progress", 0, nil)
	_ = ex.emitResponse("response.created", o) && ex.emitResponse("response.in_progress", o) &&
		ex.emitResponse("response.failed", failed)
}
