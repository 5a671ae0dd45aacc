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
// transport's cancellation end it the same way.
package upconn

import (
	"net"
	"sync"
)

// ReadSize is the pooled buffer one upstream read fills: the most a burst
// delivers in one system call.
const ReadSize = 8 << 10

// TransportBuffer is the read buffer to give net/http's transport for
// connections wrapped here (Transport.ReadBufferSize): it holds a status
// line, a header line or a chunk's size line at a time (longer header
// lines are read in parts), and a body read of at least its size goes
// past it.
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
}

// Pending reports whether bytes already read from the socket wait in the
// connection's buffer: the next read returns at once, without a system
// call. Called by the connection's reader only.
func (c *Conn) Pending() bool { return c.buf != nil }

// Read copies what the last system call delivered, or waits for the
// socket to have bytes and then reads all it has, up to ReadSize.
func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if c.buf == nil {
		if err := c.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, (*c.buf)[c.r:c.w])
	c.r += n
	if c.r == c.w {
		pool.Put(c.buf)
		c.buf = nil
	}
	return n, nil
}
