package wire

import (
	"bytes"
	"io"
)

// exactSizeBody bounds what ReadAll allocates ahead for a stated length.
const exactSizeBody = 1 << 20

// ReadAll reads body up to max+1 bytes. A body of known length is read
// into a buffer of its size and one byte more (the read that sees its
// end): a committed stream keeps the body for its whole life (a
// continuation resends it), so it holds no slack. Memory follows the
// bytes that arrive: the stated length is allocated at once only up to
// exactSizeBody, and past it the buffer doubles as the body comes, to
// that size and no further, so a length a client or provider states
// but never sends costs at most exactSizeBody.
func ReadAll(body io.Reader, length, max int64) ([]byte, error) {
	var b []byte
	if length > 0 {
		want := min(length, max) + 1 // max+1 bytes tell a body over max
		b = make([]byte, min(want, exactSizeBody))
		for n := 0; int64(n) < want; {
			if n == len(b) { // doubled, up to want
				b = append(make([]byte, 0, min(2*int64(n), want)), b...)
				b = b[:cap(b)]
			}
			m, err := io.ReadFull(body, b[n:])
			n += m
			switch {
			case err == nil:
			case (err == io.ErrUnexpectedEOF || err == io.EOF) && int64(n) == length:
				return b[:n], nil
			case err == io.ErrUnexpectedEOF || err == io.EOF:
				return nil, io.ErrUnexpectedEOF // shorter than its Content-Length
			default:
				return nil, err
			}
		}
		// Longer than it said (a body whose length net/http does not
		// enforce): the rest is read as a body of unknown length is.
	}
	buf := bytes.NewBuffer(b)
	_, err := buf.ReadFrom(io.LimitReader(body, max+1-int64(len(b))))
	return buf.Bytes(), err
}

// ReadAllInto is ReadAll into buf, a buffer of the body's stated length
// and one byte more (the read that sees its end): a body of that length
// is buf's first bytes. A longer one (a length net/http does not
// enforce) is read on as ReadAll reads it, into a buffer of its own.
func ReadAllInto(body io.Reader, length, max int64, buf []byte) ([]byte, error) {
	n, err := io.ReadFull(body, buf)
	switch {
	case err == nil:
		out := bytes.NewBuffer(append(make([]byte, 0, 2*len(buf)), buf...))
		_, err := out.ReadFrom(io.LimitReader(body, max+1-int64(len(buf))))
		return out.Bytes(), err
	case (err == io.ErrUnexpectedEOF || err == io.EOF) && int64(n) == length:
		return buf[:n], nil
	case err == io.ErrUnexpectedEOF || err == io.EOF:
		return nil, io.ErrUnexpectedEOF // shorter than its Content-Length
	}
	return nil, err
}
