package engine

// A non-stream answer read into a pooled buffer. Providers behind HTTP/2
// (and many over HTTP/1.1) send a JSON answer without a Content-Length,
// and a bytes.Buffer grown from 512 bytes to hold an agent's 12 KB answer
// allocates 32 KiB and copies it five times. The answer is read into
// bufpool's buffers instead, as a request body is (bodylease.go): one of
// 20 KiB first, the class of twice its size when it fills, up to 1 MiB.
// The attempt keeps the buffer until its request has ended
// (releaseAnswers): the commit writes the answer from it.

import (
	"bytes"
	"io"

	"github.com/llmhedge/caddy-llm-hedge/internal/bufpool"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// readAnswer reads a complete answer of the stated length (-1: unknown)
// up to max+1 bytes, as wire.ReadAll does: pooled when its length is
// unknown or in the pooled sizes, else wire.ReadAll's own buffer.
func (a *attempt) readAnswer(body io.Reader, length, max int64) ([]byte, error) {
	if length >= 0 {
		if length < 1<<minPooledShift || length >= 1<<maxPooledShift || length >= max {
			return wire.ReadAll(body, length, max)
		}
		a.answer = bufpool.Get(int(length + 1)) // length+1: the read that sees the end
		return wire.ReadAllInto(body, length, max, (*a.answer)[:length+1])
	}
	a.answer = bufpool.Get(1<<minPooledShift + 1)
	b, n := *a.answer, 0
	for {
		m, err := body.Read(b[n:])
		n += m
		switch {
		case err == io.EOF:
			return b[:n], nil
		case err != nil:
			return nil, err
		case int64(n) > max:
			return b[:n], nil // the caller refuses a body over max
		case n < len(b):
			continue
		case len(b) >= 1<<maxPooledShift:
			// Past the pooled sizes the rest is read as wire.ReadAll reads
			// a body of unknown length, after what came (into a buffer of
			// its own: the pooled one goes back).
			rest, err := wire.ReadAll(io.MultiReader(bytes.NewReader(b[:n]), body), -1, max)
			a.releaseAnswer()
			return rest, err
		}
		next := bufpool.Get(min(2*len(b), 1<<maxPooledShift))
		copy(*next, b[:n])
		a.releaseAnswer()
		a.answer, b = next, *next
	}
}

// releaseAnswer gives the attempt's answer buffer back to its pool. The
// request must be done with the answer.
func (a *attempt) releaseAnswer() {
	if a.answer == nil {
		return
	}
	bufpool.Put(a.answer)
	a.answer = nil
}

// releaseAnswers gives back the buffers of a request's answers once it has
// ended: its attempts have ended (drain) and the winner's was written.
func (st *requestState) releaseAnswers() {
	for _, a := range st.attempts {
		a.releaseAnswer()
	}
}
