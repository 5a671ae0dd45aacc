package jsonscan

import (
	"encoding/binary"
	"math/bits"
)

// Strings are most of what the proxy validates: an agent's request is
// 97% string bytes (its system prompt, tool schemas, file contents and
// tool results), with an escape every 26 bytes on average (each newline
// of the code it quotes is one). Reading them escape by escape costs a
// mispredicted branch at each: about 65 µs per 142 KB body, the largest
// cost the proxy adds to such a request. Where the CPU has AVX2 the
// string is read 64 bytes at a time instead (strmask_amd64.s), as masks
// (one bit per byte for each kind of byte that matters), and its escapes
// are found and checked with arithmetic on those masks, as simdjson does:
// no branch per escape.

// jsonScanString returns the index past the string whose opening quote is
// at b[i] (or -1 when there is no valid string there) and whether it holds
// an escape.
func jsonScanString(b []byte, i int) (end int, escaped bool) {
	if stringBlocks {
		return scanStringBlocks(b, i)
	}
	return scanStringSWAR(b, i)
}

// scanStringSWAR is jsonScanString eight bytes at a time: each word is
// checked for a quote, a backslash or a control character (the lowest
// flagged byte of each test is exact, so the lowest of the three is the
// first special byte), and every escape is read byte by byte.
func scanStringSWAR(b []byte, i int) (end int, escaped bool) {
	i++
	for i < len(b) {
		for len(b)-i >= 8 {
			x := binary.LittleEndian.Uint64(b[i:])
			q := x ^ (swarOnes * '"')
			s := x ^ (swarOnes * '\\')
			t := (x-swarOnes*0x20)&^x | (q-swarOnes)&^q | (s-swarOnes)&^s
			if t &= swarHigh; t != 0 {
				i += bits.TrailingZeros64(t) >> 3
				break
			}
			i += 8
		}
		if i >= len(b) {
			return -1, false
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, escaped
		case c < 0x20:
			return -1, false
		case c != '\\':
			i++
			continue
		}
		escaped = true
		if i+1 >= len(b) {
			return -1, false
		}
		switch b[i+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i += 2
		case 'u':
			if jsonHex4(b[i+2:]) < 0 {
				return -1, false
			}
			i += 6
		default:
			return -1, false
		}
	}
	return -1, false
}
