package jsonscan

import "math/bits"

// An agent's body holds more than a thousand short strings (keys, ids,
// roles, types) between its long ones, several to every 64 bytes where
// its structure is dense. Read one by one, each paid a call into the word
// scanner, its loop and a mispredicted exit: about 13 ns, 15-19 µs of a
// 142 KB body. A skipper keeps the special bytes (quotes, backslashes,
// control characters) of the 64 bytes after the last string it read, as
// one mask from the AVX2 kernel, and a string that ends there without an
// escape is read from it: a shift and a count of trailing zeros.

// skipper is a walk of one value: its bytes, the words it notes, and the
// block of special bytes last read.
type skipper struct {
	b      []byte
	w      *Watch
	blocks bool   // inside an object or array: strings are read from blocks
	base   int    // where the block starts (noBlock: none yet)
	mask   uint64 // bit k: b[base+k] is a quote, a backslash or a control character
}

// noBlock is a base no string is within 64 bytes of.
const noBlock = -1 << 40

// str is jsonSkipString(s.b, i): from the block when the string ends in
// it with no escape, else by the scanners. A string that is the whole
// value walked (a member's value read on its own, as an event's
// inspection reads them) has no strings after it to share a block with:
// the scanners read it.
func (s *skipper) str(i int) int {
	if stringBlocks && s.blocks {
		j := i + 1
		if j-s.base >= 64 {
			if j+64 > len(s.b) {
				return jsonSkipString(s.b, i)
			}
			s.base, s.mask = j, specialMask64(&s.b[j])
		}
		m := s.mask >> uint(j-s.base)
		if m == 0 { // no special byte to the block's end: read on from there
			end, _ := scanStringBlocks(s.b, s.base+64, false)
			return end
		}
		switch k := j + bits.TrailingZeros64(m); s.b[k] {
		case '"':
			return k + 1
		case '\\': // an escape: read on from it
			end, _ := scanStringBlocks(s.b, k, true)
			return end
		default: // a control character
			return -1
		}
	}
	return jsonSkipString(s.b, i)
}
