// Package jsontest holds what tests of the JSON readers share: a mutator
// that turns a valid document into the near misses a fast reader must
// reject or read exactly as the slow one does.
package jsontest

import "math/rand/v2"

// Mutate returns a copy of doc with one random edit: cut at a random
// offset, or a byte there replaced, deleted, or inserted before it (the
// new bytes drawn from alphabet, which should hold JSON's punctuation and
// the letters of the keys under test).
func Mutate(rng *rand.Rand, doc []byte, alphabet string) []byte {
	b := append([]byte(nil), doc...)
	i := rng.IntN(len(b) + 1)
	c := alphabet[rng.IntN(len(alphabet))]
	switch rng.IntN(4) {
	case 0:
		return b[:i]
	case 1:
		if i < len(b) {
			b[i] = c
		}
		return b
	case 2:
		if i < len(b) {
			return append(b[:i], b[i+1:]...)
		}
		return b
	}
	return append(b[:i], append([]byte{c}, b[i:]...)...)
}
