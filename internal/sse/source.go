package sse

import (
	"io"
)

// Source is an upstream that hands over whole events itself (a Bedrock
// event stream writes each frame's event as SSE): the reader takes them as
// they come, instead of copying their bytes into its buffer and scanning
// them for line ends a second time.
type Source interface {
	// NextEvent returns the next event, its Name and Data as the parser
	// would read them from its Raw, valid until the next call. Its errors
	// are Read's: io.EOF at an event boundary.
	NextEvent() (Event, error)
	// Ready reports whether NextEvent returns without waiting on the
	// network.
	Ready() bool
}

// sourceBurst bounds the events taken from a source without a call to
// BeforeFill, as a reader's buffer bounds a burst it reads at once.
const sourceBurst = 16 << 10

// nextFromSource is Next for a Source: BeforeFill runs when the next
// event may have to wait (or a long burst was taken), and errors are the
// parser's: wrapped unless io.EOF, sticky, and an event over the bound
// is errEventTooLarge.
func (s *Reader) nextFromSource() (Event, error) {
	if s.err != nil {
		return Event{}, s.err
	}
	if s.BeforeFill != nil && (s.burst >= sourceBurst || !s.src.Ready()) {
		s.burst = 0
		s.BeforeFill(false)
	}
	ev, err := s.src.NextEvent()
	switch {
	case err == io.EOF:
		s.err = err
		return Event{}, err
	case err != nil:
		s.err = readError(err)
		return Event{}, s.err
	case len(ev.Raw) > s.maxEvent:
		s.err = ErrEventTooLarge
		return Event{}, ErrEventTooLarge
	}
	s.burst += len(ev.Raw)
	return ev, nil
}
