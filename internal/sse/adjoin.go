package sse

// Adjoin returns span and raw as one slice of the reader's buffer when raw
// is the Raw of the event Next just returned and span, unless empty, is
// the events it returned right before, all since the reader last read (or
// ran BeforeFill): a burst of events relayed unchanged is written as it
// was read, without copying it. Otherwise it reports false. The slice is
// valid until the next read, as the events are.
func (s *Reader) Adjoin(span, raw []byte) ([]byte, bool) {
	at := s.last
	if at < 0 || len(raw) == 0 || at+len(raw) > len(s.buf) || &raw[0] != &s.buf[at] {
		return nil, false
	}
	from := at - len(span)
	if len(span) > 0 && (from < 0 || &span[0] != &s.buf[from]) {
		return nil, false
	}
	end := at + len(raw)
	return s.buf[from:end:end], true
}
