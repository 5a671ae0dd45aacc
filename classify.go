package llmhedge

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"syscall"
)

// failClass names why an attempt failed. Provider-level classes fail over
// and count toward the provider's cooldown; the rest do not.
type failClass string

const (
	classNone             failClass = ""
	classConnect          failClass = "connect"            // dial, DNS, TLS: nothing reached the provider
	classReset            failClass = "reset"              // connection reset or closed before the response headers
	classFirstByteTimeout failClass = "first_byte_timeout" // no valid first event within first_byte
	classResponseTimeout  failClass = "response_timeout"   // non-stream response not complete within response
	classStatus5xx        failClass = "status_5xx"         // 500, 502, 504 and other 5xx
	classOverloaded       failClass = "overloaded"         // 503, 529
	classRateLimited      failClass = "rate_limited"       // 429
	classAuth             failClass = "auth"               // 401, 403: bad key on that provider
	classModelNotFound    failClass = "model_not_found"    // 404 whose body says the model does not exist
	classClientKey        failClass = "client_key"         // 401, 403, 404, 429 to the client's own (pass-through) key
	classFake200          failClass = "fake200"            // an error inside a 200
	classRejected         failClass = "rejected_phrase"    // a configured reject phrase before commit
	classMalformed        failClass = "malformed"          // first event or body not what the dialect sends
	classClosedEarly      failClass = "closed_early"       // stream ended before its first valid event
	classRequest          failClass = "request_error"      // 400, 413, 422...: the request itself is wrong
	classClientAbort      failClass = "client_abort"       // the client went away
	classTotalTimeout     failClass = "total_timeout"      // timeouts.total ran out
	classLoser            failClass = "hedge_loser"        // cancelled because another attempt won
	classObjectMissing    failClass = "object_missing"     // a discovery's candidate does not hold the object (discover.go)
)

// providerLevel reports whether the failure is the provider's fault: it
// fails over and counts toward the provider's cooldown.
func (c failClass) providerLevel() bool {
	switch c {
	case classNone, classRequest, classClientKey, classClientAbort, classTotalTimeout, classLoser, classObjectMissing:
		return false
	}
	return true
}

// transient reports whether the same provider is worth another try soon
// (retry.same_provider): overloads and resets pass; a refused connection,
// a bad key or a missing model do not.
func (c failClass) transient() bool {
	switch c {
	case classStatus5xx, classOverloaded, classReset, classRateLimited:
		return true
	}
	return false
}

// classifyStatus classifies a non-200 upstream status.
func classifyStatus(status int) failClass {
	switch {
	case status == http.StatusTooManyRequests:
		return classRateLimited
	case status == http.StatusServiceUnavailable || status == 529:
		return classOverloaded
	case status >= 500:
		return classStatus5xx
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return classAuth
	case status == http.StatusNotFound:
		return classModelNotFound
	case status == http.StatusRequestTimeout:
		return classStatus5xx
	case status >= 400:
		return classRequest
	}
	return classMalformed // 1xx/3xx where a completion was expected
}

// passedThrough reports whether the failure is the client's own answer:
// relayed to it as the provider sent it, ending the request.
func (c failClass) passedThrough() bool {
	return c == classRequest || c == classClientKey || c == classObjectMissing
}

// classifyAnswer classifies a non-200 upstream answer by its status and
// body. With a pass-through key (the provider has no key of its own),
// 401/403/404/429 are about the client's credential, quota or model access:
// they are its answer, and count against no provider. A 404 is
// classModelNotFound here; the engine keeps it only when the body says the
// model does not exist in the words of any dialect (an OpenAI-compatible
// server may front either API), and makes any other 404 (a wrong path)
// the request's (classModelNotFound in dialects.go).
func classifyAnswer(status int, body []byte, passThroughKey bool) failClass {
	c := classifyStatus(status)
	if passThroughKey && (c == classAuth || c == classModelNotFound || c == classRateLimited) {
		return classClientKey
	}
	return c
}

var (
	errFirstByteTimeout = errors.New("no valid first event before the first_byte timeout")
	errResponseTimeout  = errors.New("no complete response before the response timeout")
	errTotalTimeout     = errors.New("request exceeded timeouts.total")
	errHedgeLost        = errors.New("cancelled: another attempt won the race")
)

// classifyTransportError classifies an error from sending the request or
// reading the response before it was accepted. attemptCtx is the attempt's
// own context (its cause tells timeouts from losses), reqCtx the client's.
func classifyTransportError(err error, attemptCtx, clientCtx context.Context) failClass {
	if clientCtx.Err() != nil {
		return classClientAbort
	}
	switch cause := context.Cause(attemptCtx); {
	case errors.Is(cause, errHedgeLost):
		return classLoser
	case errors.Is(cause, errFirstByteTimeout):
		return classFirstByteTimeout
	case errors.Is(cause, errResponseTimeout):
		return classResponseTimeout
	case errors.Is(cause, errTotalTimeout):
		return classTotalTimeout
	}
	var dnsErr *net.DNSError
	var opErr *net.OpError
	switch {
	case errors.As(err, &dnsErr):
		return classConnect
	case errors.Is(err, syscall.ECONNREFUSED):
		return classConnect
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return classReset
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return classConnect
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return classConnect
	}
	return classConnect
}
