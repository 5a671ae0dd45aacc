package sse

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// ResetBytes reads the events a reader of the same bytes reads, and the
// same end; the bytes are not written, also after a Reset.
func TestResetBytesMatchesReader(t *testing.T) {
	for _, in := range []string{
		"event: a\ndata: 1\n\n\n\ndata: 2\r\ndata: 3\r\n\r\n: c\n\n",
		"data: x\r\rdata: y\n\n",
		"data: cut",
		"",
		"\n\n",
	} {
		want := NewReader(bytes.NewReader([]byte(in)), 0)
		b := []byte(in)
		var got Reader
		got.ResetBytes(b)
		for {
			we, werr := want.Next()
			ge, gerr := got.Next()
			if (gerr == nil) != (werr == nil) || errors.Is(gerr, io.EOF) != errors.Is(werr, io.EOF) || errors.Is(gerr, io.ErrUnexpectedEOF) != errors.Is(werr, io.ErrUnexpectedEOF) {
				t.Fatalf("%q: error %v, a reader gives %v", in, gerr, werr)
			}
			if !bytes.Equal(ge.Raw, we.Raw) || !bytes.Equal(ge.Name, we.Name) || !bytes.Equal(ge.Data, we.Data) || (ge.Name == nil) != (we.Name == nil) {
				t.Fatalf("%q: event %q, a reader gives %q", in, ge.Raw, we.Raw)
			}
			if werr != nil {
				break
			}
		}
		got.Reset(bytes.NewReader([]byte("data: other\n\n")))
		if _, err := got.Next(); err != nil || string(b) != in {
			t.Fatalf("%q: after Reset: %v, bytes now %q", in, err, b)
		}
	}
}
