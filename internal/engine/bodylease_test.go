package engine

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/llmhedge/caddy-llm-hedge/internal/cloud"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

func leasedRequest(body []byte) *http.Request {
	return &http.Request{Method: http.MethodPost, Header: http.Header{}, ContentLength: int64(len(body)),
		Body: io.NopCloser(bytes.NewReader(body))}
}

// A body in the pooled sizes is read into a pooled buffer whole; readers
// of it read it as a bytes.Reader would, and fail once the lease is
// released, before the buffer holds another request's body.
func TestBodyLeaseRevokesReaders(t *testing.T) {
	first := bytes.Repeat([]byte("a"), 40_000)
	got, lease, err := readLeasedBody(leasedRequest(first), 1<<20)
	if err != nil || lease == nil {
		t.Fatalf("lease %v, err %v", lease, err)
	}
	if !bytes.Equal(got, first) || cap(got) != len(got) {
		t.Fatalf("body of %d bytes (cap %d), want the %d sent, capacity ending there", len(got), cap(got), len(first))
	}
	whole, partial := lease.Reader(got), lease.Reader(got)
	if b, err := io.ReadAll(whole); err != nil || !bytes.Equal(b, first) {
		t.Fatalf("reader: %d bytes, %v", len(b), err)
	}
	p := make([]byte, 1000)
	if n, err := partial.Read(p); n != 1000 || err != nil {
		t.Fatalf("partial read %d, %v", n, err)
	}
	lease.release()
	if n, err := partial.Read(p); n != 0 || !errors.Is(err, errBodyReleased) {
		t.Fatalf("read after release: %d bytes, %v; want errBodyReleased", n, err)
	}
	// The next body of the size class takes a buffer (the released one,
	// when the pool kept it): the revoked reader still reads nothing.
	second := bytes.Repeat([]byte("b"), 40_000)
	got2, lease2, err := readLeasedBody(leasedRequest(second), 1<<20)
	if err != nil || !bytes.Equal(got2, second) {
		t.Fatalf("second body: %v", err)
	}
	if n, err := partial.Read(p); n != 0 || !errors.Is(err, errBodyReleased) {
		t.Fatalf("revoked reader after reuse: %d bytes, %v", n, err)
	}
	// A body that is not the leased one (a rewrite) gets a plain reader.
	other := append([]byte(nil), got2...)
	if _, ok := lease2.Reader(other).(*leaseReader); ok {
		t.Error("a copy of the body got a lease reader")
	}
	lease2.release()
}

// Bodies outside the pooled sizes, encoded ones, and bodies of unknown
// length are read as before, with no lease; errors are readBody's.
func TestBodyLeaseOnlyWherePooled(t *testing.T) {
	small := []byte(`{"model":"m"}`)
	if b, lease, err := readLeasedBody(leasedRequest(small), 1<<20); err != nil || lease != nil || !bytes.Equal(b, small) {
		t.Errorf("small body: lease %v, err %v", lease, err)
	}
	big := bytes.Repeat([]byte("x"), 20_000)
	r := leasedRequest(big)
	r.ContentLength = -1
	if b, lease, err := readLeasedBody(r, 1<<20); err != nil || lease != nil || !bytes.Equal(b, big) {
		t.Errorf("unknown length: lease %v, err %v", lease, err)
	}
	r = leasedRequest(big[:19_000]) // shorter than it says
	r.ContentLength = 20_000
	if _, lease, err := readLeasedBody(r, 1<<20); err == nil || lease != nil {
		t.Errorf("short body: lease %v, err %v", lease, err)
	}
	r = leasedRequest(big)
	r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(big), strings.NewReader("more"))) // longer than it says
	b, lease, err := readLeasedBody(r, 1<<20)
	if err != nil || len(b) != len(big)+4 {
		t.Errorf("long body: %d bytes, %v", len(b), err)
	}
	lease.release()
	r = leasedRequest(big)
	r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(big), strings.NewReader("more")))
	if _, _, err := readLeasedBody(r, int64(len(big))+2); !errors.Is(err, wire.ErrBodyTooLarge) {
		t.Errorf("longer than max: %v", err)
	}
}

// A cloud's rewrite of a pooled body is read from its pieces through the
// lease (cloud.Bodies): the lease's readers, revoked at its release. Pieces
// none of which lie in the leased body (a rewrite of a translated body)
// are joined and read plainly; no lease, no Bodies.
func TestBodyLeaseGather(t *testing.T) {
	body := bytes.Repeat([]byte("c"), 100_000)
	got, lease, err := readLeasedBody(leasedRequest(body), 1<<20)
	if err != nil || lease == nil {
		t.Fatalf("lease %v, err %v", lease, err)
	}
	bodies := lease.bodies()
	pieces := [][]byte{got[:1], got[10:60_000], nil, got[60_005:], []byte(`,"x":1}`)}
	want := bytes.Join(pieces, nil)
	r := bodies.Gather(pieces)
	if _, ok := r.(*leaseReader); !ok {
		t.Fatalf("pieces of the leased body got a %T", r)
	}
	p := make([]byte, 10)
	if n, err := r.Read(p); n != 10 || err != nil || !bytes.Equal(p, want[:10]) {
		t.Fatalf("read %q, %v", p[:n], err)
	}
	if all, err := io.ReadAll(bodies.Gather(pieces)); err != nil || !bytes.Equal(all, want) {
		t.Fatalf("whole rewrite: %d bytes, %v", len(all), err)
	}
	copied := [][]byte{append([]byte(nil), got[:50]...), []byte("}")}
	if _, ok := bodies.Gather(copied).(*leaseReader); ok {
		t.Error("pieces outside the leased body got a lease reader")
	}
	if all, _ := io.ReadAll(bodies.Gather(copied)); !bytes.Equal(all, bytes.Join(copied, nil)) {
		t.Errorf("pieces outside the lease read as %d bytes", len(all))
	}
	lease.release()
	if n, err := r.Read(p); n != 0 || !errors.Is(err, errBodyReleased) {
		t.Fatalf("read after release: %d bytes, %v; want errBodyReleased", n, err)
	}
	var none *bodyLease
	if none.bodies() != nil {
		t.Error("no lease: Bodies is not nil")
	}
}

// WriteBody writes a rewrite's pieces as one body, however the transport
// splits it (a first Read, then limits): large pieces straight from the
// lease's buffer, and the small pieces with the end of the large one
// before them in one write, so a rewrite's closing bytes take no write of
// their own.
func TestBodyLeaseGatherWriteBody(t *testing.T) {
	body := make([]byte, 200_000)
	for i := range body {
		body[i] = byte(i * 7)
	}
	got, lease, err := readLeasedBody(leasedRequest(body), 1<<20)
	if err != nil || lease == nil {
		t.Fatalf("lease %v, err %v", lease, err)
	}
	defer lease.release()
	layouts := map[string][][]byte{
		"brace, run, tail":           {got[:1], got[20:150_000], []byte(`,"anthropic_version":"bedrock-2023-05-31"}`)},
		"run, run, tail":             {got[:90_000], got[90_017:199_000], []byte("}")},
		"small runs":                 {got[:3], got[5:900], got[1000:1003], got[2000:2500], []byte("}")},
		"empty pieces":               {nil, got[:70_000], nil, []byte("}"), nil},
		"short run before the tail":  {got[:4000], []byte("}")},
		"tail longer than the small": {got[:100_000], bytes.Repeat([]byte("t"), 9000)},
	}
	for name, pieces := range layouts {
		want := bytes.Join(pieces, nil)
		for _, head := range []int{0, 3500} {
			for _, limit := range []int64{1 << 30, 4097, 64_000} {
				r := lease.Gather(pieces).(*leaseReader)
				out := make([]byte, min(head, len(want)), len(want))
				if _, err := io.ReadFull(r, out); err != nil {
					t.Fatal(err)
				}
				var rec recordWriter
				for {
					n, err := r.WriteBody(&rec, limit)
					if err != nil {
						t.Fatalf("%s: WriteBody: %v", name, err)
					}
					if n == 0 {
						break
					}
				}
				if out = append(out, rec.b...); !bytes.Equal(out, want) {
					t.Fatalf("%s (head %d, limit %d): %d bytes written, not the %d of the pieces", name, head, limit, len(out), len(want))
				}
				if limit == 1<<30 {
					for i, w := range rec.writes {
						if w < min(gatherTail, len(rec.b)) {
							t.Errorf("%s (head %d): write %d of %v is %d bytes: a small piece was written alone", name, head, i, rec.writes, w)
						}
					}
				}
			}
		}
	}
}

type recordWriter struct {
	b      []byte
	writes []int
}

func (w *recordWriter) Write(p []byte) (int, error) {
	w.b, w.writes = append(w.b, p...), append(w.writes, len(p))
	return len(p), nil
}

// WriteBody writes the leased body from where it was read to, up to its
// limit, straight from the buffer; a released lease writes nothing more,
// and no write is ever under way once release has returned.
func TestBodyLeaseWriteBody(t *testing.T) {
	body := make([]byte, 200_000)
	for i := range body {
		body[i] = byte(i * 13)
	}
	got, lease, err := readLeasedBody(leasedRequest(body), 1<<20)
	if err != nil || lease == nil {
		t.Fatalf("lease %v, err %v", lease, err)
	}
	r := lease.Reader(got).(*leaseReader)
	head := make([]byte, 1000)
	if _, err := io.ReadFull(r, head); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if n, err := r.WriteBody(&out, 50_000); n != 50_000 || err != nil {
		t.Fatalf("WriteBody(50000) = %d, %v", n, err)
	}
	if n, err := r.WriteBody(&out, 1<<30); n != int64(len(body)-51_000) || err != nil {
		t.Fatalf("WriteBody(rest) = %d, %v", n, err)
	}
	if !bytes.Equal(append(head, out.Bytes()...), body) {
		t.Fatal("the written bytes are not the body")
	}
	if n, err := r.WriteBody(&out, 10); n != 0 || err != nil {
		t.Fatalf("WriteBody at the end = %d, %v", n, err)
	}
	boom := errors.New("boom")
	w := lease.Reader(got).(*leaseReader)
	if n, err := w.WriteBody(failingWriter{after: 100, err: boom}, 1<<30); n != 100 || !errors.Is(err, boom) {
		t.Fatalf("a failing write: %d, %v", n, err)
	}

	// A release while a write is under way waits for it; the writer then
	// gets nothing more: the body's reader, and a rewrite's whose last
	// write is of copied small pieces.
	releaseDuringWrite(t, lease, lease.Reader(got).(*leaseReader), len(body))
	gathered, lease2, err := readLeasedBody(leasedRequest(body), 1<<20)
	if err != nil || lease2 == nil {
		t.Fatalf("lease %v, err %v", lease2, err)
	}
	pieces := [][]byte{gathered[:70_000], []byte(`,"x":1}`)}
	releaseDuringWrite(t, lease2, lease2.Gather(pieces).(*leaseReader), 70_007)
}

// releaseDuringWrite releases the lease while r's first write is under
// way: r's WriteBody then ends, whole or with errBodyReleased, and no
// write begins once release has returned.
func releaseDuringWrite(t *testing.T, lease *bodyLease, r *leaseReader, size int) {
	t.Helper()
	var released atomic.Bool
	inWrite, releasing := make(chan struct{}), make(chan struct{})
	sw := &signalWriter{t: t, released: &released, first: inWrite, proceed: releasing}
	done := make(chan struct{})
	var n int64
	var err error
	go func() { n, err = r.WriteBody(sw, 1<<30); close(done) }()
	<-inWrite
	go func() { lease.release(); released.Store(true) }()
	close(releasing)
	<-done
	if !errors.Is(err, errBodyReleased) && n != int64(size) {
		t.Fatalf("WriteBody across a release: %d, %v", n, err)
	}
}

type failingWriter struct {
	after int
	err   error
}

func (f failingWriter) Write(p []byte) (int, error) { return min(len(p), f.after), f.err }

// signalWriter tells first of its first write and holds it until proceed;
// every write checks the lease was not released under it.
type signalWriter struct {
	t              *testing.T
	released       *atomic.Bool
	first, proceed chan struct{}
	writes         int
}

func (s *signalWriter) Write(p []byte) (int, error) {
	if s.released.Load() {
		s.t.Error("a write after the lease was released")
	}
	if s.writes++; s.writes == 1 {
		close(s.first)
		<-s.proceed
	}
	return len(p), nil
}

// The request's PayloadSums is made once, by the first attempt that asks
// (a hedge's attempts may ask at once: run under -race), and is the same
// for every attempt after.
func TestBodyLeasePayloadSums(t *testing.T) {
	_, lease, err := readLeasedBody(leasedRequest(bytes.Repeat([]byte("x"), 40<<10)), 1<<20)
	if err != nil || lease == nil {
		t.Fatalf("lease %v, %v", lease, err)
	}
	defer lease.release()
	got := make([]*cloud.PayloadSums, 4)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() { got[i] = lease.bodies().PayloadSums() })
	}
	wg.Wait()
	for i, m := range got {
		if m == nil || m != got[0] || m != lease.PayloadSums() {
			t.Errorf("attempt %d: PayloadSums %p, want the one %p", i, m, got[0])
		}
	}
}
