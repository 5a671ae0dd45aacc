package sim

import (
	"net/http"
	"strconv"
	"time"
)

// generate answers a completion request, streaming or not.
func (ex *exchange) generate() {
	ex.newID()
	first := ex.p.firstTokenDelay()
	if ex.req.Stream {
		ex.stream(first)
		return
	}
	if !ex.wait(first + time.Duration(len(ex.p.deltas))*ex.p.tokenDelay) {
		return
	}
	ex.sendJSON(answerWireOf(ex).completion(ex), len(ex.p.deltas))
}

// newID issues the id of the response and records it.
func (ex *exchange) newID() {
	if ex.id != "" {
		return
	}
	ex.id = ex.wire.idPrefix() + strconv.FormatUint(ex.s.ids.Add(1), 16)
	ex.s.rec.update(ex.rec, func(rec *RequestRecord) { rec.ID = ex.id })
	ex.created = now().Unix()
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
	answer := answerWireOf(ex)
	if !answer.streamStart(ex) {
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
		if !ex.wait(delay) || !answer.streamDelta(ex, i) {
			return
		}
		ex.s.rec.deltas(ex.rec, 1, now())
	}
	answer.streamEnd(ex)
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
	if gw, ok := ex.wire.(*geminiWire); ok {
		ex.writeHeader(http.StatusOK, gw.contentType()) // a JSON array without ?alt=sse
		return
	}
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
