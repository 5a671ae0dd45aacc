//go:build amd64 && !purego

package jsonscan

import (
	"math"

	"golang.org/x/sys/cpu"
)

// stringBlocks: strings are read 64 bytes at a time, by the AVX2 kernel
// in strmask_amd64.s.
var stringBlocks = cpu.X86.HasAVX2

// specialMask64 returns the mask of the quotes, backslashes and control
// characters among the 64 bytes at p (bit k for p[k]).
//
//go:noescape
func specialMask64(p *byte) uint64

//go:noescape
func scanStringAVX2(p *byte, blocks int, prevEsc, need, seen uint64) (pos int, prevEscOut, needOut, seenOut uint64)

// scanStringBlocks reads on a string from b[i] (where scanWords stopped,
// between escapes; escaped: whether it met one), 64 bytes at a time. The
// blocks may run past the string into what follows it in b; a string
// still open within a block of b's end is read on by the words, or, after
// a block left an escape open, from a copy of b's last bytes padded with
// spaces (nothing to a string: one still open there is unterminated).
func scanStringBlocks(b []byte, i int, escaped bool) (end int, _ bool) {
	full := (len(b) - i) / 64
	if full == 0 {
		end, esc, _ := scanWords(b, i, math.MaxInt)
		return end, escaped || esc
	}
	var seen uint64
	if escaped {
		seen = 1
	}
	pos, prevEsc, need, seen := scanStringAVX2(&b[i], full, 0, 0, seen)
	switch {
	case pos >= 0:
		return i + pos + 1, seen != 0
	case pos == -1:
		return -1, false
	}
	i += full * 64
	var pad [64]byte
	for k := copy(pad[:], b[i:]); k < 64; k++ {
		pad[k] = ' '
	}
	if pos, _, _, seen := scanStringAVX2(&pad[0], 1, prevEsc, need, seen); pos >= 0 {
		return i + pos + 1, seen != 0
	}
	return -1, false
}
