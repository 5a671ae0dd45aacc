//go:build !unix

package upconn

import "net"

type rawReader = struct{}

// Wrap returns c unchanged: on this platform a read waits in net.Conn's
// own Read, with its buffer (a Conn is never made, and its Read is the
// wrapped connection's).
func Wrap(c net.Conn) net.Conn { return c }

// Wraps reports whether Wrap pools reads on this platform.
const Wraps = false
