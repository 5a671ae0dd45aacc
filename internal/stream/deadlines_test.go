package stream

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

var errWaitTest = errors.New("wait over")

// A wait not stopped in time is cancelled with its cause, after its
// length and not before; one stopped in time never is.
func TestDeadlinesCancelOnlyWhatOutlivesItsWait(t *testing.T) {
	defer goleak.VerifyNone(t)
	const wait = 20 * time.Millisecond
	s := NewDeadlines(wait)

	var late Deadline
	ctx, cancel := context.WithCancelCause(context.Background())
	start := time.Now()
	s.Start(&late, cancel, errWaitTest)
	<-ctx.Done()
	if took := time.Since(start); took < wait {
		t.Fatalf("cancelled after %s, before its wait of %s", took, wait)
	}
	if !errors.Is(context.Cause(ctx), errWaitTest) {
		t.Fatalf("cause %v, want %v", context.Cause(ctx), errWaitTest)
	}
	if s.Stop(&late) {
		t.Fatal("Stop reported a wait dequeued that had already been cancelled")
	}

	var quick Deadline
	qctx, qcancel := context.WithCancelCause(context.Background())
	s.Start(&quick, qcancel, errWaitTest)
	if !s.Stop(&quick) {
		t.Fatal("Stop did not dequeue a wait in time")
	}
	time.Sleep(3 * wait)
	if qctx.Err() != nil {
		t.Fatalf("a wait stopped in time was cancelled: %v", context.Cause(qctx))
	}
	qcancel(nil)
	waitIdle(t, s)
}

// Many waits at once, started over a span longer than one wait and
// stopped in any order: exactly those left running are cancelled, each
// once, and the shared timer goes idle when none is queued.
func TestDeadlinesManyWaits(t *testing.T) {
	defer goleak.VerifyNone(t)
	const wait = 10 * time.Millisecond
	s := NewDeadlines(wait)
	const n = 200
	var ds [n]Deadline
	var mu sync.Mutex
	cancelled := map[int]int{}
	for i := range n {
		s.Start(&ds[i], func(cause error) {
			if !errors.Is(cause, errWaitTest) {
				t.Errorf("cause %v", cause)
			}
			mu.Lock()
			cancelled[i]++
			mu.Unlock()
		}, errWaitTest)
		if i%50 == 49 {
			time.Sleep(wait / 3) // later waits are due later
		}
	}
	stopped := map[int]bool{}
	for i := n - 1; i >= 0; i -= 3 { // from the newest: unlink from the tail and the middle
		if s.Stop(&ds[i]) {
			stopped[i] = true
		}
	}
	time.Sleep(4 * wait)
	waitIdle(t, s)
	mu.Lock()
	defer mu.Unlock()
	for i := range n {
		switch {
		case stopped[i] && cancelled[i] != 0:
			t.Errorf("wait %d was stopped, then cancelled", i)
		case !stopped[i] && cancelled[i] != 1:
			t.Errorf("wait %d left running was cancelled %d times, want once", i, cancelled[i])
		}
	}
	if s.head != nil || s.tail != nil {
		t.Error("the queue is not empty")
	}
}

// waitIdle waits for the shared timer to find nothing queued and stay
// unarmed.
func waitIdle(t *testing.T, s *Deadlines) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(time.Millisecond) {
		s.mu.Lock()
		armed := s.armed
		s.mu.Unlock()
		if !armed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the shared timer is still armed with nothing queued")
		}
	}
}
