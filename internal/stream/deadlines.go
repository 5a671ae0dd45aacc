package stream

import (
	"context"
	"sync"
	"time"
)

// Deadlines bounds many short waits of the same length with one shared
// timer, instead of a timer each. Arming a timer that becomes the
// earliest of its P makes the Go runtime wake a sleeping thread (the
// network poller, or an idle P) to re-plan its sleep, and that thread
// wakes again when the stopped timer's time comes: a cost per wait that,
// for the few microseconds a complete stream's tail read takes, is larger
// than the wait. The shared timer is armed only by a wait that starts
// while it is idle; waits that start and stop while it is armed touch no
// timer at all. When it fires (at the time of the wait that armed it,
// which may be gone by then) it cancels what is due and re-arms for the
// oldest wait still queued, or goes idle.
type Deadlines struct {
	wait time.Duration
	base time.Time

	mu         sync.Mutex
	head, tail *Deadline // queued waits, earliest first (all have the same length)
	timer      *time.Timer
	armed      bool
}

// Deadline is one wait, embedded in what it bounds (no allocation).
type Deadline struct {
	prev, next *Deadline
	at         time.Duration // since base
	cancel     context.CancelCauseFunc
	cause      error
	queued     bool
}

// NewDeadlines returns waits of length wait.
func NewDeadlines(wait time.Duration) *Deadlines {
	return &Deadlines{wait: wait, base: time.Now()}
}

// Start queues d: unless Stop dequeues it first, cancel(cause) is called,
// from the shared timer's goroutine, once wait has passed.
func (s *Deadlines) Start(d *Deadline, cancel context.CancelCauseFunc, cause error) {
	s.mu.Lock()
	if d.queued { // started again without a Stop: requeued, not linked twice
		s.unlink(d)
	}
	d.cancel, d.cause = cancel, cause
	d.at = time.Since(s.base) + s.wait // non-decreasing: the queue stays in order
	d.prev, d.next, d.queued = s.tail, nil, true
	if s.tail != nil {
		s.tail.next = d
	} else {
		s.head = d
	}
	s.tail = d
	if !s.armed {
		// An armed timer fires no later than d's time (it was armed for
		// an earlier wait) and re-arms for what is then queued.
		s.armed = true
		if s.timer == nil {
			s.timer = time.AfterFunc(s.wait, s.fire)
		} else {
			s.timer.Reset(s.wait)
		}
	}
	s.mu.Unlock()
}

// Stop dequeues d. It reports whether it did: false when d was not queued,
// because it was never started or its time came (its cancel has run, or
// is about to, as with time.Timer.Stop).
func (s *Deadlines) Stop(d *Deadline) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !d.queued {
		return false
	}
	s.unlink(d)
	return true
}

func (s *Deadlines) unlink(d *Deadline) {
	if d.prev != nil {
		d.prev.next = d.next
	} else {
		s.head = d.next
	}
	if d.next != nil {
		d.next.prev = d.prev
	} else {
		s.tail = d.prev
	}
	d.prev, d.next, d.queued = nil, nil, false
}

// fire cancels the waits whose time has come and re-arms for the next
// one; with none queued the timer stays idle until a wait starts.
func (s *Deadlines) fire() {
	type cancel struct {
		f     context.CancelCauseFunc
		cause error
	}
	var due []cancel // called once the lock is released
	s.mu.Lock()
	now := time.Since(s.base)
	for d := s.head; d != nil && d.at <= now; d = s.head {
		s.unlink(d)
		due = append(due, cancel{d.cancel, d.cause})
	}
	if s.head != nil {
		s.timer.Reset(s.head.at - now)
	} else {
		s.armed = false
	}
	s.mu.Unlock()
	for _, c := range due {
		c.f(c.cause)
	}
}
