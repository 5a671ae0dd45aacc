package engine

import (
	"sync"

	"github.com/llmhedge/caddy-llm-hedge/internal/stream"
	"github.com/llmhedge/caddy-llm-hedge/internal/upconn"
)

// answerConn is the cleartext connection an attempt's answer came on, as
// the readers of that answer see it: the relay sets its Waiter there to
// flush the client where a read waits. Once the answer's body has ended
// the transport takes the connection back (httptrace's PutIdleConn) and
// reads it on its own goroutine, for its next answer; a Waiter set from
// then on would flush this request's client from that goroutine while the
// request writes to it. It is refused: a Waiter is set only while the
// body is open.
//
// The body may end before the relay's first read: a translation or a
// cloud's decoder between the body and the relay can read the body to its
// end while the gate waits for the first event to commit, and the relay
// reads their events afterwards without the network.
type answerConn struct {
	c     *upconn.Conn // nil: not a wrapped cleartext connection
	mu    sync.Mutex   // orders a Waiter's setting with the body's end
	ended bool         // the transport took the connection back
}

// BeforeWait sets w on the connection unless the answer's body has ended.
func (ac *answerConn) BeforeWait(w stream.Waiter) {
	ac.mu.Lock()
	if !ac.ended {
		ac.c.BeforeWait(w)
	}
	ac.mu.Unlock()
}

// StopWaiting clears w if it is the connection's Waiter.
func (ac *answerConn) StopWaiting(w stream.Waiter) { ac.c.StopWaiting(w) }

// connIdle is the trace's PutIdleConn: the body has ended and the
// transport takes the connection back, so the relay's flush at a wait
// (set only around its reads) must not run on the transport's next read,
// and no Waiter is set from now on.
func (a *attempt) connIdle(error) {
	ac := &a.upConn
	if ac.c == nil {
		return
	}
	ac.mu.Lock()
	ac.ended = true
	ac.c.Idle()
	ac.mu.Unlock()
}

// directConn is the cleartext connection the relay's reads of the body
// wait on, or nil. A Bedrock decoder or a translation between them reads
// it only inside the relay's reads (and the Waiter is set only around
// those, and only while the body is open: answerConn), so a wait of the
// connection is one the relay's read waits on.
func (a *attempt) directConn() stream.Upstream {
	if a.upConn.c == nil || a.resp == nil {
		return nil
	}
	return &a.upConn
}
