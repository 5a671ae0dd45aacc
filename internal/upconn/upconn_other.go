//go:build !unix

package upconn

import (
	"io"
	"net"
)

type rawReader = struct{}

// Wrap returns c unchanged: on this platform a read waits in net.Conn's
// own Read, with its buffer.
func Wrap(c net.Conn) net.Conn { return c }

// Wraps reports whether Wrap pools reads on this platform.
const Wraps = false

// fill reads through the wrapped connection (a Conn is not made on this
// platform; this keeps one correct if it were).
func (c *Conn) fill() error {
	b := pool.Get().(*[]byte)
	n, err := c.Conn.Read(*b)
	if n == 0 {
		pool.Put(b)
		if err == nil {
			err = io.ErrNoProgress
		}
		return err
	}
	c.buf, c.r, c.w = b, 0, n
	return nil
}
