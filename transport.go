package llmhedge

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// newTransport builds the HTTP client side of one provider. Compression is
// off: the proxy must read the stream's events, and gzip on loopback or in a
// datacenter costs more CPU than it saves.
func newTransport(connect time.Duration, caFile string) (*http.Transport, error) {
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
		// it only for the request line and headers: 2 KiB holds those of
		// a provider request, and a larger body is written past it.
		WriteBufferSize: 2 << 10,
		// HTTP/2 (every TLS provider): one connection carries all the
		// provider's requests, so a connection the network dropped
		// silently would take each new request until TCP gives up,
		// minutes later. A PING after h2PingAfter without a frame, not
		// answered within the connect timeout, closes it; the requests
		// on it fail as a reset and the next ones dial anew.
		HTTP2: &http.HTTP2Config{SendPingTimeout: h2PingAfter, PingTimeout: connect},
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
	return t, nil
}

// h2PingAfter is how long an HTTP/2 connection to a provider may stay
// without a frame before it is checked with a PING.
var h2PingAfter = 15 * time.Second

// noReplay makes an upstream request one that net/http sends twice only
// when the provider provably did not process it. Its transport replays a
// request it calls idempotent (GET, or any request with an
// Idempotency-Key header) on a new connection when a pooled one breaks,
// which may be after the provider read it; that needs GetBody (or no body
// at all), so such a request gets none. Resends are the module's decision,
// within its budgets, with one exception: any other request keeps GetBody
// for a single use, with which net/http resends only a request of which
// nothing was written (HTTP/1, a pooled connection found closed) or an
// HTTP/2 stream the provider refused unprocessed (REFUSED_STREAM, or a
// graceful GOAWAY that excluded it, which providers send as they rotate
// connections). Neither reached the model, so neither is billed; without
// it such a request failed over, or failed with one provider. One resend,
// at once: not net/http's six with backoff. A request without a body gets
// an empty one that cannot be rewound; for GET and the like, net/http
// finds it empty and sends no body, as before.
func noReplay(up *http.Request) {
	get := up.GetBody
	up.GetBody = nil
	if up.Body == nil || up.Body == http.NoBody {
		if replayable(up) {
			up.Body, up.ContentLength = emptyBody{}, 0
		} else {
			up.Body = nil
		}
		return
	}
	if get != nil && !replayable(up) {
		var used atomic.Bool
		up.GetBody = func() (io.ReadCloser, error) {
			if used.Swap(true) {
				return nil, wire.ErrRefusedAgain
			}
			return get()
		}
	}
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
