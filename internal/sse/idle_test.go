package sse

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// burstReader delivers its bursts one per Read (cut to the caller's
// buffer), and calls onRead before each, when the reader may wait.
type burstReader struct {
	bursts [][]byte
	onRead func()
}

func (b *burstReader) Read(p []byte) (int, error) {
	if b.onRead != nil {
		b.onRead()
	}
	if len(b.bursts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, b.bursts[0])
	if b.bursts[0] = b.bursts[0][n:]; len(b.bursts[0]) == 0 {
		b.bursts = b.bursts[1:]
	}
	return n, nil
}

// A reader with nothing pending holds no pooled buffer while it waits
// for the next read (an idle stream), whatever the burst before was:
// events that fit the small array, a burst larger than it, an event cut
// across it. After an event larger than the pool's buffer it keeps the
// buffer grown for it, one of bufpool's (a stream of large events does
// not grow one anew for each), until Release gives it back.
func TestSSEReaderIdleHoldsNoBuffer(t *testing.T) {
	ev := func(n int) string { return "event: e\ndata: " + strings.Repeat("x", n) + "\n\n" }
	const half = smallBuffer / 2
	bursts := []string{
		ev(20),                         // fits the small array
		ev(half) + ev(half) + ev(half), // a burst larger than it
		ev(200) + ev(700)[:100],        // an event cut across bursts...
		ev(700)[100:],                  // ...completed
		ev(10 << 10),                   // larger than the pool's buffer
		ev(30),                         // small again
	}
	var in [][]byte
	for _, b := range bursts {
		in = append(in, []byte(b))
	}
	want := []string{ev(20), ev(half), ev(half), ev(half), ev(200), ev(700), ev(10 << 10), ev(30)}
	br := &burstReader{bursts: in}
	r := NewReader(br, 0)
	var idleReads, held int
	br.onRead = func() {
		if r.start == r.end { // nothing pending: this read may wait
			idleReads++
			if r.pooled != nil && len(*r.pooled) == sseInitialBuffer || !r.onSmall && cap(r.buf) <= sseInitialBuffer {
				held++ // the pool's buffer, or a buffer not grown for large events
			}
			if cap(r.buf) > sseInitialBuffer && (r.pooled == nil || cap(*r.pooled) != cap(r.buf)) {
				t.Errorf("a buffer grown for large events (%d bytes) is not bufpool's", cap(r.buf))
			}
		}
	}
	var got []string
	for {
		e, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(e.Raw))
	}
	if len(got) != len(want) {
		t.Fatalf("got %d events, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("event %d: got %.40q (%d bytes), want %.40q (%d bytes)", i, got[i], len(got[i]), want[i], len(want[i]))
		}
	}
	if idleReads < 5 || held != 0 {
		t.Errorf("%d reads with nothing pending, %d of them holding a buffer beyond the small array; want none", idleReads, held)
	}
	r.Release()
	if r.pooled != nil {
		t.Error("Release kept the pooled buffer")
	}
}

// Reading bursts larger than the small array allocates nothing in the
// steady state: the pooled buffer is taken and given back, not made.
func TestSSEReaderBurstsAllocateNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops buffers at random")
	}
	burst := bytes.Repeat([]byte("data: {\"type\":\"content_block_delta\",\"text\":\"hello world\"}\n\n"), 20)
	r := NewReader(nil, 0)
	br := &burstReader{}
	var three [3][]byte
	allocs := testing.AllocsPerRun(100, func() {
		three = [3][]byte{burst, burst, burst}
		br.bursts = three[:]
		r.Reset(br)
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per stream of three bursts, want 0", allocs)
	}
}

// A reader given back mid-event (a stream cut after its commit) comes
// out of the pool as new: nothing of the old stream, its name, data or
// error, shows in the next one.
func TestSSEReaderPoolStartsClean(t *testing.T) {
	for range 20 {
		old := Get(strings.NewReader("event: old\ndata: first\n\nevent: cut\ndata: half"), 64)
		if e, err := old.Next(); err != nil || string(e.Name) != "old" {
			t.Fatalf("old stream: %q %v", e.Name, err)
		}
		Put(old)
		r := Get(strings.NewReader("data: a\ndata: b\n\n"), 0)
		e, err := r.Next()
		if err != nil || e.Name != nil || string(e.Data) != "a\nb" || string(e.Raw) != "data: a\ndata: b\n\n" {
			t.Fatalf("pooled reader: %q %q %q %v", e.Raw, e.Name, e.Data, err)
		}
		if _, err := r.Next(); err != io.EOF {
			t.Fatalf("end of the new stream: %v", err)
		}
		if r.maxEvent != DefaultMaxEvent {
			t.Fatalf("maxEvent %d, want the default", r.maxEvent)
		}
		Put(r)
	}
}
