package stream

import (
	"io"
	"sync"

	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
)

// coalescer gathers the events of one burst and hands them to the client
// in one write at the flush: every Write of a response passes Caddy's
// writer wrappers (a deadline reset each), so sixty events one by one cost
// sixty of those. Events relayed unchanged, one after another, are held
// where the reader read them (span) and written from there; anything else
// (a dropped event between them, an event of the proxy's own) is copied
// into a buffer from a pool, taken only then, so an idle stream holds none.
type coalescer struct {
	w       io.Writer
	flush   func() error
	rd      *sse.Reader // the reader whose events are held in place; nil: copy every event
	span    []byte      // the burst so far, in rd's buffer (buf is nil then)
	buf     *[]byte
	pending bool // events written since the last flush
}

var coalescePool = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// coalesceMax bounds a burst held back: past it, the events are written
// (not flushed) at once.
const CoalesceMax = 32 << 10

func (c *coalescer) Write(b []byte) (int, error) {
	c.pending = true
	held := 0
	if span, ok := c.adjoin(b); ok {
		c.span, held = span, len(span)
	} else {
		c.detach() // the burst so far goes first
		if c.buf == nil {
			c.buf = coalescePool.Get().(*[]byte)
		}
		*c.buf = append(*c.buf, b...)
		held = len(*c.buf)
	}
	if held >= CoalesceMax {
		return len(b), c.writeOut()
	}
	return len(b), nil
}

// detach copies the burst held in the reader's buffer into the
// coalescer's own, before a read that may move the reader's buffer.
func (c *coalescer) detach() {
	if len(c.span) == 0 {
		return
	}
	if c.buf == nil {
		c.buf = coalescePool.Get().(*[]byte)
	}
	*c.buf = append(*c.buf, c.span...)
	c.span = nil
}

// adjoin extends the span by b when b follows it in the reader's buffer
// and nothing has been copied in this burst.
func (c *coalescer) adjoin(b []byte) ([]byte, bool) {
	if c.buf != nil || c.rd == nil {
		return nil, false
	}
	return c.rd.Adjoin(c.span, b)
}

func (c *coalescer) writeOut() error {
	if len(c.span) > 0 {
		_, err := c.w.Write(c.span)
		c.span = nil
		return err
	}
	if c.buf == nil || len(*c.buf) == 0 {
		return nil
	}
	_, err := c.w.Write(*c.buf)
	*c.buf = (*c.buf)[:0]
	return err
}

// writeUnflushed writes what is pending, the stream's end, without a
// flush (RelayOptions.EndUnflushed); the relay's deferred release gives
// back the buffer.
func (c *coalescer) writeUnflushed() error {
	c.pending = false
	return c.writeOut()
}

// flushOut writes what is pending and flushes it to the client.
func (c *coalescer) flushOut() error {
	c.pending = false
	err := c.writeOut()
	c.release()
	if err != nil {
		return err
	}
	return c.flush()
}

func (c *coalescer) release() {
	c.span = nil
	if c.buf != nil {
		if cap(*c.buf) <= 2*CoalesceMax {
			*c.buf = (*c.buf)[:0]
			coalescePool.Put(c.buf)
		}
		c.buf = nil
	}
}
