package translate

import "unicode/utf8"

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string, escaped as encoding/json
// does (without its HTML escaping).
func appendJSONString[S string | []byte](dst []byte, s S) []byte {
	return appendEscaped(dst, s, false)
}

// appendMarshaledString appends s as encoding/json's Marshal writes a
// string (HTML escaping, \b and \f, U+2028 and U+2029 escaped, invalid
// UTF-8 as \ufffd): a hand-written event matches, byte for byte, the one
// Marshal wrote before, without its allocations.
func appendMarshaledString[S string | []byte](dst []byte, s S) []byte {
	return appendEscaped(dst, s, true)
}

// appendEscaped is both: marshal adds Marshal's HTML escaping and its
// short \b and \f.
func appendEscaped[S string | []byte](dst []byte, s S, marshal bool) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && (!marshal || c != '<' && c != '>' && c != '&') {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '\b' && marshal:
				dst = append(dst, '\\', 'b')
			case c == '\f' && marshal:
				dst = append(dst, '\\', 'f')
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			if r == utf8.RuneError {
				dst = append(dst, `\ufffd`...)
			} else {
				dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			}
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
