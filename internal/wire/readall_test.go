package wire

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/llmhedge/caddy-llm-hedge/internal/sse/ssetest"
)

// ReadAll keeps a body of known length in a buffer of its size (one byte
// of room for the read that ends it), refuses one shorter than it said,
// and reads one longer only up to the bound.
func TestReadAllBody(t *testing.T) {
	body := []byte(strings.Repeat("x", 300))
	for _, c := range []struct {
		name          string
		length, max   int64
		want          int
		wantErr       error
		maxCapOverLen int
	}{
		{"known length", 300, 1 << 20, 300, nil, 8},
		{"unknown length", -1, 1 << 20, 300, nil, 1 << 20},
		{"shorter than said", 400, 1 << 20, 0, io.ErrUnexpectedEOF, 0},
		{"longer than said", 100, 1 << 20, 300, nil, 1 << 20},
		{"longer than said, past the bound", 100, 200, 201, nil, 1 << 20},
		{"empty, unknown length", 0, 1 << 20, 300, nil, 1 << 20},
		{"stated over the bound, shorter", 1000, 400, 0, io.ErrUnexpectedEOF, 0},
		{"stated over the bound, the bytes too", 250, 200, 201, nil, 1 << 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ReadAll(bytes.NewReader(body), c.length, c.max)
			if !errors.Is(err, c.wantErr) || len(got) != c.want {
				t.Fatalf("got %d bytes, %v; want %d, %v", len(got), err, c.want, c.wantErr)
			}
			if c.want > 0 && !bytes.Equal(got, body[:c.want]) {
				t.Fatal("bytes differ")
			}
			if cap(got)-len(got) > c.maxCapOverLen {
				t.Fatalf("cap %d for %d bytes", cap(got), len(got))
			}
		})
	}
}

// Past exactSizeBody the buffer grows with the bytes that arrive, to the
// stated size and no further: a body that spans several doublings reads
// whole, whatever the reads; one cut short fails; a stated length far
// past what arrives is not allocated ahead.
func TestReadAllBodyPastExactSize(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789abcdef"), (3*exactSizeBody+7)/16)
	body = append(body, "tail"...)
	n := int64(len(body))
	for _, c := range []struct {
		name string
		r    func() io.Reader
	}{
		{"one read", func() io.Reader { return bytes.NewReader(body) }},
		{"reads cut at the doublings", func() io.Reader {
			return &ssetest.SplitReader{Data: body, Cuts: []int{1, exactSizeBody - 1, exactSizeBody, exactSizeBody + 1, 2*exactSizeBody + 1, 3 * exactSizeBody}}
		}},
		{"the last bytes with EOF", func() io.Reader { return iotest.DataErrReader(bytes.NewReader(body)) }},
	} {
		got, err := ReadAll(c.r(), n, 64<<20)
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("%s: %d bytes, %v", c.name, len(got), err)
		}
		if cap(got)-len(got) > 8<<10 {
			t.Fatalf("%s: cap %d for %d bytes", c.name, cap(got), len(got))
		}
	}
	if _, err := ReadAll(bytes.NewReader(body[:n-1]), n, 64<<20); err != io.ErrUnexpectedEOF {
		t.Fatalf("one byte short: %v", err)
	}
	if got, err := ReadAll(bytes.NewReader(append(body, "more"...)), n, 64<<20); err != nil || len(got) != len(body)+4 {
		t.Fatalf("longer than said: %d bytes, %v", len(got), err)
	}
	boom := errors.New("boom")
	if _, err := ReadAll(io.MultiReader(bytes.NewReader(body[:2*exactSizeBody]), iotest.ErrReader(boom)), n, 64<<20); err != boom {
		t.Fatalf("a read error: %v", err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := ReadAll(strings.NewReader(`{"model":"m"`), 60_000_000, 64<<20); err != io.ErrUnexpectedEOF {
		t.Fatalf("stated 60 MB, sent 12 bytes: %v", err)
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 2*exactSizeBody {
		t.Fatalf("stated 60 MB, sent 12 bytes: allocated %d", grew)
	}
}
