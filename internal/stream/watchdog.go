package stream

import (
	"sync"
	"sync/atomic"
	"time"
)

// relayWatchdog ends a stalled stream. The relay only stores the time it
// started waiting in an atomic; one AfterFunc timer checks that time when
// it fires and re-arms itself for the remainder, so nothing is allocated
// or reset per event.
type relayWatchdog struct {
	base    time.Time
	waiting atomic.Int64 // nanoseconds since base when the relay began waiting for an event, or watchdogNotWaiting
	Expired atomic.Bool  // the limit passed and abort was called
	reading bool         // the relay's goroutine only: this Next read the upstream (the wait started)

	idle    time.Duration
	onStall func(time.Duration)
	abort   func()

	mu      sync.Mutex
	cond    sync.Cond // signalled when a callback finds the watchdog stopped
	timer   *time.Timer
	limit   time.Duration // current limit: Idle, or the finish grace
	pending int           // callbacks scheduled or running
	stalled bool          // OnStall was called (or will not be)
	stopped bool
}

func NewRelayWatchdog(opts RelayOptions, abort func()) *relayWatchdog {
	w := &relayWatchdog{base: time.Now(), idle: opts.Idle, onStall: opts.OnStall, abort: abort}
	w.cond.L = &w.mu
	w.waiting.Store(watchdogNotWaiting)
	if opts.Idle > 0 {
		w.setLimit(opts.Idle)
	}
	return w
}

// watchdogNotWaiting marks the relay busy writing to the client: a slow
// client is not an idle upstream.
const watchdogNotWaiting = -1

func (w *relayWatchdog) WaitStart() { w.waiting.Store(int64(time.Since(w.base))) }

func (w *relayWatchdog) WaitEnd() { w.waiting.Store(watchdogNotWaiting) }

// gap is how long the relay has been waiting for the current event.
func (w *relayWatchdog) gap() time.Duration {
	since := w.waiting.Load()
	if since == watchdogNotWaiting {
		return 0
	}
	return time.Since(w.base) - time.Duration(since)
}

// setLimit changes the longest wait and (re)arms the timer for it.
func (w *relayWatchdog) setLimit(limit time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	if limit != w.idle {
		w.stalled = true // OnStall is about Idle
	}
	w.limit = limit
	w.arm(w.untilNext(w.gap()))
}

// untilNext is how long after a wait of gap the timer must look again.
func (w *relayWatchdog) untilNext(gap time.Duration) time.Duration {
	next := w.limit - gap
	if !w.stalled && w.onStall != nil {
		next = min(next, w.idle/2-gap)
	}
	return max(next, time.Millisecond)
}

// arm schedules fire after d; w.mu is held.
func (w *relayWatchdog) arm(d time.Duration) {
	switch {
	case w.timer == nil:
		w.timer = time.AfterFunc(d, w.fire)
		w.pending++
	case !w.timer.Reset(d):
		w.pending++ // the previous run had already started
	}
}

func (w *relayWatchdog) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending--
	if w.stopped {
		w.cond.Broadcast()
		return
	}
	if w.Expired.Load() {
		return
	}
	gap := w.gap()
	if gap >= w.limit {
		w.Expired.Store(true)
		w.abort()
		return
	}
	if !w.stalled && w.onStall != nil && gap >= w.idle/2 {
		w.stalled = true
		w.onStall(gap)
	}
	w.arm(w.untilNext(gap))
}

// stop disarms the watchdog and waits for a callback in flight, so none
// runs after the relay returns.
func (w *relayWatchdog) Stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	if w.timer != nil && w.timer.Stop() {
		w.pending--
	}
	for w.pending > 0 {
		w.cond.Wait()
	}
}
