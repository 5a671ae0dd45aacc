package llmhedge

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// processExit ends the requests still running when the process exits.
// Caddy cleans the modules up only after its servers' Shutdown returned:
// when the process is exiting, a request still in flight then has
// outlived grace_period, and the process is about to end its connection.
// Cancelled with wire.ErrShutdown, a committed stream ends with the
// dialect's error event and a request not yet committed gets a 503,
// instead of a connection cut that a client cannot tell from a network
// fault. A reload never fires it: its old requests keep running.
var processExit = struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup // the requests in flight, of every config
	once   sync.Once      // every handler's Cleanup calls endRequestsOnExit
}{}

func init() {
	processExit.ctx, processExit.cancel = context.WithCancelCause(context.Background())
}

// exitWait bounds how long Cleanup waits for the cancelled requests to
// write their ends before the process exits. exitFlush is the wait after
// the last handler returned: net/http writes the end of a response (the
// last chunk, the buffered body) after its handler returns, and nothing
// signals when it has.
const (
	exitWait  = 2 * time.Second
	exitFlush = 100 * time.Millisecond
)

// trackRequest counts a request in flight until the returned func runs.
func trackRequest() func() {
	processExit.wg.Add(1)
	return processExit.wg.Done
}

// endRequestsOnExit cancels every request in flight when the process is
// exiting and waits, up to exitWait, for them to finish writing: once,
// however many handlers the config has.
func endRequestsOnExit() {
	if !caddy.Exiting() {
		return
	}
	processExit.once.Do(func() {
		processExit.cancel(wire.ErrShutdown)
		done := make(chan struct{})
		go func() {
			processExit.wg.Wait()
			close(done)
		}()
		select {
		case <-done:
			time.Sleep(exitFlush)
		case <-time.After(exitWait):
		}
	})
}

// withExit returns ctx, also cancelled with wire.ErrShutdown when the
// process exits past its grace period; stop releases it.
func withExit(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(processExit.ctx, func() { cancel(wire.ErrShutdown) })
	return ctx, func() {
		stop()
		cancel(nil)
	}
}

// shutdownCut reports whether ctx ended because the process exits.
func shutdownCut(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), wire.ErrShutdown)
}
