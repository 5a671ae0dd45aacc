package cloud

// The Bedrock event stream read back as Anthropic SSE: frames decoded,
// each chunk's event written as an SSE event (bedrock_chunk.go has the
// fast path of its payload).

import (
	"bufio"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// bedrockStream reads AWS event-stream frames and yields the Anthropic SSE
// they carry: each `chunk` event's base64 `bytes` is one Anthropic event
// JSON, written as `event: <its type>` and `data: <the JSON>`. An exception
// frame ends the stream with a *streamFault classed like its HTTP status.
type bedrockStream struct {
	r io.ReadCloser
	*bedrockBufs
	prelude [12]byte
	off     int
	err     error
	// The layout of the last event next wrote at the start of out
	// (NextEvent): the length of its name, and whether its data took
	// several lines.
	name  int
	lines bool
	ended atomic.Bool // Read returned the end of the stream
}

// bedrockBufs are a stream's buffers. A stream read to its end gives them
// back to a pool when it is closed (no Read can be running then); one
// closed early, perhaps while another goroutine reads it, leaves them to
// the collector.
type bedrockBufs struct {
	br    *bufio.Reader // r, and what has arrived of it
	frame []byte        // the current frame's buffer, reused
	ev    []byte        // the decoded chunk's buffer, reused
	out   []byte        // SSE not yet read
	data  []byte        // NextEvent's data of several lines, joined
}

var errReadAfterClose = errors.New("bedrock event stream: read after close")

var bedrockPool = sync.Pool{New: func() any { return &bedrockBufs{br: bufio.NewReader(nil)} }}

// bedrockBatch bounds the SSE one Read decodes from frames already received.
const bedrockBatch = 16 << 10

func NewBedrockStream(r io.ReadCloser) *bedrockStream {
	b := bedrockPool.Get().(*bedrockBufs)
	b.br.Reset(r)
	b.frame, b.ev, b.out, b.data = b.frame[:0], b.ev[:0], b.out[:0], b.data[:0]
	return &bedrockStream{r: r, bedrockBufs: b}
}

func (s *bedrockStream) Close() error {
	if s.ended.Load() && s.bedrockBufs != nil {
		b := s.bedrockBufs
		s.bedrockBufs = nil
		b.br.Reset(nil)
		if cap(b.out) > 2*bedrockBatch {
			b.out = nil
		}
		bedrockPool.Put(b)
	}
	return s.r.Close()
}

// Read returns the SSE of the next frame and of every further frame
// already received whole: the reader gets a burst in one read, and the
// relay flushes it to the client once, as it does for an SSE upstream.
func (s *bedrockStream) Read(p []byte) (int, error) {
	if s.bedrockBufs == nil {
		return 0, errReadAfterClose
	}
	if s.off == len(s.out) {
		s.out, s.off = s.out[:0], 0
		for len(s.out) == 0 && s.err == nil { // a frame may carry nothing for the client
			s.err = s.next()
		}
		for s.err == nil && len(s.out) < bedrockBatch && s.frameReceived() {
			s.err = s.next()
		}
		if len(s.out) == 0 {
			if s.err == io.EOF {
				s.ended.Store(true)
			}
			return 0, s.err
		}
	}
	n := copy(p, s.out[s.off:])
	s.off += n
	return n, nil
}

// frameReceived reports whether the next frame is whole in the buffer, so
// decoding it does not wait for the network.
func (s *bedrockStream) frameReceived() bool {
	n := s.br.Buffered()
	if n < 4 {
		return false
	}
	b, _ := s.br.Peek(4)
	return uint64(n) >= uint64(binary.BigEndian.Uint32(b))
}

// next decodes one frame into s.out, or returns the error that ends the stream.
func (s *bedrockStream) next() error {
	msg, err := s.Decode()
	switch {
	case err == nil:
	case err == io.EOF:
		return io.EOF // at a frame boundary
	case errors.Is(err, io.ErrUnexpectedEOF):
		return io.ErrUnexpectedEOF // inside a frame
	case isStreamFault(err): // a malformed frame
		return err
	default:
		return fmt.Errorf("bedrock event stream: %w", err)
	}
	switch string(msg.MessageType) {
	case "exception":
		return bedrockException(string(msg.ExceptionType), msg.Payload)
	case "error":
		return bedrockException(string(msg.ErrorCode), []byte(`{"message":`+JsonQuote(string(msg.ErrorMessage))+`}`))
	case "event", "":
	default:
		return fmt.Errorf("bedrock event stream: unknown message type %q", msg.MessageType)
	}
	if string(msg.EventType) != "chunk" {
		return nil // not an answer event: nothing for the client
	}
	ev, ok := s.decodeChunk(msg.Payload)
	if !ok {
		b64, ok := jsonscan.Lookup(msg.Payload, "bytes")
		if !ok || len(b64) < 2 || b64[0] != '"' {
			return &StreamFault{wire.ClassMalformed, "bedrock chunk without bytes"}
		}
		ev = slices.Grow(s.ev[:0], base64.StdEncoding.DecodedLen(len(b64)-2))
		ev = ev[:cap(ev)]
		n, err := base64.StdEncoding.Decode(ev, b64[1:len(b64)-1])
		if err != nil {
			return &StreamFault{wire.ClassMalformed, "bedrock chunk: bytes are not base64"}
		}
		ev = ev[:n]
	}
	s.ev = ev
	var name []byte
	if t, ok := eventType(ev); ok {
		if plainJSONString(t) {
			name = t[1 : len(t)-1] // as Unmarshal would give it, without its allocations
		} else if v := ""; json.Unmarshal(t, &v) == nil && !strings.ContainsAny(v, "\r\n") {
			name = []byte(v)
		}
	}
	s.out, s.lines = appendSSE(s.out, name, ev)
	s.name = len(name)
	return nil
}

// plainJSONString reports whether t is a JSON string of printable ASCII
// without escapes: its value is the bytes between the quotes.
func plainJSONString(t []byte) bool {
	if len(t) < 2 || t[0] != '"' || t[len(t)-1] != '"' {
		return false
	}
	for _, c := range t[1 : len(t)-1] {
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// appendSSE writes one event; data lines split where the JSON has line ends
// (it has none unless pretty-printed: lines reports them).
func appendSSE(b []byte, name []byte, data []byte) (_ []byte, lines bool) {
	if len(name) > 0 {
		b = append(b, "event: "...)
		b = append(b, name...)
		b = append(b, '\n')
	}
	for {
		i := indexLineEnd(data)
		b = append(b, "data: "...)
		if i < 0 {
			b = append(b, data...)
			break
		}
		b = append(b, data[:i]...)
		b = append(b, '\n')
		lines = true
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
	return append(b, "\n\n"...), lines
}

func isStreamFault(err error) bool {
	_, ok := err.(*StreamFault)
	return ok
}

// Limits of one event-stream frame, as the AWS SDK's decoder has them.
const (
	bedrockMaxHeaders = 128 << 10
	bedrockMaxPayload = 16 << 20
)

// bedrockFrame is one decoded event-stream frame: the values of the string
// headers the stream reads, and the payload. They alias the stream's read
// buffer or its frame buffer, valid until the next frame is read.
type bedrockFrame struct {
	MessageType, EventType, ExceptionType, ErrorCode, ErrorMessage []byte
	Payload                                                        []byte
}

// decode reads one frame whole (prelude, headers, payload, the two CRC32
// checksums) from the buffered stream, in place or into a reused buffer,
// and parses its headers there. It returns io.EOF at a frame boundary, and
// io.ErrUnexpectedEOF inside a frame.
func (s *bedrockStream) Decode() (f bedrockFrame, err error) {
	prelude := s.prelude[:]
	if _, err := io.ReadFull(s.br, prelude); err != nil {
		return f, err
	}
	total, hlen := binary.BigEndian.Uint32(prelude[:]), binary.BigEndian.Uint32(prelude[4:])
	sum := crcUpdate(0, prelude[:8])
	if sum != binary.BigEndian.Uint32(prelude[8:]) {
		return f, errors.New("prelude checksum mismatch")
	}
	if total < 16 || hlen > bedrockMaxHeaders || hlen > total-16 || total-16-hlen > bedrockMaxPayload {
		return f, fmt.Errorf("frame length %d with headers %d", total, hlen)
	}
	// The rest of the frame (headers, payload, message checksum): read in
	// place when it has arrived whole, as it has on a stream that keeps up
	// (valid until the next read of br, which is the next frame's);
	// otherwise copied into the frame buffer, grown as the bytes arrive,
	// not to the length the prelude claims.
	rest := int(total) - 12
	var b []byte
	if rest <= s.br.Buffered() {
		b, _ = s.br.Peek(rest)
		s.br.Discard(rest)
	} else {
		b = s.frame[:0]
		for len(b) < rest {
			n := min(rest-len(b), 64<<10)
			b = slices.Grow(b, n)
			if _, err := io.ReadFull(s.br, b[len(b):len(b)+n]); err != nil {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return f, err
			}
			b = b[:len(b)+n]
		}
		if cap(b) <= 64<<10 {
			s.frame = b[:0]
		}
	}
	// The message checksum covers the prelude too: it goes on from the
	// prelude's sum rather than reading those 8 bytes again.
	if crcUpdate(crcUpdate(sum, prelude[8:]), b[:rest-4]) != binary.BigEndian.Uint32(b[rest-4:]) {
		return f, errors.New("message checksum mismatch")
	}
	f.Payload = b[hlen : rest-4]
	for h := b[:hlen]; len(h) > 0; {
		nl := int(h[0])
		if len(h) < 2+nl {
			return f, &StreamFault{wire.ClassMalformed, "bedrock event stream: malformed frame header"}
		}
		name, typ := h[1:1+nl], h[1+nl]
		h = h[2+nl:]
		var n int // the value's length
		switch typ {
		case 0, 1: // bool true, false
		case 2: // byte
			n = 1
		case 3: // int16
			n = 2
		case 4: // int32
			n = 4
		case 5, 8: // int64, timestamp
			n = 8
		case 9: // uuid
			n = 16
		case 6, 7: // bytes, string: a 2-byte length first
			if len(h) < 2 {
				return f, &StreamFault{wire.ClassMalformed, "bedrock event stream: malformed frame header"}
			}
			n = 2 + int(binary.BigEndian.Uint16(h))
		default:
			return f, &StreamFault{wire.ClassMalformed, fmt.Sprintf("bedrock event stream: malformed frame: header value type %d", typ)}
		}
		if len(h) < n {
			return f, &StreamFault{wire.ClassMalformed, "bedrock event stream: malformed frame header"}
		}
		if typ == 7 {
			v := h[2:n]
			switch string(name) {
			case ":message-type":
				f.MessageType = v
			case ":event-type":
				f.EventType = v
			case ":exception-type":
				f.ExceptionType = v
			case ":error-code":
				f.ErrorCode = v
			case ":error-message":
				f.ErrorMessage = v
			}
		}
		h = h[n:]
	}
	return f, nil
}

func JsonQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
