package engine

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// TestReadAnswer reads answers of every size around the pooled classes'
// edges, of stated and unknown length, in small reads, and holds each to
// its bytes: the buffer doubles through the classes and past 1 MiB goes
// on as wire.ReadAll does.
func TestReadAnswer(t *testing.T) {
	const max = 3 << 20
	sizes := []int{0, 1, 511, 1 << 14, 20479, 20480, 20481, 40960, 40961, 1<<20 - 1, 1 << 20, 1<<20 + 1, 2<<20 + 7}
	for _, n := range sizes {
		want := make([]byte, n)
		for i := range want {
			want[i] = byte('a' + i%26)
		}
		for _, length := range []int64{-1, int64(n)} {
			a := &attempt{}
			got, err := a.readAnswer(iotest.HalfReader(bytes.NewReader(want)), length, max)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("size %d, length %d: %d bytes, %v", n, length, len(got), err)
			}
			pooled := a.answer != nil
			if pooled && (len(got) > 0 && &got[0] != &(*a.answer)[0]) && length >= 0 {
				t.Errorf("size %d, length %d: not read into its pooled buffer", n, length)
			}
			if length < 0 && n < 1<<20 && !pooled {
				t.Errorf("size %d of unknown length: not pooled", n)
			}
			a.releaseAnswer()
			if a.answer != nil {
				t.Fatal("released, still held")
			}
		}
	}
}

// TestReadAnswerLimits: a body over max is returned over max (the caller
// refuses it), one shorter than its stated length fails, and a read error
// is the error.
func TestReadAnswerLimits(t *testing.T) {
	a := &attempt{}
	if got, err := a.readAnswer(bytes.NewReader(make([]byte, 30000)), -1, 25000); err != nil || len(got) <= 25000 {
		t.Errorf("over max: %d bytes, %v", len(got), err)
	}
	a.releaseAnswer()
	if _, err := a.readAnswer(bytes.NewReader(make([]byte, 30000)), 40000, 1<<20); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("short of its length: %v", err)
	}
	a.releaseAnswer()
	boom := errors.New("boom")
	if _, err := a.readAnswer(io.MultiReader(bytes.NewReader(make([]byte, 30000)), iotest.ErrReader(boom)), -1, 1<<20); !errors.Is(err, boom) {
		t.Errorf("read error: %v", err)
	}
	a.releaseAnswer()
}

// TestReadAnswerAllocs: an agent-sized answer of unknown length reads into
// the pool's buffers, allocating nothing once they are there.
func TestReadAnswerAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops buffers under -race")
	}
	body := bytes.Repeat([]byte("x"), 12450)
	rd := bytes.NewReader(body)
	a := &attempt{}
	allocs := testing.AllocsPerRun(100, func() {
		rd.Reset(body)
		if got, err := a.readAnswer(rd, -1, 1<<20); err != nil || len(got) != len(body) {
			t.Fatal(len(got), err)
		}
		a.releaseAnswer()
	})
	if allocs != 0 {
		t.Errorf("%v allocations per answer, want 0", allocs)
	}
}
