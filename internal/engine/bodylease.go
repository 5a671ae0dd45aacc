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
	"sync/atomic"

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

// bodyLease owns a pooled buffer holding one request's body.
type bodyLease struct {
	buf  *[]byte // the pooled buffer, whole
	body []byte  // the body in it (its capacity ends at its length)
	mu   sync.RWMutex
	gone bool // released: every reader fails
	// sums is made by the first attempt that signs the body (SigV4):
	// a request on no Bedrock provider carries no more than the pointer.
	sums atomic.Pointer[cloud.PayloadSums]
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

// Reader is an upstream request's body for b: revocable when the lease
// holds b, else a plain reader.
func (l *bodyLease) Reader(b []byte) io.ReadCloser {
	if len(b) == 0 {
		return http.NoBody
	}
	if l == nil || !l.holds(b) {
		return io.NopCloser(bytes.NewReader(b))
	}
	r := &leaseReader{l: l}
	r.one[0] = b
	r.pieces = r.one[:]
	return r
}

// Gather is a cloud's rewrite of the body read from its pieces
// (cloud.Bodies): revocable when one of them lies in the leased body, else
// the pieces joined (a rewrite of a body the lease does not hold).
func (l *bodyLease) Gather(pieces [][]byte) io.ReadCloser {
	for _, p := range pieces {
		if l.holds(p) {
			return &leaseReader{l: l, pieces: pieces}
		}
	}
	return io.NopCloser(bytes.NewReader(bytes.Join(pieces, nil)))
}

// holds reports whether b lies in the leased body (the whole of it, or a
// piece of a rewrite), or the lease is released (then no body of the
// request is read again).
func (l *bodyLease) holds(b []byte) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.gone {
		return true // released: its reader fails, whatever b is
	}
	// The body's capacity ends at its length, so a slice of it has the
	// capacity of what follows its start.
	off := cap(l.body) - cap(b)
	return len(b) > 0 && off >= 0 && off < len(l.body) && &l.body[off] == &b[0]
}

// bodies is the lease as a cloud's rewrites see it (none without one).
func (l *bodyLease) bodies() cloud.Bodies {
	if l == nil {
		return nil
	}
	return l
}

// PayloadSums is where the request keeps the hash of a rewrite it signed,
// for its later attempts (cloud.Bodies).
func (l *bodyLease) PayloadSums() *cloud.PayloadSums {
	if m := l.sums.Load(); m != nil {
		return m
	}
	l.sums.CompareAndSwap(nil, new(cloud.PayloadSums)) // a hedge may make one at once: one is kept
	return l.sums.Load()
}

// release revokes every reader and gives the buffer back. The request
// must be done with the body: its attempts have ended (drain).
func (l *bodyLease) release() {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.gone, l.body = true, nil
	l.mu.Unlock()
	bufpool.Put(l.buf)
}

// leaseReader reads a body the lease holds from its start: the body, or
// the pieces of a cloud's rewrite of it, in turn.
type leaseReader struct {
	l      *bodyLease
	pieces [][]byte
	one    [1][]byte // pieces, for the body itself
	piece  int       // the piece being read
	off    int       // how much of it was read
}

func (r *leaseReader) Read(p []byte) (int, error) {
	r.l.mu.RLock()
	defer r.l.mu.RUnlock()
	if r.l.gone {
		return 0, errBodyReleased
	}
	n := 0
	for n < len(p) && r.piece < len(r.pieces) {
		c := copy(p[n:], r.pieces[r.piece][r.off:])
		n, r.off = n+c, r.off+c
		if r.off == len(r.pieces[r.piece]) {
			r.piece, r.off = r.piece+1, 0
		}
	}
	if n == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	return n, nil
}

func (*leaseReader) Close() error { return nil }

// bodyChunk is how much of a body WriteBody writes under one hold of the
// read lock: a release waits for that write to end (one the provider does
// not take ends when the attempt's connection closes, and the request
// closes its attempts' responses before it releases).
const bodyChunk = 64 << 10

// gatherTail is the part of a large piece WriteBody copies, with the small
// pieces after it, into one write: a rewrite's closing bytes do not cost a
// write, and a packet, of their own.
const gatherTail = 2 << 10

// WriteBody writes the body from where it was read to, at most max bytes,
// straight from the lease's buffer (upconn.BodyWriter): over a cleartext
// provider no copy of an agent's body is made. Each write from the buffer
// holds the read lock, so the buffer is not reused under it; small pieces
// (and the end of the large piece before them) are copied into one write.
func (r *leaseReader) WriteBody(w io.Writer, max int64) (int64, error) {
	var read, wrote int64
	var small *[]byte
	defer func() { bufpool.Put(small) }()
	for read < max {
		r.l.mu.RLock()
		if r.l.gone {
			r.l.mu.RUnlock()
			return wrote, errBodyReleased
		}
		for r.piece < len(r.pieces) && r.off == len(r.pieces[r.piece]) {
			r.piece, r.off = r.piece+1, 0
		}
		if r.piece == len(r.pieces) {
			r.l.mu.RUnlock()
			break
		}
		p := r.pieces[r.piece][r.off:]
		p = p[:min(int64(len(p)), max-read)]
		last := r.piece == len(r.pieces)-1 || int64(len(p)) == max-read
		if (small == nil || len(*small) == 0) && (last || len(p) >= 2*gatherTail) {
			if !last {
				p = p[:len(p)-gatherTail]
			}
			p = p[:min(len(p), bodyChunk)]
			m, err := w.Write(p)
			r.l.mu.RUnlock()
			r.off, read, wrote = r.off+m, read+int64(m), wrote+int64(m)
			if err != nil {
				return wrote, err
			}
			continue
		}
		if small == nil {
			small = bufpool.Get(4 << 10)
			*small = (*small)[:0]
		}
		c := min(len(p), cap(*small)-len(*small))
		*small = append(*small, p[:c]...)
		r.l.mu.RUnlock()
		r.off, read = r.off+c, read+int64(c)
		if len(*small) == cap(*small) {
			if err := r.flushSmall(w, small, &wrote); err != nil {
				return wrote, err
			}
		}
	}
	if small != nil && len(*small) > 0 {
		if err := r.flushSmall(w, small, &wrote); err != nil {
			return wrote, err
		}
	}
	return wrote, nil
}

// flushSmall writes the copied small pieces, and counts them. It holds
// the read lock as a write from the buffer does: once the lease is
// released, no write of its request's body is under way or begins.
func (r *leaseReader) flushSmall(w io.Writer, small *[]byte, wrote *int64) error {
	r.l.mu.RLock()
	defer r.l.mu.RUnlock()
	if r.l.gone {
		return errBodyReleased
	}
	m, err := w.Write(*small)
	*wrote += int64(m)
	*small = (*small)[:0]
	return err
}
