// Package load is the client side of the llm_hedge benchmark and soak:
// completion requests in both dialects, an HTTP client tuned for loopback
// load, and the check that a response is either complete or a clean error
// in the client's dialect. The bench program and the soak test share it.
package load

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"
)

// NewTransport is an HTTP/1.1 client transport for conns concurrent
// loopback connections: every connection stays pooled between requests,
// so the load measures the server, not connection setup.
func NewTransport(conns int) *http.Transport {
	return &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns * 2,
		MaxIdleConnsPerHost: conns * 2,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
		WriteBufferSize:     16 << 10,
		ReadBufferSize:      16 << 10,
	}
}

// Verdict is what a response turned out to be.
type Verdict int

const (
	Complete   Verdict = iota // the whole answer: a terminal event, or a complete JSON body
	CleanError                // an error in the client's dialect: a JSON error body, or an error event ending the stream
	Dirty                     // anything else: truncated, malformed, silent end, transport error
	Aborted                   // the client left on purpose (Request.AbortAfter): not judged
)

func (v Verdict) String() string {
	return [...]string{"complete", "clean_error", "dirty", "aborted"}[v]
}

// Result is one request's outcome.
type Result struct {
	Verdict Verdict
	Status  int
	Reason  string // why it is a clean error or dirty
	Latency time.Duration
	Bytes   int
	// Resent: a try's connection closed before any byte of a response
	// (unanswered), and it was sent again as the SDKs do (sdkRetryWaits).
	Resent bool
}

// Request is one request to send: its kind, model and body, the text a
// complete answer carries ("" skips that check), and, when AbortAfter > 0,
// a client that leaves once it has read that many bytes of a 200 stream.
type Request struct {
	Kind       Kind
	Model      string
	Body       []byte
	WantText   string
	AbortAfter int
}

// Do sends one request and judges the response. buf is reused for the
// body (pass the same buffer from one worker).
func Do(ctx context.Context, c *http.Client, baseURL string, rq Request, buf *bytes.Buffer) Result {
	start := time.Now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	resp, err := send(ctx, c, baseURL, rq)
	resent := false
	for _, wait := range sdkRetryWaits {
		if err == nil || ctx.Err() != nil || !unanswered(err) {
			break
		}
		// The connection closed with no response byte: HTTP/1.1
		// keep-alive's own race (the server closed an idle connection as
		// the request went out on it), or a reload's (a connection the old
		// server accepted as it stopped, or one left in its listener's
		// queue: docs/fleet.md). No handler answered, so nothing was
		// served: every official SDK sends such a request again after a
		// short backoff, and so does this client.
		resent = true
		select {
		case <-time.After(wait):
		case <-ctx.Done():
		}
		resp, err = send(ctx, c, baseURL, rq)
	}
	if err != nil {
		return Result{Verdict: Dirty, Reason: "transport: " + err.Error(), Latency: time.Since(start), Resent: resent}
	}
	defer resp.Body.Close()
	buf.Reset()
	if rq.AbortAfter > 0 && rq.Kind.Stream && resp.StatusCode == http.StatusOK {
		_, err = buf.ReadFrom(io.LimitReader(resp.Body, int64(rq.AbortAfter)))
		cancel() // the client leaves mid-stream: the proxy must let go of everything
		return Result{Verdict: Aborted, Status: resp.StatusCode, Latency: time.Since(start), Bytes: buf.Len(), Resent: resent}
	}
	_, err = buf.ReadFrom(resp.Body)
	res := Result{Status: resp.StatusCode, Latency: time.Since(start), Bytes: buf.Len(), Resent: resent}
	if err != nil {
		res.Verdict, res.Reason = Dirty, fmt.Sprintf("status %d, reading body: %v", resp.StatusCode, err)
		return res
	}
	res.Verdict, res.Reason = Check(rq.Kind, resp.StatusCode, resp.Header.Get("Content-Type"), buf.Bytes(), rq.WantText)
	return res
}

// sdkRetryWaits are the official SDKs' defaults for a connection error:
// two retries, the first after about half a second, the next after one.
var sdkRetryWaits = []time.Duration{500 * time.Millisecond, time.Second}

// send sends rq once.
func send(ctx context.Context, c *http.Client, baseURL string, rq Request) (*http.Response, error) {
	return c.Do(NewRequest(ctx, baseURL, rq.Kind, rq.Model, rq.Body))
}

// unanswered reports whether a request's error says its connection
// closed before any byte of a response: EOF, a reset or a broken pipe,
// or net/http's own "server closed idle connection".
func unanswered(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		strings.Contains(err.Error(), "server closed idle connection")
}
