//go:build !amd64 || purego

package jsonscan

import "math"

// stringBlocks is false without the AVX2 kernel (strmask_amd64.s).
var stringBlocks = false

// scanStringBlocks is not reached without the kernel (jsonScanString
// gives scanWords no stop); it reads on with the words.
func scanStringBlocks(b []byte, i int, escaped bool) (end int, _ bool) {
	end, esc, _ := scanWords(b, i, math.MaxInt)
	return end, escaped || esc
}

// specialMask64 is not reached without the kernel (skipper.str reads the
// blocks only when stringBlocks is set).
func specialMask64(p *byte) uint64 { panic("jsonscan: no AVX2 kernel") }
