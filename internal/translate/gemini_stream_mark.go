package translate

import (
	"bytes"
	"encoding/json"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
)

// withStreamMember is WithGeminiStream without decoding the body into a
// map and marshalling it again (an agent's body is hundreds of
// kilobytes): the body compacted and HTML-escaped as Marshal writes each
// member's value, with "stream":true as its last member. The decoder
// reads the same members and values; only their order differs, which no
// decoder reads. ok is false, for the map's way, where the order could
// matter: a body that is not a valid object, or whose top-level keys
// repeat (as written or in another case) or are not plain ASCII.
func withStreamMember(body []byte) (out []byte, ok bool) {
	if !json.Valid(body) {
		return nil, false
	}
	var keys [24][]byte
	n, plain := 0, true
	err := jsonscan.ScanTopLevel(body, func(key []byte, _, _ int) bool {
		if n == len(keys) || !plainKey(key) {
			plain = false
			return false
		}
		for _, k := range keys[:n] {
			if bytes.EqualFold(k, key) {
				plain = false
				return false
			}
		}
		keys[n] = key
		n++
		return true
	})
	if err != nil || !plain {
		return nil, false
	}
	var buf bytes.Buffer
	buf.Grow(len(body) + len(`,"stream":true`))
	if json.Compact(&buf, body) != nil {
		return nil, false
	}
	if needsHTMLEscape(buf.Bytes()) {
		var esc bytes.Buffer
		esc.Grow(buf.Len() + 32)
		json.HTMLEscape(&esc, buf.Bytes())
		buf = esc
	}
	out = buf.Bytes()
	out = out[:len(out)-1] // the object's '}'
	if n > 0 {
		out = append(out, ',')
	}
	return append(out, `"stream":true}`...), true
}

// plainKey: a raw key (quoted) of printable ASCII without escapes.
func plainKey(key []byte) bool {
	for _, c := range key {
		if c < 0x20 || c >= 0x7f || c == '\\' {
			return false
		}
	}
	return true
}

// needsHTMLEscape reports whether compact JSON holds what Marshal escapes
// in a raw value: <, >, & and U+2028, U+2029.
func needsHTMLEscape(b []byte) bool {
	return bytes.ContainsAny(b, "<>&") || bytes.Contains(b, []byte("\u2028")) || bytes.Contains(b, []byte("\u2029"))
}
