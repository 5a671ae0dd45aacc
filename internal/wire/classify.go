package wire

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
)

// failClass names why an attempt failed. Provider-level classes fail over
// and count toward the provider's cooldown; the rest do not.
type FailClass string

const (
	ClassNone             FailClass = ""
	ClassConnect          FailClass = "connect"            // dial, DNS, TLS: nothing reached the provider
	ClassReset            FailClass = "reset"              // connection reset or closed before the response headers
	ClassFirstByteTimeout FailClass = "first_byte_timeout" // no valid first event within first_byte
	ClassResponseTimeout  FailClass = "response_timeout"   // non-stream response not complete within response
	ClassStatus5xx        FailClass = "status_5xx"         // 500, 502, 504 and other 5xx
	ClassOverloaded       FailClass = "overloaded"         // 503, 529
	ClassRateLimited      FailClass = "rate_limited"       // 429
	ClassAuth             FailClass = "auth"               // 401, 403: bad key on that provider
	ClassModelNotFound    FailClass = "model_not_found"    // 404 whose body says the model does not exist
	ClassClientKey        FailClass = "client_key"         // 401, 403, 404, 429 to the client's own (pass-through) key
	ClassFake200          FailClass = "fake200"            // an error inside a 200
	ClassRejected         FailClass = "rejected_phrase"    // a configured reject phrase before commit
	ClassMalformed        FailClass = "malformed"          // first event or body not what the dialect sends
	ClassClosedEarly      FailClass = "closed_early"       // stream ended before its first valid event
	ClassRequest          FailClass = "request_error"      // 400, 413, 422...: the request itself is wrong
	ClassClientAbort      FailClass = "client_abort"       // the client went away
	ClassTotalTimeout     FailClass = "total_timeout"      // timeouts.total ran out
	ClassLoser            FailClass = "hedge_loser"        // cancelled because another attempt won
	ClassObjectMissing    FailClass = "object_missing"     // a discovery's candidate does not hold the object (discover.go)
)

// providerLevel reports whether the failure is the provider's fault: it
// fails over and counts toward the provider's cooldown.
func (c FailClass) ProviderLevel() bool {
	switch c {
	case ClassNone, ClassRequest, ClassClientKey, ClassClientAbort, ClassTotalTimeout, ClassLoser, ClassObjectMissing:
		return false
	}
	return true
}

// transient reports whether the same provider is worth another try soon
// (retry.same_provider): overloads and resets pass; a refused connection,
// a bad key or a missing model do not.
func (c FailClass) Transient() bool {
	switch c {
	case ClassStatus5xx, ClassOverloaded, ClassReset, ClassRateLimited:
		return true
	}
	return false
}

// classifyStatus classifies a non-200 upstream status.
func ClassifyStatus(status int) FailClass {
	switch {
	case status == http.StatusTooManyRequests:
		return ClassRateLimited
	case status == http.StatusServiceUnavailable || status == 529:
		return ClassOverloaded
	case status >= 500:
		return ClassStatus5xx
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return ClassAuth
	case status == http.StatusNotFound:
		return ClassModelNotFound
	case status == http.StatusRequestTimeout:
		return ClassStatus5xx
	case status >= 400:
		return ClassRequest
	}
	return ClassMalformed // 1xx/3xx where a completion was expected
}

// passedThrough reports whether the failure is the client's own answer:
// relayed to it as the provider sent it, ending the request.
func (c FailClass) PassedThrough() bool {
	return c == ClassRequest || c == ClassClientKey || c == ClassObjectMissing
}

// classifyAnswer classifies a non-200 upstream answer by its status and
// body. With a pass-through key (the provider has no key of its own),
// 401/403/404/429 are about the client's credential, quota or model access:
// they are its answer, and count against no provider. A 404 is
// classModelNotFound here; the engine keeps it only when the body says the
// model does not exist in the words of any dialect (an OpenAI-compatible
// server may front either API), and makes any other 404 (a wrong path)
// the request's (classModelNotFound in dialects.go).
func ClassifyAnswer(status int, body []byte, passThroughKey bool) FailClass {
	c := ClassifyStatus(status)
	if passThroughKey && (c == ClassAuth || c == ClassModelNotFound || c == ClassRateLimited) {
		return ClassClientKey
	}
	return c
}

var (
	ErrFirstByteTimeout = errors.New("no valid first event before the first_byte timeout")
	ErrResponseTimeout  = errors.New("no complete response before the response timeout")
	ErrTotalTimeout     = errors.New("request exceeded timeouts.total")
	// ErrShutdown ends the requests still running when the process exits
	// after Caddy's grace_period: the client is told, not cut.
	ErrShutdown  = errors.New("the proxy is shutting down and its grace period has ended")
	ErrHedgeLost = errors.New("cancelled: another attempt won the race")
)

// classifyTransportError classifies an error from sending the request or
// reading the response before it was accepted. attemptCtx is the attempt's
// own context (its cause tells timeouts from losses), reqCtx the client's.
func ClassifyTransportError(err error, attemptCtx, clientCtx context.Context) FailClass {
	// An exit past the grace period ends the request as a client that left
	// does: not the provider's fault.
	if clientCtx.Err() != nil || errors.Is(context.Cause(attemptCtx), ErrShutdown) {
		return ClassClientAbort
	}
	switch cause := context.Cause(attemptCtx); {
	case errors.Is(cause, ErrHedgeLost):
		return ClassLoser
	case errors.Is(cause, ErrFirstByteTimeout):
		return ClassFirstByteTimeout
	case errors.Is(cause, ErrResponseTimeout):
		return ClassResponseTimeout
	case errors.Is(cause, ErrTotalTimeout):
		return ClassTotalTimeout
	}
	var dnsErr *net.DNSError
	var opErr *net.OpError
	switch {
	case errors.As(err, &dnsErr):
		return ClassConnect
	case errors.Is(err, syscall.ECONNREFUSED):
		return ClassConnect
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), HTTP2Reset(err):
		return ClassReset
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return ClassConnect
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return ClassConnect
	}
	return ClassConnect
}

// HTTP2Reset reports an HTTP/2 stream the provider ended before its
// answer: RST_STREAM, a GOAWAY, a protocol error on the connection, the
// connection lost under it. Over HTTP/1 the same event is a closed
// connection (ClassReset); it reached the provider, unlike a dial error.
// net/http's HTTP/2 errors are unexported types, so their messages,
// unchanged for years, tell them (TestHTTP2ErrorMessagesAreNetHTTPs holds
// them to the Go source).
func HTTP2Reset(err error) bool {
	s := err.Error()
	return strings.Contains(s, "stream error: stream ID ") ||
		strings.Contains(s, "http2: server sent GOAWAY") ||
		strings.Contains(s, "http2: Transport received Server's graceful shutdown GOAWAY") ||
		strings.Contains(s, "http2: Transport received GOAWAY from server ErrCode:") ||
		strings.Contains(s, "http2: client connection lost") ||
		strings.Contains(s, "connection error: ") && strings.Contains(s, "_ERROR")
}

// Unprocessed reports a request the provider provably did not process,
// which net/http would have sent again had it been allowed (noReplay):
//   - the two refusals RFC 9113 (8.7) guarantees: RST_STREAM
//     REFUSED_STREAM, and a graceful GOAWAY that excluded the stream;
//   - a request net/http had no connection to send on after its HTTP/2
//     connection became unusable ("cannot rewind body": it retries only
//     requests that never went out, as noReplay leaves it).
//
// Not a PROTOCOL_ERROR reset, which net/http also resends but which
// proves nothing.
func Unprocessed(err error) bool {
	s := err.Error()
	if strings.Contains(s, "net/http: cannot rewind body after connection loss") {
		return true
	}
	return strings.Contains(s, "http2: Transport: cannot retry err [") &&
		(strings.Contains(s, "; REFUSED_STREAM") || strings.Contains(s, "[http2: Transport received Server's graceful shutdown GOAWAY]"))
}
