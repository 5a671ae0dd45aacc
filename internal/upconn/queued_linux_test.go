//go:build linux

package upconn

import (
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// waitQueued waits until the socket under c holds at least n bytes not
// yet read (the kernel's FIONREAD count): a test that needs bytes on the
// socket waits for them, not for a margin of time.
func waitQueued(t *testing.T, c *Conn, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var queued int32
		var errno syscall.Errno
		if err := c.raw.Control(func(fd uintptr) {
			_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&queued)))
		}); err != nil || errno != 0 {
			t.Fatalf("FIONREAD: %v %v", err, errno)
		}
		if int(queued) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes on the socket after 10s, want %d", queued, n)
		}
		time.Sleep(time.Millisecond)
	}
}
