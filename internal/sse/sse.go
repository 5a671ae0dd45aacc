package sse

import (
	"bytes"
	"errors"
	"io"
	"sync"
)

// sseEvent is one complete server-sent event as it arrived on the wire.
type Event struct {
	// Raw is the exact bytes of the event including its terminating blank
	// line. Stray blank lines that preceded the event (and the '\n' of a
	// "\r\n" whose '\r' ended the previous event at a read boundary) are
	// part of it, so the Raw of successive events concatenate to the stream
	// byte for byte. Valid until the next Next call.
	Raw []byte
	// Name is the value of the last "event:" field, nil if absent. Valid
	// until the next Next call.
	Name []byte
	// Data is the data lines joined with '\n' (no trailing newline), nil if
	// the event has no data line. Valid until the next Next call.
	Data []byte
}

// errEventTooLarge ends a stream whose next event is bigger than the
// reader's bound: a provider gone wrong, or one that never sends a blank line.
var ErrEventTooLarge = errors.New("server-sent event exceeds the size limit")

// streamReadError is a read error of the underlying stream. A stream read
// through another Reader (a translated one: its bytes come from a Reader
// of the target's stream) returns that Reader's error as is, so the
// operator reads "reading event stream:" once, not twice.
type streamReadError struct{ err error }

func (e *streamReadError) Error() string { return "reading event stream: " + e.err.Error() }
func (e *streamReadError) Unwrap() error { return e.err }

func readError(err error) error {
	if _, ok := err.(*streamReadError); ok {
		return err
	}
	return &streamReadError{err}
}

const (
	// DefaultMaxEvent bounds one event when the reader is given no bound.
	DefaultMaxEvent  = 1 << 20
	sseInitialBuffer = 4 << 10 // holds many typical events, and little per idle stream
	MinRead          = 2 << 10 // compact rather than issue reads smaller than this
	smallBuffer      = 512     // the read that waits on an idle stream: one typical event
)

// sseReader splits a text/event-stream into events incrementally, following
// the WHATWG parsing rules (lines end in "\n", "\r\n" or "\r"; an event ends
// at a blank line). It keeps one growable buffer, and the events it returns
// alias it, so the steady state allocates nothing per event.
type Reader struct {
	r        io.Reader
	maxEvent int
	buf      []byte
	start    int   // first byte of the current event in buf
	scan     int   // first byte of buf not yet split into lines
	end      int   // end of the bytes read into buf
	err      error // sticky: the read error, or the error Next returned
	crLF     bool  // the last line ended in '\r' at scan-1: a '\n' at scan belongs to it
	seen     int   // buf[scan:seen] holds no line end: a long line is not searched twice
	// cr-1 is the first '\r' at or after where the parser last looked for
	// one, found in buf[:crTo]; 0: none there. An LF-only burst is searched
	// for '\r' once, not once per line (nextCR).
	cr, crTo int

	// The event being parsed. Offsets are relative to start, so they
	// survive compaction of buf.
	fields   bool // a non-blank line (field or comment) was seen
	hasName  bool
	nameOff  int
	nameLen  int
	dataN    int // data lines seen
	dataOff  int // the first data line's value, used as is when it is the only one
	dataLen  int
	scratch  []byte  // the joined data when there is more than one data line
	borrowed bool    // buf is ResetBytes's: never written
	onSmall  bool    // buf is small: nothing was pending when the last read began
	pooled   *[]byte // buf's array when it came from the pool

	// small takes the first read after the reader ran dry, so an idle
	// stream holds no pooled buffer; one event usually fits.
	small [smallBuffer]byte

	// BeforeFill, if set, runs before each read of r, when the reader has
	// no complete event left. The relay starts its wait clock there and
	// flushes its coalesced writes, unless rest is true: the read takes
	// the rest of an event whose start the last read took, and that read
	// filled all the room it had (up to the initial buffer's size). That
	// read stopped at the reader's buffer, not at what the upstream had
	// sent, so the rest is almost always here already (a provider writes
	// an event whole), and the burst goes out in one write after it.
	BeforeFill func(rest bool)

	src   Source // r, when it hands over whole events (source.go)
	burst int    // bytes taken from src since BeforeFill last ran

	last int  // where in buf the event Next last returned starts; -1: none since the last read (Adjoin)
	full bool // the last read filled the room it was given
}

// NewReader reads events from r; maxEvent bounds one event's bytes
// (non-positive means 1 MiB).
func NewReader(r io.Reader, maxEvent int) *Reader {
	s := new(Reader)
	s.open(r, maxEvent)
	return s
}

// open readies s, new or from the pool, to read r.
func (s *Reader) open(r io.Reader, maxEvent int) {
	if maxEvent <= 0 {
		maxEvent = DefaultMaxEvent
	}
	s.maxEvent, s.BeforeFill = maxEvent, nil
	s.Reset(r)
}

// readers holds readers given back with Put: a reader carries its small
// array, so making one is not free.
var readers = sync.Pool{New: func() any { return new(Reader) }}

// Get is NewReader from a pool of readers; Put gives it back once its
// owner is done with it and with every event it returned.
func Get(r io.Reader, maxEvent int) *Reader {
	s := readers.Get().(*Reader)
	s.open(r, maxEvent)
	return s
}

// Put releases s's buffer and gives s back to the pool; s must not be
// used again.
func Put(s *Reader) {
	if s == nil {
		return
	}
	s.Release()
	s.r, s.src, s.BeforeFill, s.err = nil, nil, nil, nil
	if s.borrowed {
		s.buf, s.borrowed = nil, false
	}
	readers.Put(s)
}

// Reset makes s read a new stream from r, keeping its buffers.
func (s *Reader) Reset(r io.Reader) {
	if s.borrowed { // ResetBytes's buffer is not the reader's to fill
		s.buf, s.borrowed = nil, false
	}
	if s.buf == nil {
		s.buf, s.onSmall = s.small[:], true
	}
	s.r = r
	s.src, _ = r.(Source)
	s.burst, s.last, s.full = 0, -1, false
	s.start, s.scan, s.end, s.seen, s.cr, s.crTo = 0, 0, 0, 0, 0, 0
	s.err = nil
	s.crLF = false
	s.resetEvent()
}

// ResetBytes makes s read the events of b, which holds the whole stream
// (the gate's buffer): they are parsed where they are, nothing is copied
// or allocated, and b is never written.
func (s *Reader) ResetBytes(b []byte) {
	if s.maxEvent <= 0 {
		s.maxEvent = DefaultMaxEvent
	}
	if !s.borrowed {
		s.recycle()
	}
	s.r, s.src, s.buf, s.borrowed, s.onSmall = nil, nil, b, true, false
	s.start, s.scan, s.end, s.seen, s.last, s.full = 0, 0, len(b), 0, -1, false
	s.cr, s.crTo = 0, 0
	s.err = io.EOF
	s.crLF = false
	s.resetEvent()
}

func (s *Reader) resetEvent() {
	s.fields, s.hasName = false, false
	s.nameOff, s.nameLen = 0, 0
	s.dataN, s.dataOff, s.dataLen = 0, 0, 0
	s.scratch = s.scratch[:0]
}

// Next returns the next event. It returns io.EOF when the stream ends at an
// event boundary (only blank lines or whitespace after the last event),
// io.ErrUnexpectedEOF when it ends inside an event (the partial event is
// dropped), errEventTooLarge when an event exceeds maxEvent, and read
// errors wrapped. Errors are sticky.
func (s *Reader) Next() (Event, error) {
	if s.src != nil {
		return s.nextFromSource()
	}
	if s.err != nil && s.start == s.end {
		return Event{}, s.finalErr()
	}
	for {
		var ev Event
		if s.parse(&ev) {
			if len(ev.Raw) > s.maxEvent {
				s.fail(ErrEventTooLarge)
				return Event{}, ErrEventTooLarge
			}
			return ev, nil
		}
		if s.end-s.start > s.maxEvent {
			s.fail(ErrEventTooLarge)
			return Event{}, ErrEventTooLarge
		}
		if s.err != nil {
			return Event{}, s.finalErr()
		}
		s.fill()
	}
}

// fail makes err the sticky result of every later Next call.
func (s *Reader) fail(err error) {
	s.err = err
	s.start, s.scan, s.end, s.seen, s.last = 0, 0, 0, 0, -1
	s.cr, s.crTo = 0, 0
	s.resetEvent()
}

// finalErr turns the read error that ended the stream into Next's result,
// once every complete event before it has been returned.
func (s *Reader) finalErr() error {
	err := s.err
	if err == io.EOF && !onlyWhitespace(s.buf[s.start:s.end]) {
		err = io.ErrUnexpectedEOF
	}
	s.fail(err)
	return err
}

func onlyWhitespace(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return false
		}
	}
	return true
}

// parse splits the unscanned bytes into lines and reports whether they
// complete an event, set in *ev (filled in place: an Event returned
// through each call costs more than the parse of its lines).
func (s *Reader) parse(ev *Event) bool {
	buf := s.buf[:s.end]
	for s.scan < len(buf) {
		if s.crLF {
			s.crLF = false
			if buf[s.scan] == '\n' {
				s.scan++
				continue
			}
		}
		lineStart := s.scan
		from := max(lineStart, s.seen)
		lineEnd, next := -1, -1
		if i := bytes.IndexByte(buf[from:], '\n'); i >= 0 {
			i += from
			if j := s.nextCR(from); j >= 0 && j < i {
				lineEnd, next = j, j+1
				if next == i {
					next++
				}
			} else {
				lineEnd, next = i, i+1
			}
		} else if j := s.nextCR(from); j >= 0 {
			lineEnd, next = j, j+1
			if next == len(buf) {
				// Whether a '\n' follows is not known yet; the line is
				// complete either way, so do not wait for it.
				s.crLF = true
			}
		} else {
			s.seen = len(buf)
			return false // a partial line: wait for more
		}
		s.scan = next
		if lineEnd == lineStart {
			if !s.fields {
				continue // a stray blank line: it joins the next event's Raw
			}
			s.dispatch(buf, next, ev)
			return true
		}
		s.line(buf, lineStart, lineEnd)
	}
	return false
}

// nextCR returns the first '\r' in buf[from:end], or -1. from never goes
// back between the resets of the buffer's positions, so a '\r' found
// before stays the first until the parser passes it, and a search that
// found none is carried on from where it stopped.
func (s *Reader) nextCR(from int) int {
	if c := s.cr - 1; c >= from {
		return c
	}
	if s.cr == 0 && s.crTo >= from {
		if s.crTo == s.end {
			return -1
		}
		from = s.crTo
	}
	s.cr, s.crTo = 0, s.end
	if i := bytes.IndexByte(s.buf[from:s.end], '\r'); i >= 0 {
		s.cr = from + i + 1
	}
	return s.cr - 1
}

// line applies one non-blank line of the current event.
func (s *Reader) line(buf []byte, from, to int) {
	s.fields = true
	line := buf[from:to]
	if line[0] == ':' {
		return // a comment
	}
	field, value := line, line[len(line):]
	valueOff := to
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		field = line[:i]
		valueOff = from + i + 1
		if valueOff < to && buf[valueOff] == ' ' {
			valueOff++
		}
		value = buf[valueOff:to]
	}
	switch string(field) {
	case "data":
		s.dataN++
		switch s.dataN {
		case 1:
			s.dataOff, s.dataLen = valueOff-s.start, len(value)
		case 2:
			first := buf[s.start+s.dataOff : s.start+s.dataOff+s.dataLen]
			s.scratch = append(s.scratch[:0], first...)
			fallthrough
		default:
			s.scratch = append(s.scratch, '\n')
			s.scratch = append(s.scratch, value...)
		}
	case "event":
		s.hasName = true
		s.nameOff, s.nameLen = valueOff-s.start, len(value)
	}
}

// dispatch sets *ev to the current event, which ends at next, and starts
// the following one.
func (s *Reader) dispatch(buf []byte, next int, ev *Event) {
	*ev = Event{Raw: buf[s.start:next:next]} // capped: appending must not clobber the next event
	s.last = s.start
	if s.hasName {
		off := s.start + s.nameOff
		ev.Name = buf[off : off+s.nameLen : off+s.nameLen]
	}
	switch {
	case s.dataN == 1:
		off := s.start + s.dataOff
		ev.Data = buf[off : off+s.dataLen : off+s.dataLen]
	case s.dataN > 1:
		ev.Data = s.scratch
	}
	s.start = next
	s.resetEvent()
}
