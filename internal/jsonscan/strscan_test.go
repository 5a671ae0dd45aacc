package jsonscan

import (
	"math/rand/v2"
	"os"
	"testing"
)

// agreeScanners fails t when the block scanner and the word scanner
// disagree on the string at b[i].
func agreeScanners(t *testing.T, b []byte, i int) {
	t.Helper()
	if !stringBlocks {
		t.Skip("no AVX2: the word scanner is the only one")
	}
	e1, x1 := scanStringBlocks(b, i)
	e2, x2 := scanStringSWAR(b, i)
	if e1 != e2 || e1 >= 0 && x1 != x2 {
		t.Fatalf("string at %d of %q: blocks %d %v, words %d %v", i, b, e1, x1, e2, x2)
	}
}

// Every string of up to five bytes from the bytes that matter, at every
// offset across a block's end: the escapes and their runs of backslashes
// split between two blocks are where the mask arithmetic can go wrong.
func TestStringScannersAgreeAtBlockEdges(t *testing.T) {
	alphabet := []byte("\"\\ua0n\x01")
	var rec func(s []byte)
	rec = func(s []byte) {
		for _, lead := range []int{0, 1, 7, 8, 40, 56, 59, 60, 61, 62, 63, 64, 120, 126, 127} {
			b := make([]byte, 0, lead+len(s)+8)
			b = append(b, '"')
			for range lead {
				b = append(b, 'x')
			}
			b = append(b, s...)
			agreeScanners(t, b, 0)
			agreeScanners(t, append(b, `0123"`...), 0)
			agreeScanners(t, append(b, `"`...), 0)
		}
		if len(s) == 5 {
			return
		}
		for _, c := range alphabet {
			rec(append(s, c))
		}
	}
	rec(nil)
}

// Long random strings dense in escapes, backslash runs and \u escapes,
// closed and not.
func TestStringScannersAgreeRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	pieces := []string{"a", "bc", "lorem ipsum ", `\n`, `\"`, `\\`, `\\\`, `\\\\`, `\u00e9`, `\uD83D\uDE00`, `\u12`, `\x`, "\t", `/`, `\/`, "é", "\xff", `"`, `\`}
	for range 50000 {
		b := []byte{'"'}
		for range r.IntN(80) {
			b = append(b, pieces[r.IntN(len(pieces))]...)
		}
		agreeScanners(t, b, 0)
	}
}

func FuzzStringScanners(f *testing.F) {
	f.Add([]byte(`"a\"b\\\"c\u00e9"`))
	f.Add([]byte(`"` + string(make([]byte, 70)) + `"`))
	f.Fuzz(func(t *testing.T, s []byte) {
		agreeScanners(t, append([]byte{'"'}, s...), 0)
	})
}

func BenchmarkValidAgentBody(b *testing.B) {
	for _, name := range []string{"anthropic", "responses"} {
		body, err := os.ReadFile("../../bench/agentbody/testdata/" + name + ".json")
		if err != nil {
			b.Fatal(err)
		}
		for _, mode := range []struct {
			name   string
			blocks bool
		}{{"words", false}, {"blocks", true}} {
			b.Run(name+"/"+mode.name, func(b *testing.B) {
				if mode.blocks && !stringBlocks {
					b.Skip("no AVX2")
				}
				defer func(was bool) { stringBlocks = was }(stringBlocks)
				stringBlocks = mode.blocks
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for b.Loop() {
					if !Valid(body) {
						b.Fatal("invalid")
					}
				}
			})
		}
	}
}
