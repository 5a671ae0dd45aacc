package sse

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// Buffered hands out the events the bytes already read complete, never
// reads, and leaves a partial event, the end and errors to Next.
func TestBuffered(t *testing.T) {
	r, reads := scriptedReader("data: a\n\ndata: b\n\nevent: c\ndata: c1\ndata: c2\n\ndata: d", "\n\n")
	if _, ok := r.Buffered(); ok || *reads != 0 {
		t.Fatalf("Buffered before any read: ok %v, %d reads", ok, *reads)
	}
	ev, err := r.Next()
	if err != nil || string(ev.Data) != "a" {
		t.Fatalf("Next: %q %v", ev.Data, err)
	}
	var got []string
	for {
		ev, ok := r.Buffered()
		if !ok {
			break
		}
		got = append(got, string(ev.Name)+":"+string(ev.Data))
	}
	if strings.Join(got, " ") != ":b c:c1\nc2" || *reads != 1 {
		t.Fatalf("buffered %q after %d reads", got, *reads)
	}
	if ev, err := r.Next(); err != nil || string(ev.Data) != "d" || *reads != 2 {
		t.Fatalf("Next after the burst: %q %v (%d reads)", ev.Data, err, *reads)
	}
	if _, ok := r.Buffered(); ok {
		t.Fatal("Buffered at the end")
	}
	if _, err := r.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("end: %v", err)
	}
	if _, ok := r.Buffered(); ok {
		t.Fatal("Buffered after the end")
	}
}

func TestBufferedTooLarge(t *testing.T) {
	r := NewReader(strings.NewReader("data: a\n\ndata: "+strings.Repeat("x", 100)+"\n\n"), 50)
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Buffered(); ok {
		t.Fatal("an event over the bound was handed out")
	}
	if _, err := r.Next(); !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("Next: %v, want ErrEventTooLarge", err)
	}
}

type readFunc func([]byte) (int, error)

// scriptedReader reads each of reads in one Read, then io.EOF; *n counts
// the Read calls.
func scriptedReader(reads ...string) (r *Reader, n *int) {
	n = new(int)
	return NewReader(readFunc(func(p []byte) (int, error) {
		*n++
		if *n > len(reads) {
			return 0, io.EOF
		}
		return copy(p, reads[*n-1]), nil
	}), 0), n
}

func (f readFunc) Read(p []byte) (int, error) { return f(p) }
