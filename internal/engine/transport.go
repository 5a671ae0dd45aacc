package engine

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/upconn"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// newTransport builds the HTTP client side of one provider. Compression is
// off: the proxy must read the stream's events, and gzip on loopback or in a
// datacenter costs more CPU than it saves. plain is a provider spoken to
// in cleartext HTTP/1.1 (an http:// base URL).
func newTransport(connect time.Duration, caFile string, plain bool) (*http.Transport, error) {
	dialer := &net.Dialer{Timeout: connect, KeepAlive: 30 * time.Second}
	t := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialer.DialContext,
		TLSHandshakeTimeout:   connect,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
		// An HTTP/1.1 connection keeps its write buffer for its whole life
		// (a streaming answer holds the connection for minutes) but uses
		// it only for the request line and headers: 512 B holds those of
		// a plain SDK request, an agent's many headers (1-1.5 KiB) take
		// one or two more writes per request (not per event), and a
		// larger body is written past it. A signing cloud adds its
		// signature's size (cloud.AuthSizer, in newProvider). The read buffer is net/http's
		// 4 KiB, except in cleartext (below). HTTP/2 (every TLS
		// provider) uses neither.
		WriteBufferSize: 512,
		// HTTP/2 (every TLS provider): one connection carries all the
		// provider's requests, so a connection the network dropped
		// silently would take each new request until TCP gives up,
		// minutes later. A PING after h2PingAfter without a frame, not
		// answered within the connect timeout (at least 5 s: a lost PING
		// ends every stream on the connection, billed generations among
		// them), closes it; the requests on it fail as a reset and the
		// next ones dial anew.
		HTTP2: &http.HTTP2Config{SendPingTimeout: h2PingAfter, PingTimeout: max(connect, h2PingTimeoutMin)},
	}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("tls_trusted_ca: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls_trusted_ca %s: no PEM certificate found", caFile)
		}
		t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	if plain && upconn.Wraps {
		// Cleartext HTTP/1.1: each connection reads a burst in one system
		// call into a buffer taken from a pool only while the socket has
		// bytes (internal/upconn), and the transport's own buffer only
		// holds a line at a time. An idle stream keeps 512 B to read with,
		// not 4 KiB; a smaller transport buffer alone split every burst
		// into more system calls (docs/performance-history.md, rounds eight and
		// ten).
		t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return upconn.Wrap(c), nil
		}
		t.ReadBufferSize = upconn.TransportBuffer
	}
	return t, nil
}

// h2PingAfter is how long an HTTP/2 connection to a provider may stay
// without a frame before it is checked with a PING; h2PingTimeoutMin is
// the least time its answer is given.
var (
	h2PingAfter      = 15 * time.Second
	h2PingTimeoutMin = 5 * time.Second
)

// noReplay makes an upstream request one that net/http never sends twice
// by itself: its transport replays an idempotent request (GET, or any
// request with an Idempotency-Key header) on a new connection when a
// pooled one breaks, once per pooled connection, and over HTTP/2 any
// request whose stream was reset with a code it deems retryable (among
// them PROTOCOL_ERROR, which does not prove the provider skipped it); all
// that needs GetBody (or no body at all). Resends are the module's
// decision alone (roundTrip). A request without a body gets an empty one
// that cannot be rewound; for GET and the like, net/http finds it empty
// and sends no body, as before. It returns what roundTrip needs to send
// the request again: a fresh copy of its body.
func noReplay(up *http.Request) (rebody func() (io.ReadCloser, error)) {
	rebody = up.GetBody
	up.GetBody = nil
	if up.Body == nil || up.Body == http.NoBody {
		if replayable(up) {
			up.Body, up.ContentLength = emptyBody{}, 0
			return func() (io.ReadCloser, error) { return emptyBody{}, nil }
		}
		up.Body = nil
		return func() (io.ReadCloser, error) { return nil, nil }
	}
	return rebody
}

// roundTrip sends up (prepared by noReplay) and, when the provider
// refused its HTTP/2 stream unprocessed (REFUSED_STREAM, or a graceful
// GOAWAY that excluded it: RFC 9113 8.7, the two cases where the provider
// guarantees it did nothing with the stream), sends it once more, at once,
// on a new stream (after a GOAWAY, a new connection). Nothing of the
// refused stream reached the model, so nothing is billed twice; a provider
// rotating its connections or shedding load no longer fails the attempt.
// A second refusal is the attempt's failure, class reset.
func roundTrip(t http.RoundTripper, up *http.Request, rebody func() (io.ReadCloser, error)) (*http.Response, error) {
	resp, err := t.RoundTrip(up)
	if err == nil || rebody == nil || !wire.Unprocessed(err) || up.Context().Err() != nil {
		return resp, err
	}
	body, berr := rebody()
	if berr != nil {
		return nil, err
	}
	again := up.Clone(up.Context())
	again.Body = body
	return t.RoundTrip(again)
}

// replayable is net/http's test of a request it may resend unasked when
// its body can be rewound.
func replayable(r *http.Request) bool {
	switch r.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return r.Header["Idempotency-Key"] != nil || r.Header["X-Idempotency-Key"] != nil
}

// emptyBody is a request body of no bytes that net/http cannot rewind.
type emptyBody struct{}

func (emptyBody) Read([]byte) (int, error) { return 0, io.EOF }
func (emptyBody) Close() error             { return nil }

// clock is the time source of the engine and the admin API; tests swap it.
var clock = time.Now

// Now is the engine's clock (time.Now, but for the tests that move it):
// the Caddy layer's views of provider health read time through it.
func Now() time.Time { return clock() }
