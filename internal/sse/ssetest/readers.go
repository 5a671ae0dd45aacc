// Package ssetest holds the readers the stream tests of every package feed
// their events through: split at chosen offsets, or one event repeated.
package ssetest

import "io"

// splitReader returns its input in reads that end at the given offsets.
type SplitReader struct {
	Data  []byte
	Cuts  []int
	pos   int
	reads int
}

func (r *SplitReader) Read(p []byte) (int, error) {
	if r.pos >= len(r.Data) {
		return 0, io.EOF
	}
	end := len(r.Data)
	for _, c := range r.Cuts {
		if c > r.pos {
			end = min(end, c)
			break
		}
	}
	n := copy(p, r.Data[r.pos:end])
	r.pos += n
	r.reads++
	return n, nil
}

// anthropicDelta is a typical text delta event, the bulk of a stream.
const AnthropicDelta = "event: content_block_delta\n" +
	"data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" the quick brown fox jumps over\"}}\n\n"

// repeatReader serves one event n times, in reads of the caller's size.
type RepeatReader struct {
	Event []byte
	N     int
	off   int
	Tail  []byte // served after the repeats
}

func (r *RepeatReader) Read(p []byte) (int, error) {
	total := 0
	for len(p) > 0 && r.N > 0 {
		c := copy(p, r.Event[r.off:])
		p = p[c:]
		total += c
		r.off += c
		if r.off == len(r.Event) {
			r.off = 0
			r.N--
		}
	}
	if r.N == 0 && len(p) > 0 && len(r.Tail) > 0 {
		c := copy(p, r.Tail)
		r.Tail = r.Tail[c:]
		total += c
	}
	if total == 0 {
		return 0, io.EOF
	}
	return total, nil
}
