//go:build unix

package upconn

import (
	"io"
	"net"
	"os"
	"syscall"
)

type rawReader = syscall.RawConn

// Wrap returns c with pooled reads when it is a TCP connection the
// runtime polls; any other connection is returned as it is.
func Wrap(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	uc := &Conn{Conn: c, raw: raw}
	uc.readFn = uc.rawRead
	return uc
}

// Wraps reports whether Wrap pools reads on this platform.
const Wraps = true

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

// fill waits until the socket is readable and reads what it has into a
// pooled buffer.
func (c *Conn) fill() error {
	c.err = nil
	if err := c.raw.Read(c.readFn); err != nil {
		// A deadline, a closed connection: the poller's error, named as
		// net.Conn's Read names it.
		if oe, ok := err.(*net.OpError); ok {
			oe.Op = "read"
		}
		return err
	}
	return c.err
}

// rawRead is the poller's callback: false asks it to wait for the socket
// to be readable and call again (the Waiter set is told first). The
// buffer is taken for the read system call and given back at once if
// nothing came.
func (c *Conn) rawRead(fd uintptr) bool {
	b := pool.Get().(*[]byte)
	for {
		n, err := syscall.Read(int(fd), *b)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			pool.Put(b)
			c.waiting()
			return false
		case err != nil:
			pool.Put(b)
			c.err = &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.NewSyscallError("read", err)}
		case n == 0:
			pool.Put(b)
			c.err = io.EOF
		default:
			c.buf, c.r, c.w = b, 0, n
		}
		return true
	}
}
