package sse

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// A stream read through another Reader (the translated stream the relay
// reads) reports the inner Reader's error once: "reading event stream:"
// once in the log, not twice.
func TestSSEReaderReadErrorOfAReader(t *testing.T) {
	boom := errors.New("connection reset")
	inner := NewReader(io.MultiReader(strings.NewReader("data: a\n\n"), iotest.ErrReader(boom)), 1<<20)
	outer := NewReader(iotest.ErrReader(func() error { _, _ = inner.Next(); _, err := inner.Next(); return err }()), 1<<20)
	_, err := outer.Next()
	if !errors.Is(err, boom) || err.Error() != "reading event stream: connection reset" {
		t.Errorf("error = %q, want %q wrapping it", err, "reading event stream: connection reset")
	}
}
