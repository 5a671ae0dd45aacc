package cloud

import (
	"encoding/binary"
	"hash/crc32"
)

// The event stream's CRC-32 (IEEE). hash/crc32 hands a piece under 64
// bytes, and what is left under 16 after its carry-less multiply, to a
// loop that takes one byte at a time: that is a frame's 8-byte prelude
// and the tail of its message, about a third of the checksum's time
// for the small frames a stream is made of. Those pieces go eight bytes
// at a step here (slicing-by-8, hash/crc32's own method where it has no
// carry-less multiply), the rest to hash/crc32.

// crcTables are the slicing-by-8 tables of the IEEE polynomial.
var crcTables = func() *[8][256]uint32 {
	var t [8][256]uint32
	for i := range 256 {
		crc := uint32(i)
		for range 8 {
			if crc&1 == 1 {
				crc = crc>>1 ^ crc32.IEEE
			} else {
				crc >>= 1
			}
		}
		t[0][i] = crc
	}
	for i := range 256 {
		crc := t[0][i]
		for j := 1; j < 8; j++ {
			crc = t[0][crc&0xff] ^ crc>>8
			t[j][i] = crc
		}
	}
	return &t
}()

// crcUpdate is crc32.Update(crc, crc32.IEEETable, p).
func crcUpdate(crc uint32, p []byte) uint32 {
	if len(p) >= 64 {
		cut := len(p) &^ 15 // all of it through the carry-less multiply
		crc = crc32.Update(crc, crc32.IEEETable, p[:cut])
		p = p[cut:]
	}
	t := crcTables
	crc = ^crc
	for len(p) >= 8 {
		crc ^= binary.LittleEndian.Uint32(p)
		crc = t[0][p[7]] ^ t[1][p[6]] ^ t[2][p[5]] ^ t[3][p[4]] ^
			t[4][crc>>24] ^ t[5][(crc>>16)&0xff] ^ t[6][(crc>>8)&0xff] ^ t[7][crc&0xff]
		p = p[8:]
	}
	for _, v := range p {
		crc = t[0][byte(crc)^v] ^ crc>>8
	}
	return ^crc
}
