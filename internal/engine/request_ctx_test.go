package engine

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// The request's one context ends as context.WithTimeoutCause would: with
// context.DeadlineExceeded and wire.ErrTotalTimeout at timeouts.total (its
// children see the cause; their Err is context.Canceled), with the client's cancellation when the client
// leaves first, and it reports the earlier of its deadline and the
// client's.
func TestRequestContextEnds(t *testing.T) {
	h := &Engine{}
	h.Timeouts.Total = time.Duration(30 * time.Millisecond)

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

	h.Timeouts.Total = time.Duration(time.Hour)
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
