package llmhedge

import "github.com/llmhedge/caddy-llm-hedge/internal/engine"

// The client side of streaming: the stream {} options. The event reader
// both sides share is the leaf package internal/sse; the gate and the
// relay that writes a committed stream to the client are internal/stream,
// run by internal/engine.

// StreamConfig configures first-event validation and the relay.
type StreamConfig struct {
	// Phrases (case-insensitive) that mark a bad provider answer when they
	// appear in the events before commit: the attempt fails over.
	// Default: none.
	Reject []string `json:"reject,omitempty"`
	// Drop mid-stream events whose data is not valid JSON instead of
	// passing them on. Default: true.
	DropMalformed *bool `json:"drop_malformed,omitempty"`
	// Bytes buffered before commit; overflowing fails the attempt.
	// Default: 1 MiB.
	MaxBuffer int64 `json:"max_buffer,omitempty"`
	// Continuations per request of a committed stream that is cut,
	// stalls past the idle timeout or ends in an error event while
	// everything delivered is text; 0 turns it off. Each
	// continuation attempt counts in retry.attempts and the retry budget.
	// Default: 1.
	Resume *int `json:"resume,omitempty"`
}

func (c *StreamConfig) setDefaults() {
	if c.DropMalformed == nil {
		t := true
		c.DropMalformed = &t
	}
	if c.MaxBuffer == 0 {
		c.MaxBuffer = defaultMaxBuffer
	}
	if c.Resume == nil {
		c.Resume = new(defaultResume)
	}
}

// engine is the stream policy the engine runs, defaults applied.
func (c *StreamConfig) engine() engine.Stream {
	return engine.Stream{Reject: c.Reject, DropMalformed: *c.DropMalformed, MaxBuffer: c.MaxBuffer, Resume: *c.Resume}
}
