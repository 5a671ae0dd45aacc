package jsonscan

import (
	"encoding/binary"
	"math"
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
	stop := math.MaxInt
	if stringBlocks {
		stop = i + 1 + wordsFirst
	}
	end, escaped, at := scanWords(b, i+1, stop)
	if end != 0 {
		return end, escaped
	}
	return scanStringBlocks(b, at, escaped)
}

// wordsFirst is how far into a string the word scanner reads before the
// blocks take over: most strings (keys, ids, an event's values) end
// sooner, and for them the words cost less than a block; the blocks pay
// for themselves on a long string's escapes.
const wordsFirst = 64

// scanWords reads the inside of a string from b[i], eight bytes at a
// time: each word is checked for a quote, a backslash or a control
// character (the lowest flagged byte of each test is exact, so the lowest
// of the three is the first special byte), and every escape is read byte
// by byte. It returns the index past the closing quote, or -1 when the
// string is invalid; or, when it meets a special byte at or past stop with
// the string still open (an escape, say: stop is looked at only between
// them), 0 and the index of that byte.
func scanWords(b []byte, i, stop int) (end int, escaped bool, at int) {
	for i < len(b) {
		if i >= stop {
			return 0, escaped, i
		}
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
			return -1, false, 0
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, escaped, 0
		case c < 0x20:
			return -1, false, 0
		case c != '\\':
			i++
			continue
		}
		escaped = true
		if i+1 >= len(b) {
			return -1, false, 0
		}
		switch b[i+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i += 2
		case 'u':
			if jsonHex4(b[i+2:]) < 0 {
				return -1, false, 0
			}
			i += 6
		default:
			return -1, false, 0
		}
	}
	return -1, false, 0
}
