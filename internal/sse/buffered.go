package sse

// Buffered returns the next event when the bytes already read complete
// one, without reading (ok false: Next would read, or the stream ended or
// failed; Next then reports it). A reader that turns events into other
// bytes (a translation) takes a whole burst this way before its reader
// reads again, so the burst reaches the client in one write.
func (s *Reader) Buffered() (Event, bool) {
	if s.err != nil && s.start == s.end {
		return Event{}, false
	}
	var ev Event
	ok := s.parse(&ev)
	if ok && len(ev.Raw) > s.maxEvent {
		s.fail(ErrEventTooLarge)
		return Event{}, false
	}
	return ev, ok
}
