package cloud

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// crcUpdate is hash/crc32's IEEE update, for every length a frame's
// pieces have and from any running sum.
func TestCRCUpdate(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, 600)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	for n := 0; n <= len(b); n++ {
		for _, start := range []uint32{0, 0xffffffff, rng.Uint32()} {
			if got, want := crcUpdate(start, b[:n]), crc32.Update(start, crc32.IEEETable, b[:n]); got != want {
				t.Fatalf("%d bytes from %#x: %#x, hash/crc32 %#x", n, start, got, want)
			}
		}
	}
}

func BenchmarkCRCFrame(b *testing.B) {
	frame := make([]byte, 290)
	for b.Loop() {
		sum := crcUpdate(0, frame[:8])
		_ = crcUpdate(sum, frame[8:])
	}
}

func BenchmarkCRCFrameStdlib(b *testing.B) {
	frame := make([]byte, 290)
	for b.Loop() {
		sum := crc32.ChecksumIEEE(frame[:8])
		_ = crc32.Update(sum, crc32.IEEETable, frame[8:])
	}
}
