package sse

import (
	"fmt"
	"io"

	"github.com/llmhedge/caddy-llm-hedge/internal/bufpool"
)

// The reader's buffer: what a read goes into, when it moves, and when it
// goes back to the pool (an idle stream holds only the small array).

// fill reads more bytes into buf, making room first. With nothing
// pending, the read may wait a long time (an idle stream): a pooled
// buffer goes back to the pool and the wait reads into the reader's small
// array; a partial event there moves to a pooled buffer for the rest. A
// buffer grown past the pool's size (a stream of large events: a
// Responses stream's response.created echoes the request's tools and
// instructions) comes from bufpool's classes and is kept for the stream's
// next large event, until Release.
func (s *Reader) fill() {
	if s.BeforeFill != nil {
		s.BeforeFill(s.Arriving())
	}
	s.last = -1 // the events returned so far may move
	switch {
	case s.start == s.end:
		s.start, s.scan, s.end, s.seen, s.cr, s.crTo = 0, 0, 0, 0, 0, 0
		if s.pooled != nil && len(*s.pooled) == sseInitialBuffer { // one grown for large events is kept
			s.recycle()
			s.buf, s.onSmall = s.small[:], true
		}
	case s.onSmall:
		s.setBuf(sseInitialBuffer)
	case s.start > 0 && len(s.buf)-s.end < MinRead:
		s.moveTo(s.buf)
	}
	if s.end == len(s.buf) {
		limit := max(sseInitialBuffer, s.maxEvent+1)
		size := min(max(2*len(s.buf), sseInitialBuffer), limit)
		if size <= len(s.buf) { // unreachable: Next stops at maxEvent first
			s.err = ErrEventTooLarge
			return
		}
		s.setBuf(size)
	}
	for range 100 {
		n, err := s.r.Read(s.buf[s.end:])
		s.end += n
		s.full = s.end == len(s.buf)
		if err != nil {
			if err != io.EOF {
				err = readError(err)
			}
			s.err = err
			return
		}
		if n > 0 {
			return
		}
	}
	s.err = fmt.Errorf("reading event stream: %w", io.ErrNoProgress)
}

// Arriving reports, once no complete event is left, that the bytes read
// end inside an event (not only blank lines between events) and the last
// read filled all the room it had (up to the initial buffer's size): that
// read stopped at the reader's buffer, not at what the upstream had sent,
// so the rest of the event is almost always here already (a provider
// writes an event whole). It is BeforeFill's rest.
func (s *Reader) Arriving() bool {
	return s.full && s.start < s.end && len(s.buf) <= sseInitialBuffer && !onlyWhitespace(s.buf[s.start:s.end])
}

// setBuf moves the current event to a new buffer of at least size bytes
// (bufpool's, or made past bufpool.Max), and the old one goes back to
// its pool if it came from one.
func (s *Reader) setBuf(size int) {
	old := s.pooled
	var nb []byte
	if s.pooled = nil; size <= bufpool.Max {
		s.pooled = bufpool.Get(size)
		nb = *s.pooled
	} else {
		nb = make([]byte, size)
	}
	s.moveTo(nb)
	s.onSmall = false
	bufpool.Put(old)
}

// recycle gives the buffer back to its pool if it came from one and drops
// it.
func (s *Reader) recycle() {
	bufpool.Put(s.pooled)
	s.pooled = nil
	s.buf = nil
}

// Release gives the reader's buffer back to the pool: the stream is over
// for its owner, and the events it returned are no longer read. The
// reader reads into its small array if used again.
func (s *Reader) Release() {
	if s.borrowed || s.onSmall {
		return
	}
	s.recycle()
	s.buf, s.onSmall = s.small[:], true
	s.start, s.scan, s.end, s.seen, s.last = 0, 0, 0, 0, -1
	s.cr, s.crTo = 0, 0
	s.resetEvent()
}

// moveTo copies the current event to the start of nb and makes nb the buffer.
func (s *Reader) moveTo(nb []byte) {
	n := copy(nb, s.buf[s.start:s.end])
	s.scan -= s.start
	s.seen = max(s.seen-s.start, 0)
	s.cr, s.crTo = 0, 0 // positions moved: searched again from the next line
	s.end = n
	s.start = 0
	s.buf = nb
}
