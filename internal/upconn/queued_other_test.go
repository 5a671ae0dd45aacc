//go:build !linux

package upconn

import (
	"testing"
	"time"
)

// waitQueued: without FIONREAD here, a generous pause for the bytes to
// reach the socket (Linux CI uses the exact wait of queued_linux_test.go).
func waitQueued(t *testing.T, c *Conn, n int) { time.Sleep(100 * time.Millisecond) }
