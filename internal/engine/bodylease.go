package engine

// A completion's request body in a pooled buffer: an agent's turn is
// 50-300 KB, and a fresh buffer of that size per request costs more than
// the parse (the runtime zeroes it, faults its pages in, and collects it
// soon after). The buffer goes back to its pool when the request ends.
//
// Every upstream request reads it through a leaseReader, and the lease's
// release revokes them all before the buffer is reused: the HTTP/1.1
// transport's write loop and the HTTP/2 stream's body writer may still
// be reading a lost attempt's body when the request has ended, and must
// then fail, never read another request's bytes.

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"sync"

	"github.com/llmhedge/caddy-llm-hedge/internal/bufpool"
	"github.com/llmhedge/caddy-llm-hedge/internal/cloud"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// Pooled sizes: from 16 KiB (below it a buffer is cheap) to wire's
// exact-size bound of 1 MiB (a larger body is read as it comes and is not
// pooled), in bufpool's classes: an agent's 142 KB turn takes a 160 KiB
// buffer, not a 256 KiB one.
const (
	minPooledShift = 14
	maxPooledShift = 20
)

// bodyLease owns a pooled buffer holding one request's body, and those
// its attempts' cloud rewrites were built in (cloud.Bodies).
type bodyLease struct {
	buf    *[]byte // the pooled buffer, whole
	body   []byte  // the body in it (its capacity ends at its length)
	mu     sync.RWMutex
	gone   bool      // released: every reader fails
	extras []*[]byte // the rewrites' buffers
}

// errBodyReleased is what a reader of a released body gets: the request
// that owned it has ended.
var errBodyReleased = errors.New("request body released: the request ended")

// readLeasedBody is readBody into a pooled buffer when the body's length
// is known, in the pooled sizes and not encoded; else readBody's own
// buffer and a nil lease (whose methods are those of no lease).
func readLeasedBody(r *http.Request, max int64) ([]byte, *bodyLease, error) {
	n := r.ContentLength
	ce := r.Header.Get("Content-Encoding")
	if n < 1<<minPooledShift || n >= 1<<maxPooledShift || n > max || (ce != "" && ce != "identity") {
		b, err := readBody(r, max)
		return b, nil, err
	}
	l := &bodyLease{buf: bufpool.Get(int(n + 1))} // n+1 bytes: the read that sees the end
	b, err := wire.ReadAllInto(r.Body, n, max, (*l.buf)[:n+1])
	if err != nil || int64(len(b)) > max {
		l.release()
		if err == nil {
			return nil, nil, wire.ErrBodyTooLarge
		}
		return nil, nil, readBodyError(err)
	}
	r.Header.Del("Content-Encoding")
	l.body = b[:len(b):len(b)] // an append never writes into the pooled buffer
	return l.body, l, nil
}

// upstreamBody is the body an attempt sends for model: the client's as
// read, unless the model must be spliced in; a cloud that names the model
// in its URL gets the client's own (and its parse's index: the cloud's
// rewrite drops the model, so a splice would be a copy made for nothing).
func upstreamBody(proto cloud.Protocol, req *wire.Request, model string) []byte {
	if md, ok := proto.(cloud.ModelDropper); ok && md.DropsModel(req.Dialect) {
		return req.Body
	}
	return req.BodyFor(model)
}

// Reader is an upstream request's body for b (cloud.Bodies' too):
// revocable when the lease holds b, else a plain reader.
func (l *bodyLease) Reader(b []byte) io.ReadCloser {
	if len(b) == 0 {
		return http.NoBody
	}
	if l == nil || !l.holds(b) {
		return io.NopCloser(bytes.NewReader(b))
	}
	return &leaseReader{l: l, b: b}
}

// holds reports whether b is the leased body, or built from the start of
// one of the lease's rewrite buffers, or the lease is released (then no
// body of the request is read again).
func (l *bodyLease) holds(b []byte) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.gone {
		return true // released: its reader fails, whatever b is
	}
	if len(b) == len(l.body) && &b[0] == &l.body[0] {
		return true
	}
	for _, e := range l.extras {
		if cap(b) <= cap(*e) && &b[0] == &(*e)[0] {
			return true
		}
	}
	return false
}

// bodies is the lease as a cloud's rewrites see it (none without one).
func (l *bodyLease) bodies() cloud.Bodies {
	if l == nil {
		return nil
	}
	return l
}

// Buffer is a pooled buffer for a rewrite of the body (cloud.Bodies),
// the lease's until it is released; one outside the pooled sizes is the
// rewrite's own.
func (l *bodyLease) Buffer(n int) []byte {
	if n <= 1<<minPooledShift || n > 1<<maxPooledShift {
		return make([]byte, 0, n)
	}
	e := bufpool.Get(n)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gone {
		bufpool.Put(e)
		return make([]byte, 0, n)
	}
	l.extras = append(l.extras, e)
	return (*e)[:0]
}

// release revokes every reader and gives the buffers back. The request
// must be done with the body: its attempts have ended (drain).
func (l *bodyLease) release() {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.gone, l.body = true, nil
	extras := l.extras
	l.extras = nil
	l.mu.Unlock()
	bufpool.Put(l.buf)
	for _, e := range extras {
		bufpool.Put(e)
	}
}

// leaseReader reads a body the lease holds from its start.
type leaseReader struct {
	l   *bodyLease
	b   []byte
	off int
}

func (r *leaseReader) Read(p []byte) (int, error) {
	r.l.mu.RLock()
	defer r.l.mu.RUnlock()
	if r.l.gone {
		return 0, errBodyReleased
	}
	if r.off >= len(r.b) {
		return 0, io.EOF
	}
	n := copy(p, r.b[r.off:])
	r.off += n
	return n, nil
}

func (*leaseReader) Close() error { return nil }

// bodyChunk is how much of a body WriteBody writes under one hold of the
// read lock: a release waits for that write to end (one the provider does
// not take ends when the attempt's connection closes, and the request
// closes its attempts' responses before it releases).
const bodyChunk = 64 << 10

// WriteBody writes the body from where it was read to, at most max bytes,
// straight from the lease's buffer (upconn.BodyWriter): over a cleartext
// provider no copy of an agent's body is made. Each write holds the read
// lock, so the buffer is not reused under it.
func (r *leaseReader) WriteBody(w io.Writer, max int64) (int64, error) {
	var n int64
	for n < max {
		r.l.mu.RLock()
		if r.l.gone {
			r.l.mu.RUnlock()
			return n, errBodyReleased
		}
		chunk := r.b[r.off:min(len(r.b), r.off+bodyChunk, r.off+int(max-n))]
		if len(chunk) == 0 {
			r.l.mu.RUnlock()
			break
		}
		m, err := w.Write(chunk)
		r.l.mu.RUnlock()
		r.off += m
		n += int64(m)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
