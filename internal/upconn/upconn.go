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
	"bytes"
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
}

// ChunkReady reports whether the bytes already read from the socket, from
// where they start, hold a whole chunk of an HTTP/1.1 chunked body (after
// the CRLF that ends the chunk before it, if they start with one), and
// every further chunk whose size line they hold whole, or the body's last
// chunk and its end: net/http's chunked reader then returns the next read
// of the body without waiting on the network. Bytes that start inside a
// chunk, or hold only part of one, report false (the caller must assume
// the read waits). Called by the body's reader only, and not after the
// body has returned its end (the transport reads the connection again
// then).
func (c *Conn) ChunkReady() bool {
	if c.buf == nil {
		return false
	}
	return wholeChunks((*c.buf)[c.r:c.w])
}

// wholeChunks reports whether b starts with a whole chunk (a size line:
// hex digits, an optional extension, CRLF; that many bytes and CRLF) and
// every further chunk whose size line b holds is whole too, or whether it
// ends with the last chunk, "0" and its line, with no trailer, and the
// final CRLF. net/http's chunked reader reads on into every chunk whose
// size line it has buffered and waits for that chunk's data, even with
// bytes to return; it stops before a size line it does not hold whole.
func wholeChunks(b []byte) bool {
	if len(b) >= 2 && b[0] == '\r' && b[1] == '\n' {
		b = b[2:]
	}
	for first := true; ; first = false {
		size, i := 0, 0
		for ; i < len(b) && i < 8; i++ {
			d := unhex(b[i])
			if d < 0 {
				break
			}
			size = size<<4 | d
		}
		nl := i + 1 // the line's end: mostly right after the digits ("\r\n")
		if nl >= len(b) || b[i] != '\r' || b[nl] != '\n' {
			if nl = bytes.IndexByte(b[i:], '\n'); nl >= 0 {
				nl += i
			} else {
				nl = len(b)
			}
		}
		if nl == len(b) {
			return !first // no more, or a size line not yet whole: the read stops before it
		}
		if i == 0 || (i < nl && unhex(b[i]) >= 0) {
			return false // no size, or one of more than 8 digits
		}
		rest := b[nl+1:]
		if size == 0 {
			return len(rest) >= 2 && rest[0] == '\r' && rest[1] == '\n'
		}
		if len(rest) < size+2 || rest[size] != '\r' || rest[size+1] != '\n' {
			return false
		}
		b = rest[size+2:]
	}
}

// lineCut returns how much of w, the part of the held bytes that fits the
// reader's buffer, to hand out: up to the last line end in its last
// lineTail bytes, or all of it when there is none. A chunk-size line is
// shorter than lineTail, so a buffer too small for the held bytes never
// takes the head of a size line and leaves its tail: the bytes held start
// with the line, and ChunkReady can read the chunk's size. A shorter read
// is always allowed (io.Reader); the reader asks again, with no system
// call while bytes are held.
func lineCut(w []byte) int {
	from := max(len(w)-lineTail, 0)
	if i := bytes.LastIndexByte(w[from:], '\n'); i >= 0 {
		return from + i + 1
	}
	return len(w)
}

// lineTail is the longest chunk-size line lineCut keeps whole: 8 hex
// digits, CRLF, and room for a short extension.
const lineTail = 32

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
