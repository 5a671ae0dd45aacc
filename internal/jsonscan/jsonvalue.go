package jsonscan

import (
	"bytes"
	"math"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Reading the keys and values the scanner (jsonscan.go) finds.

// keyIs reports whether the current member's key is the ASCII name want.
func (it *Iter) KeyIs(want string) bool {
	if string(it.Key) == want {
		return true
	}
	return it.keyEsc && KeyIs(it.Key, want)
}

// jsonKeyIs compares a raw object key with an ASCII name, decoding escapes
// (a key spelled "con\u0074ent" is "content").
func KeyIs(key []byte, want string) bool {
	if string(key) == want {
		return true
	}
	if len(key) <= len(want) || bytes.IndexByte(key, '\\') < 0 {
		return false
	}
	j := 0
	for i := 0; i < len(key); {
		c := key[i]
		i++
		if c == '\\' {
			if i >= len(key) {
				return false
			}
			e := key[i]
			i++
			switch e {
			case 'b':
				c = '\b'
			case 'f':
				c = '\f'
			case 'n':
				c = '\n'
			case 'r':
				c = '\r'
			case 't':
				c = '\t'
			case 'u':
				r := jsonHex4(key[i:])
				i += 4
				if r < 0 || r >= 0x80 {
					return false // want is ASCII
				}
				c = byte(r)
			default:
				c = e
			}
		}
		if j >= len(want) || want[j] != c {
			return false
		}
		j++
	}
	return j == len(want)
}

// keyFold reports whether the current member's key names want (ASCII
// lower-case letters) as encoding/json matches a key to a struct field.
func (it *Iter) KeyFold(want string) bool {
	if !it.keyEsc && len(it.Key) == len(want) {
		for i, c := range it.Key {
			// want holds only letters: c|0x20 folds an upper-case
			// letter, and nothing else lands on a lower-case one.
			if c|0x20 != want[i] {
				return false
			}
		}
		return true
	}
	return jsonKeyFold(it.Key, want)
}

// jsonKeyFold compares a raw object key with want (ASCII lower-case
// letters) the way encoding/json matches a key to a field name: escapes
// decoded, invalid UTF-8 and lone surrogates read as U+FFFD, then simple
// Unicode case folding, so "MODEL", "mod\u0065l" and "\u017ftream" (the
// long s folds to s; the Kelvin sign to k) all match.
func jsonKeyFold(key []byte, want string) bool {
	j := 0
	for i := 0; i < len(key); {
		r, n := jsonKeyRune(key[i:])
		if j >= len(want) || foldRuneASCII(r) != rune(want[j]) {
			return false
		}
		i += n
		j++
	}
	return j == len(want)
}

// jsonKeyRune decodes the first character of a raw (validated) JSON string
// body as encoding/json does; n is the bytes it takes.
func jsonKeyRune(s []byte) (r rune, n int) {
	switch c := s[0]; {
	case c < utf8.RuneSelf && c != '\\':
		return rune(c), 1
	case c >= utf8.RuneSelf:
		return utf8.DecodeRune(s) // invalid UTF-8 is U+FFFD, one byte
	case len(s) < 2:
		return utf8.RuneError, 1
	}
	switch e := s[1]; e {
	case 'u':
		return jsonDecodeU(s)
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	default:
		return rune(e), 2
	}
}

// foldRuneASCII maps r to the lower-case ASCII letter of its case-fold
// class, as encoding/json's fold (the smallest rune of the class) does, or
// to -1 when the class has no ASCII letter.
func foldRuneASCII(r rune) rune {
	if r < utf8.RuneSelf {
		if 'A' <= r && r <= 'Z' {
			r += 'a' - 'A'
		}
		return r
	}
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f < utf8.RuneSelf {
			return foldRuneASCII(f)
		}
	}
	return -1
}

// jsonLookup returns the raw value at the path of object keys inside the
// JSON value b.
func Lookup(b []byte, path ...string) ([]byte, bool) {
	if len(path) == 0 {
		return b, true
	}
	it, ok := Open(b, 0, 0)
	for ok && it.IsObject() && it.Next() {
		if !it.KeyIs(path[0]) {
			continue
		}
		if path = path[1:]; len(path) == 0 {
			v := it.Value()
			return v, v != nil
		}
		if it, ok = it.Enter(); !ok {
			return nil, false
		}
	}
	return nil, false
}

// jsonIsNull reports whether a raw value is the literal null.
func IsNull(v []byte) bool { return string(v) == "null" }

// jsonNonEmpty reports whether a raw value carries something: a non-empty
// string, array or object, or any number or boolean.
func NonEmpty(v []byte) bool {
	if len(v) == 0 || IsNull(v) {
		return false
	}
	switch v[0] {
	case '"':
		return len(v) > 2
	case '[', '{':
		it, _ := Open(v, 0, 0)
		return it.Next()
	}
	return true
}

// jsonIsString reports whether a raw value is a string.
func IsString(v []byte) bool { return len(v) >= 2 && v[0] == '"' }

// jsonAppendString appends the decoded text of the raw JSON string v
// (quotes included, already validated) to dst.
func AppendString(dst, v []byte) []byte {
	if len(v) < 2 || v[0] != '"' {
		return dst
	}
	s := v[1 : len(v)-1]
	for len(s) > 0 {
		i := bytes.IndexByte(s, '\\')
		if i < 0 {
			return append(dst, s...)
		}
		dst = append(dst, s[:i]...)
		s = s[i:]
		if len(s) < 2 {
			return dst
		}
		switch e := s[1]; e {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, n := jsonDecodeU(s)
			dst = utf8.AppendRune(dst, r)
			s = s[n:]
			continue
		default:
			dst = append(dst, e)
		}
		s = s[2:]
	}
	return dst
}

// jsonDecodeU decodes the \uXXXX escape (with its low surrogate, if any)
// at the start of s; n is the bytes consumed. Like encoding/json, a lone
// surrogate becomes U+FFFD.
func jsonDecodeU(s []byte) (r rune, n int) {
	r = jsonHex4(s[2:])
	if r < 0 {
		return utf8.RuneError, min(len(s), 6)
	}
	if utf16.IsSurrogate(r) {
		if len(s) >= 12 && s[6] == '\\' && s[7] == 'u' {
			if d := utf16.DecodeRune(r, jsonHex4(s[8:])); d != utf8.RuneError {
				return d, 12
			}
		}
		return utf8.RuneError, 6
	}
	return r, 6
}

// jsonInt reads a raw JSON number as an int64 (a fraction is truncated);
// ok is false for anything else or out of range.
func Int(v []byte) (int64, bool) {
	if len(v) == 0 || jsonSkipNumber(v, 0) != len(v) {
		return 0, false
	}
	i := 0
	neg := v[0] == '-'
	if neg {
		i++
	}
	var n int64
	for ; i < len(v) && v[i] >= '0' && v[i] <= '9'; i++ {
		if n > (math.MaxInt64-9)/10 {
			return 0, false
		}
		n = n*10 + int64(v[i]-'0')
	}
	if i < len(v) { // a fraction or an exponent: rare enough for ParseFloat
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil || f >= math.MaxInt64 || f <= math.MinInt64 {
			return 0, false
		}
		return int64(f), true
	}
	if neg {
		n = -n
	}
	return n, true
}

// jsonStringIs reports whether the raw value v is the JSON string want.
func StringIs(v []byte, want string) bool {
	return len(v) >= 2 && v[0] == '"' && KeyIs(v[1:len(v)-1], want)
}

// OffsetOf returns where sub, a slice of data, starts in it; -1 when it
// is not one.
func OffsetOf(data, sub []byte) int {
	at := cap(data) - cap(sub)
	if len(sub) == 0 || at < 0 || at+len(sub) > len(data) || &data[at] != &sub[0] {
		return -1
	}
	return at
}
