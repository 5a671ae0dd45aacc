// Package upconn is the TCP connection to a provider spoken to in plain
// HTTP/1.1: its reads take a buffer from a pool only when the socket has
// bytes, and give it back once the bytes are read.
//
// net/http keeps a read buffer per HTTP/1.1 connection for the
// connection's whole life, and a streaming answer holds its connection for
// minutes, mostly idle between events. The transport's own buffer can be
// small (its chunk and header lines), and each upstream read still takes a
// whole burst in one system call, into a pooled buffer: an idle stream
// holds none. The wait for bytes is the runtime's network poller's, as for
// any net.Conn (syscall.RawConn.Read), so deadlines, Close and the
// transport's cancellation end it the same way. Where a read is about to
// wait, a Waiter set by the body's reader is told first (BeforeWait): the
// relay flushes its client there, and only there.
package upconn

import (
	"io"
	"net"
	"sync"
)

// ReadSize is the pooled buffer one upstream read fills: the most a burst
// delivers in one system call.
const ReadSize = 8 << 10

// TransportBuffer is the read buffer to give net/http's transport for
// connections wrapped here (Transport.ReadBufferSize): it holds a status
// line, a header line or a chunk's size line at a time, and a body read
// of at least its size goes past it. Longer header lines are read in
// parts; a chunk-size line (a chunk extension) or a trailer longer than
// it is refused as malformed, where net/http's default 4 KiB allows
// longer ones. No LLM provider sends either.
const TransportBuffer = 512

var pool = sync.Pool{New: func() any { b := make([]byte, ReadSize); return &b }}

// Conn is a net.Conn whose reads go through the pool. Writes, Close,
// deadlines and addresses are the wrapped connection's. A Conn is read by
// one goroutine at a time, as net/http does; Close may come from any.
type Conn struct {
	net.Conn
	raw    rawReader
	buf    *[]byte // pooled, holding [r:w] not yet read; nil when empty
	r, w   int
	readFn func(fd uintptr) bool // c.rawRead, made once
	err    error                 // rawRead's error

	waitMu sync.Mutex
	onWait Waiter // BeforeWait's
}

// Waiter is told that a read of the connection found nothing to read and
// is about to wait for the network.
type Waiter = interface{ Waiting() }

// BeforeWait sets w to be told, on the reading goroutine, each time a
// read is about to wait. The body's reader (the relay) sets it around its
// own reads only, to flush what it holds for the client exactly when
// waiting would hold it back.
func (c *Conn) BeforeWait(w Waiter) {
	c.waitMu.Lock()
	c.onWait = w
	c.waitMu.Unlock()
}

// StopWaiting clears w if it is the one set: once the body has ended, the
// connection may serve another request, whose reader set its own. It waits
// for a Waiting in progress, so once it returns w is not told again.
func (c *Conn) StopWaiting(w Waiter) {
	c.waitMu.Lock()
	if c.onWait == w {
		c.onWait = nil
	}
	c.waitMu.Unlock()
}

// Idle clears what is set: the transport is putting the connection in its
// pool (httptrace's PutIdleConn), after the body's end, and reads it from
// then on for its next answer, on its own goroutine, which must not flush
// the last reader's client.
func (c *Conn) Idle() { c.BeforeWait(nil) }

// waiting tells the Waiter set, if any.
func (c *Conn) waiting() {
	c.waitMu.Lock()
	if c.onWait != nil {
		c.onWait.Waiting()
	}
	c.waitMu.Unlock()
}

// WriteSize is the pooled buffer a request body is written through.
const WriteSize = 32 << 10

var writePool = sync.Pool{New: func() any { b := make([]byte, WriteSize); return &b }}

// ReadFrom writes what r reads to the connection through a pooled buffer.
// net/http's transport copies a request body past its 4 KiB write buffer
// straight to the connection (persistConnWriter.ReadFrom, with the body
// behind an io.LimitedReader); the TCP connection's own ReadFrom would
// then make a fresh 32 KiB buffer for every request (io.Copy), which an
// agent's body of a hundred kilobytes and more always needs.
//
// A body that writes itself (BodyWriter, behind the transport's
// io.LimitedReader) is written from where its bytes are, with no copy.
func (c *Conn) ReadFrom(r io.Reader) (int64, error) {
	if lr, ok := r.(*io.LimitedReader); ok {
		if bw, ok := lr.R.(BodyWriter); ok {
			n, err := bw.WriteBody((*connWriter)(c), lr.N)
			lr.N -= n
			return n, err
		}
	}
	bp := writePool.Get().(*[]byte)
	defer writePool.Put(bp)
	return io.CopyBuffer((*connWriter)(c), r, *bp)
}

// BodyWriter is a request body held in memory that writes at most max of
// its bytes (from where it has read to) to w itself, and counts them as
// read: net/http's transport then writes it with no copy through a buffer.
type BodyWriter interface {
	WriteBody(w io.Writer, max int64) (int64, error)
}

// connWriter is the Conn with only its writes: io.CopyBuffer must not
// find a ReadFrom on it (a pointer, so no allocation to make it a Writer).
type connWriter Conn

func (w *connWriter) Write(p []byte) (int, error) { return w.Conn.Write(p) }
