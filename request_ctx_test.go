package llmhedge

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// The request's one context ends as context.WithTimeoutCause would: with
// context.DeadlineExceeded and wire.ErrTotalTimeout at timeouts.total (its
// children see the cause; their Err is context.Canceled), with the client's cancellation when the client
// leaves first, and it reports the earlier of its deadline and the
// client's.
func TestRequestContextEnds(t *testing.T) {
	h := &Handler{}
	h.Timeouts.Total = caddy.Duration(30 * time.Millisecond)

	r := httptest.NewRequest(http.MethodPost, "/v1/messages", nil)
	ctx, stop := h.requestContext(r)
	defer stop()
	child, cancelChild := context.WithCancelCause(ctx)
	defer cancelChild(nil)
	if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > 30*time.Millisecond {
		t.Fatalf("deadline %v %v, want within 30ms", dl, ok)
	}
	<-child.Done()
	if ctx.Err() != context.DeadlineExceeded || !errors.Is(context.Cause(ctx), wire.ErrTotalTimeout) {
		t.Fatalf("at timeouts.total: err %v cause %v", ctx.Err(), context.Cause(ctx))
	}
	if !errors.Is(context.Cause(child), wire.ErrTotalTimeout) {
		t.Fatalf("child's cause %v", context.Cause(child))
	}

	h.Timeouts.Total = caddy.Duration(time.Hour)
	early := time.Now().Add(time.Minute)
	parent, cancelParent := context.WithDeadline(context.Background(), early)
	ctx, stop = h.requestContext(r.WithContext(parent))
	defer stop()
	if dl, _ := ctx.Deadline(); !dl.Equal(early) {
		t.Fatalf("deadline %v, want the client's %v", dl, early)
	}
	cancelParent()
	<-ctx.Done()
	if ctx.Err() != context.Canceled {
		t.Fatalf("client gone: err %v, want context.Canceled", ctx.Err())
	}

	ctx, stop = h.requestContext(r)
	stop()
	if ctx.Err() != context.Canceled || context.Cause(ctx) != context.Canceled {
		t.Fatalf("stopped: err %v cause %v", ctx.Err(), context.Cause(ctx))
	}
}

// readAll keeps a body of known length in a buffer of its size (one byte
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
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := readAll(bytes.NewReader(body), c.length, c.max)
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
