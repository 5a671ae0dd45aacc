//go:build amd64 && !purego

package jsonscan

import (
	"encoding/binary"
	"math/bits"

	"golang.org/x/sys/cpu"
)

// stringBlocks: strings are read 64 bytes at a time, by the AVX2 kernel
// in strmask_amd64.s.
var stringBlocks = cpu.X86.HasAVX2

//go:noescape
func scanStringAVX2(p *byte, blocks int, prevEsc, need, seen uint64) (pos int, prevEscOut, needOut, seenOut uint64)

// scanStringBlocks is jsonScanString 64 bytes at a time. A short string
// (a key, mostly) whose closing quote is its first special byte within
// eight bytes takes one word's test instead. The blocks may run past the
// string into what follows it in b; the last bytes of b, fewer than a
// block, are read from a copy padded with spaces (nothing to a string:
// one still open there is unterminated).
func scanStringBlocks(b []byte, i int) (end int, escaped bool) {
	i++
	if len(b)-i >= 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		q := x ^ (swarOnes * '"')
		s := x ^ (swarOnes * '\\')
		t := ((x-swarOnes*0x20)&^x | (s-swarOnes)&^s) & swarHigh
		qt := (q - swarOnes) &^ q & swarHigh
		if qt != 0 && (t == 0 || bits.TrailingZeros64(qt) < bits.TrailingZeros64(t)) {
			return i + bits.TrailingZeros64(qt)>>3 + 1, false
		}
	}
	var prevEsc, need, seen uint64
	if full := (len(b) - i) / 64; full > 0 {
		var pos int
		pos, prevEsc, need, seen = scanStringAVX2(&b[i], full, 0, 0, 0)
		switch {
		case pos >= 0:
			return i + pos + 1, seen != 0
		case pos == -1:
			return -1, false
		}
		i += full * 64
	}
	var pad [64]byte
	for k := copy(pad[:], b[i:]); k < 64; k++ {
		pad[k] = ' '
	}
	if pos, _, _, seen := scanStringAVX2(&pad[0], 1, prevEsc, need, seen); pos >= 0 {
		return i + pos + 1, seen != 0
	}
	return -1, false
}
