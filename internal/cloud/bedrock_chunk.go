package cloud

// The conversion of Bedrock's chunk frames to Anthropic SSE, on the relay
// path of every bedrock-stream event (issue 24).

import (
	"bytes"
	"encoding/base64"
	"slices"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
)

// chunkHead is how Bedrock writes a chunk's payload: bytes first.
var chunkHead = []byte(`{"bytes":"`)

// decodeChunk decodes a payload that starts as Bedrock writes it: the
// string up to the next quote decodes as base64 only if it holds nothing
// but the alphabet and line ends (refused), so no escape: it is the value
// a lookup of "bytes" finds. Anything else returns false, for the lookup to decide.
func (s *bedrockStream) decodeChunk(payload []byte) ([]byte, bool) {
	if !bytes.HasPrefix(payload, chunkHead) {
		return nil, false
	}
	b64 := payload[len(chunkHead):]
	end := bytes.IndexByte(b64, '"')
	if end < 0 {
		return nil, false
	}
	ev := slices.Grow(s.ev[:0], base64.StdEncoding.DecodedLen(end))
	ev = ev[:cap(ev)]
	n, err := base64.StdEncoding.Decode(ev, b64[:end])
	// The decoder skips line ends, which a JSON string cannot hold: with
	// any, the bytes decoded are fewer than the string's length makes.
	if err != nil || n != paddedDecodedLen(b64[:end]) {
		return nil, false
	}
	return ev[:n], true
}

// paddedDecodedLen is the length of what s decodes to as padded base64
// holding only the alphabet and its padding, or -1 when no such string is
// that long. With line ends skipped the decoder reads at least four
// characters fewer, so it decodes fewer bytes.
func paddedDecodedLen(s []byte) int {
	if len(s)%4 != 0 {
		return -1
	}
	n := len(s) / 4 * 3
	for i := len(s) - 1; i >= len(s)-2 && i >= 0 && s[i] == '='; i-- {
		n--
	}
	return n
}

// indexLineEnd is bytes.IndexAny(data, "\r\n") with two vectorized
// searches: compact JSON has neither, so both run to the end.
func indexLineEnd(data []byte) int {
	i := bytes.IndexByte(data, '\n')
	if i < 0 {
		return bytes.IndexByte(data, '\r')
	}
	if j := bytes.IndexByte(data[:i], '\r'); j >= 0 {
		return j
	}
	return i
}

// typeHead is how Anthropic writes an event: its type first.
var typeHead = []byte(`{"type":`)

// eventType is jsonscan.Lookup(ev, "type"), which returns the first
// member of that name: when ev starts with it and its value is a string,
// that string is the answer without opening the object.
func eventType(ev []byte) ([]byte, bool) {
	if bytes.HasPrefix(ev, typeHead) {
		if end := jsonscan.StringEnd(ev, len(typeHead)); end > 0 {
			return ev[len(typeHead):end], true
		}
	}
	return jsonscan.Lookup(ev, "type")
}
