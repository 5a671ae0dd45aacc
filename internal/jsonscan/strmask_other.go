//go:build !amd64 || purego

package jsonscan

// stringBlocks is false without the AVX2 kernel (strmask_amd64.s).
var stringBlocks = false

func scanStringBlocks(b []byte, i int) (end int, escaped bool) {
	return scanStringSWAR(b, i)
}
