package sim

import (
	"cmp"
	"net"
	"net/http"
	"path"
	"sync/atomic"
	"time"
)

// faultRule is a configured fault with the count of requests it struck.
type faultRule struct {
	Fault
	struck atomic.Int64
}

func compileFaults(faults []Fault) []*faultRule {
	rules := make([]*faultRule, len(faults))
	for i, f := range faults {
		rules[i] = &faultRule{Fault: f}
	}
	return rules
}

// pickFault returns the first fault that applies to a request for model
// with header h in a turn of a scripted tool loop (or ""), or nil. A fault with a count is spent once it struck that
// many requests.
func (p *plan) pickFault(model string, h http.Header, turn string) *faultRule {
	for _, f := range p.faults {
		if f.Turn != "" && f.Turn != turn {
			continue
		}
		if f.Model != "" {
			if ok, _ := path.Match(f.Model, model); !ok {
				continue
			}
		}
		if f.Header != "" && len(h.Values(f.Header)) == 0 {
			continue
		}
		percent := f.Percent
		if percent == 0 {
			percent = 100
		}
		if !p.rng.chance(percent) {
			continue
		}
		if f.Count > 0 && f.struck.Add(1) > int64(f.Count) {
			continue
		}
		return f
	}
	return nil
}

// strikeNow applies a fault that replaces the whole response: status,
// fake200 and reset. Its headers go out with it.
func (ex *exchange) strikeNow() {
	f := ex.fault
	if !ex.wait(time.Duration(f.Delay)) {
		return
	}
	if f.Kind == FaultReset {
		ex.reset()
		return
	}
	h := ex.w.Header()
	if f.RetryAfter != "" {
		h.Set("Retry-After", f.RetryAfter)
	}
	if f.NoRetry {
		h.Set("X-Should-Retry", "false")
	}
	switch f.Kind {
	case FaultStatus:
		ex.fail(cmp.Or(f.Status, http.StatusInternalServerError), f.Message)
	case FaultContextLength:
		ex.promptTooLong()
	case FaultFake200:
		status := cmp.Or(f.Status, statusOverloaded)
		message := ex.wire.defaultMessage(status, ex.req.Model)
		if fw, ok := ex.wire.(fake200Wire); ok {
			fw.fake200(ex, status, message)
			return
		}
		if ex.req.Stream {
			ex.startSSE()
			ex.emit(ex.wire.streamError(status, message))
			return
		}
		ex.writeHeader(http.StatusOK, "application/json")
		ex.w.Write(ex.wire.errorBody(status, message))
	}
}

// promptTooLong answers the 400 a provider sends for a prompt over the
// model's context window.
func (ex *exchange) promptTooLong() {
	switch ex.wire.name() {
	case "openai", "responses":
		ex.failWith(http.StatusBadRequest, errorWith("This model's maximum context length is 128000 tokens. "+
			"However, your messages resulted in 210000 tokens. Please reduce the length of the messages.",
			"invalid_request_error", "messages", "context_length_exceeded"))
	case "gemini":
		ex.fail(http.StatusBadRequest, "The input token count (2100000) exceeds the maximum number of tokens allowed (1048576).")
	default:
		ex.fail(http.StatusBadRequest, "prompt is too long: 210000 tokens > 200000 maximum")
	}
}

// reset drops the connection without a response, as a crashed provider
// does. HTTP/2 cannot hijack: the stream is reset instead.
func (ex *exchange) reset() {
	conn, _, err := ex.rc.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tcp, ok := conn.(*net.TCPConn); ok {
		// A reset, not an orderly close: nothing about it looks like an answer.
		tcp.SetLinger(0)
	}
	conn.Close()
}
