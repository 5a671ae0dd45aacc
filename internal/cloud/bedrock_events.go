package cloud

// The Bedrock event stream as a source of whole events (sse.Source): the
// reader takes each frame's event as next wrote it, without copying it
// into its buffer and scanning it for line ends again (issue 24).

import (
	"bytes"
	"io"

	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
)

// NextEvent returns the next frame's event, with its Name and Data read
// from the layout next wrote it in, as the SSE parser would read them from
// its Raw. It is valid until the next call. Errors are Read's.
func (s *bedrockStream) NextEvent() (sse.Event, error) {
	if s.bedrockBufs == nil {
		return sse.Event{}, errReadAfterClose
	}
	s.out, s.off = s.out[:0], 0
	for len(s.out) == 0 && s.err == nil { // a frame may carry nothing for the client
		s.err = s.next()
	}
	if len(s.out) == 0 {
		if s.err == io.EOF {
			s.ended.Store(true)
		}
		return sse.Event{}, s.err
	}
	ev := sse.Event{Raw: s.out[:len(s.out):len(s.out)]}
	data := 0 // where the first data line's value starts
	if s.name > 0 {
		const field = len("event: ")
		ev.Name = s.out[field : field+s.name : field+s.name]
		data = field + s.name + 1
	}
	data += len("data: ")
	if !s.lines {
		end := len(s.out) - 2 // the blank line
		ev.Data = s.out[data:end:end]
	} else {
		ev.Data = joinDataLines(s.data[:0], s.out[data:len(s.out)-1])
		s.data = ev.Data
	}
	s.off = len(s.out)
	return ev, nil
}

// joinDataLines is what the parser makes of the data lines appendSSE wrote
// (rest is the first line's value and every line after it, each ending in
// '\n'): the values joined with '\n'.
func joinDataLines(b, rest []byte) []byte {
	for {
		i := bytes.IndexByte(rest, '\n')
		b = append(b, rest[:i]...)
		rest = rest[i+1:]
		if len(rest) == 0 {
			return b
		}
		b = append(b, '\n')
		rest = rest[len("data: "):]
	}
}

// Ready reports whether NextEvent returns without waiting on the network:
// the next frame has arrived whole.
func (s *bedrockStream) Ready() bool {
	return s.bedrockBufs != nil && s.frameReceived()
}
