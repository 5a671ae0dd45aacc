package sse

import (
	"io"
	"testing"
)

// Events returned one after another since the last read adjoin into one
// slice of the buffer; an event skipped between them, a read, a foreign
// slice or another reader's event never do.
func TestAdjoin(t *testing.T) {
	r, reads := scriptedReader("data: a\n\n\ndata: b\n\ndata: c\n\ndata: d\n\ndata: e", "\n\n")
	next := func() []byte {
		t.Helper()
		ev, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		return ev.Raw
	}
	a := next()
	span, ok := r.Adjoin(nil, a)
	if !ok || string(span) != "data: a\n\n" {
		t.Fatalf("first event: %q %v", span, ok)
	}
	if _, ok := r.Adjoin(nil, append([]byte(nil), a...)); ok {
		t.Fatal("a copy of the event adjoined")
	}
	b := next()
	if span, ok = r.Adjoin(span, b); !ok || string(span) != "data: a\n\n\ndata: b\n\n" {
		t.Fatalf("second event (with the stray blank line before it): %q %v", span, ok)
	}
	if _, ok := r.Adjoin(span, b); ok {
		t.Fatal("the same event adjoined twice")
	}
	_ = next() // c is dropped: d does not follow the span
	d := next()
	if _, ok := r.Adjoin(span, d); ok {
		t.Fatal("an event adjoined across one left out")
	}
	if got, ok := r.Adjoin(nil, d); !ok || string(got) != "data: d\n\n" {
		t.Fatalf("a new span: %q %v", got, ok)
	}
	e := next() // completed by the second read: the buffer moved
	if *reads != 2 {
		t.Fatalf("%d reads", *reads)
	}
	if _, ok := r.Adjoin(d, e); ok {
		t.Fatal("an event adjoined across a read")
	}
	if got, ok := r.Adjoin(nil, e); !ok || string(got) != "data: e\n\n" {
		t.Fatalf("after the read: %q %v", got, ok)
	}

	other := NewReader(readFunc(func(p []byte) (int, error) { return copy(p, "data: x\n\n"), nil }), 0)
	ev, err := other.Next()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Adjoin(nil, ev.Raw); ok {
		t.Fatal("another reader's event adjoined")
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
	if _, ok := r.Adjoin(nil, e); ok {
		t.Fatal("an event adjoined after the end")
	}
}
