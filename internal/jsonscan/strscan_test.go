package jsonscan

import (
	"bytes"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
)

// agreeScanners fails t when the blocks (after the words) and the words
// alone disagree on the string at b[i].
func agreeScanners(t *testing.T, b []byte, i int) {
	t.Helper()
	if !stringBlocks {
		t.Skip("no AVX2: the word scanner is the only one")
	}
	e1, x1 := jsonScanString(b, i)
	stringBlocks = false
	e2, x2 := jsonScanString(b, i)
	stringBlocks = true
	if e1 != e2 || e1 >= 0 && x1 != x2 {
		t.Fatalf("string at %d of %q: blocks %d %v, words %d %v", i, b, e1, x1, e2, x2)
	}
	// A skipper: with no block yet, and after a short string whose block
	// holds this one's start.
	s := skipper{b: b, blocks: true, base: noBlock}
	if e := s.str(i); e != e2 {
		t.Fatalf("string at %d of %q: skipper %d, words %d", i, b, e, e2)
	}
	pre := append([]byte(`"k" `), b...)
	s = skipper{b: pre, blocks: true, base: noBlock}
	if e := s.str(0); e != 3 {
		t.Fatalf("the key before %q: skipper %d", b, e)
	}
	want := e2
	if e2 >= 0 {
		want = e2 + 4
	}
	if e := s.str(4 + i); e != want {
		t.Fatalf("string at %d of %q after a key: skipper %d, words %d", i, b, e, e2)
	}
}

// Every string of up to five bytes from the bytes that matter, at every
// offset across a block's end: the escapes and their runs of backslashes
// split between two blocks are where the mask arithmetic can go wrong. The
// blocks start at the first escape past wordsFirst bytes: a lead of that
// many bytes and an escape puts them in play.
func TestStringScannersAgreeAtBlockEdges(t *testing.T) {
	alphabet := []byte("\"\\ua0n\x01")
	lead := append(bytes.Repeat([]byte{'x'}, wordsFirst+6), `\n`...)
	var rec func(s []byte)
	rec = func(s []byte) {
		for _, k := range []int{0, 1, 7, 8, 56, 58, 59, 60, 61, 62, 63, 64, 65, 120, 122, 123, 124, 125, 126, 127, 128} {
			for _, escaped := range []bool{false, true} {
				b := []byte{'"'}
				if escaped {
					b = append(b, lead...)
				}
				b = append(b, bytes.Repeat([]byte{'x'}, k)...)
				b = append(b, s...)
				agreeScanners(t, b, 0)
				agreeScanners(t, append(b, `0123"`...), 0)
				agreeScanners(t, append(b, `"`...), 0)
				agreeScanners(t, append(b, `"`+strings.Repeat("y", 70)...), 0)
			}
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
	for range 20000 {
		b := []byte{'"'}
		for range r.IntN(200) {
			b = append(b, pieces[r.IntN(len(pieces))]...)
		}
		agreeScanners(t, b, 0)
	}
}

func FuzzStringScanners(f *testing.F) {
	f.Add([]byte(`"a\"b\\\"c\u00e9"`))
	f.Add([]byte(`"` + string(make([]byte, 70)) + `"`))
	f.Add([]byte(strings.Repeat(`ab\n\"\\x\u00e9`, 30) + `"`))
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
		benchValid(b, name, body)
	}
}

func BenchmarkValidEvent(b *testing.B) {
	for name, ev := range map[string]string{
		"responses-delta": `{"type":"response.output_text.delta","sequence_number":5,"item_id":"msg_68b9a1c2d3e4f5a6b7c8d9e0f1a2b3c4","output_index":0,"content_index":0,"delta":" the quick brown fox jumps over","logprobs":[],"obfuscation":"aB3dE5fG"}`,
		"chat-chunk":      `{"id":"chatcmpl-A1b2C3d4E5f6G7h8I9j0","object":"chat.completion.chunk","created":1733000000,"model":"gpt-5-2025-08-07","system_fingerprint":"fp_1a2b3c4d","choices":[{"index":0,"delta":{"content":" the quick brown fox jumps over"},"logprobs":null,"finish_reason":null}],"usage":null}`,
	} {
		benchValid(b, name, []byte(ev))
	}
}

// benchValid runs Valid on body with the word scanner alone and with the
// blocks (where the CPU has AVX2).
func benchValid(b *testing.B, name string, body []byte) {
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
