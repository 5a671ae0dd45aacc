package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/llmhedge/caddy-llm-hedge/internal/dialect/anthropic"
	"github.com/llmhedge/caddy-llm-hedge/internal/dialect/openai"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse/ssetest"
	"github.com/llmhedge/caddy-llm-hedge/internal/stream"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// client records what the relay sends to the downstream client.
type relayClient struct {
	bytes.Buffer
	flushes   int
	failAfter int // fail the write after this many successful writes; 0 never
	writes    int
	slow      time.Duration // each write takes this long
}

func (c *relayClient) Write(p []byte) (int, error) {
	c.writes++
	if c.failAfter > 0 && c.writes > c.failAfter {
		return 0, errors.New("broken pipe")
	}
	if c.slow > 0 {
		time.Sleep(c.slow) // a slow client, on the bubble's fake clock
	}
	return c.Buffer.Write(p)
}

func (c *relayClient) flush() error { c.flushes++; return nil }

// upstream is a stream the test feeds by hand; abort ends it the way
// closing a response body does.
type pipeUpstream struct {
	pr      *io.PipeReader
	pw      *io.PipeWriter
	aborted atomic.Int32
}

func newPipeUpstream() *pipeUpstream {
	pr, pw := io.Pipe()
	return &pipeUpstream{pr: pr, pw: pw}
}

func (u *pipeUpstream) send(t *testing.T, s string) {
	t.Helper()
	if _, err := u.pw.Write([]byte(s)); err != nil {
		t.Errorf("upstream write: %v", err)
	}
}

func (u *pipeUpstream) abort() {
	u.aborted.Add(1)
	u.pr.CloseWithError(errors.New("attempt aborted"))
}

// lastError returns the error type carried by the final event the client
// received, or "" when it is not an error event.
func lastErrorType(t *testing.T, d wire.Dialect, out string) string {
	t.Helper()
	evs := parseEvents(t, out)
	if len(evs) == 0 {
		return ""
	}
	last := evs[len(evs)-1]
	if d == dialectAnthropic && string(last.Name) != "error" {
		return ""
	}
	var body struct {
		Type  string `json:"type"`
		Error *struct {
			Type string `json:"type"`
		} `json:"error"`
	}
	if json.Unmarshal(last.Data, &body) != nil || body.Error == nil {
		return ""
	}
	return body.Error.Type
}

func TestRelay(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent()) // goroutines left by earlier tests (Caddy's log rotation) are not ours
	anthropicStream := sseStream(
		anthropicEvent("content_block_delta", aTextDelta),
		": keepalive",
		anthropicEvent("content_block_delta", aTextDelta),
		anthropicEvent("content_block_stop", aBlockStop),
		anthropicEvent("message_delta", aMessageDelta),
		anthropicEvent("message_stop", aMessageStop),
	)
	openAIStream := sseStream(openAIChunk(oContent), openAIChunk(oContent), openAIChunk(oFinish), openAIChunk(oUsage))
	tests := []struct {
		name      string
		d         wire.Dialect
		in        string
		opts      stream.RelayOptions
		failAfter int
		want      stream.RelayResult
		wantOut   string // exact bytes the client gets, if set
		wantError string // error type of the final event the client gets
	}{
		{
			name:    "complete anthropic stream",
			d:       dialectAnthropic,
			in:      anthropicStream + "event: ping\ndata: {}\n\n", // nothing after message_stop is read
			want:    stream.RelayResult{Complete: true, Events: 6, Bytes: int64(len(anthropicStream))},
			wantOut: anthropicStream,
		},
		{
			name:    "openai with [DONE]",
			d:       dialectOpenAI,
			in:      openAIStream + "data: [DONE]\n\n",
			want:    stream.RelayResult{Complete: true, Events: 5, Bytes: int64(len(openAIStream) + len(wire.DoneEvent))},
			wantOut: openAIStream + "data: [DONE]\n\n",
		},
		{
			name:    "openai finish_reason then EOF gets a [DONE]",
			d:       dialectOpenAI,
			in:      openAIStream,
			want:    stream.RelayResult{Complete: true, Events: 5, Bytes: int64(len(openAIStream) + len(wire.DoneEvent))},
			wantOut: openAIStream + "data: [DONE]\n\n",
		},
		{
			name:    "openai finish_reason then a cut gets a [DONE]",
			d:       dialectOpenAI,
			in:      openAIStream + "data: {\"choi",
			want:    stream.RelayResult{Complete: true, Events: 5, Bytes: int64(len(openAIStream) + len(wire.DoneEvent))},
			wantOut: openAIStream + "data: [DONE]\n\n",
		},
		{
			name:      "anthropic cut mid-stream",
			d:         dialectAnthropic,
			in:        sseStream(anthropicEvent("content_block_delta", aTextDelta)) + "event: content_block_delta\ndata: {\"ty",
			want:      stream.RelayResult{Reason: "upstream_cut", Events: 1, Bytes: int64(len(sseStream(anthropicEvent("content_block_delta", aTextDelta))))},
			wantError: "api_error",
		},
		{
			name:      "anthropic clean EOF without message_stop",
			d:         dialectAnthropic,
			in:        sseStream(anthropicEvent("content_block_delta", aTextDelta)),
			want:      stream.RelayResult{Reason: "upstream_cut", Events: 1, Bytes: int64(len(sseStream(anthropicEvent("content_block_delta", aTextDelta))))},
			wantError: "api_error",
		},
		{
			name:      "openai cut before finish",
			d:         dialectOpenAI,
			in:        sseStream(openAIChunk(oContent)),
			want:      stream.RelayResult{Reason: "upstream_cut", Events: 1, Bytes: int64(len(sseStream(openAIChunk(oContent))))},
			wantError: "server_error",
		},
		{
			name:      "upstream error event is forwarded and ends the relay",
			d:         dialectAnthropic,
			in:        sseStream(anthropicEvent("content_block_delta", aTextDelta), anthropicEvent("error", aError), anthropicEvent("content_block_delta", aTextDelta)),
			want:      stream.RelayResult{Reason: "upstream_error_event", Events: 2, Bytes: int64(len(sseStream(anthropicEvent("content_block_delta", aTextDelta), anthropicEvent("error", aError))))},
			wantOut:   sseStream(anthropicEvent("content_block_delta", aTextDelta), anthropicEvent("error", aError)),
			wantError: "overloaded_error",
		},
		{
			name:    "malformed events dropped",
			d:       dialectOpenAI,
			in:      sseStream(openAIChunk(oContent), "data: {garbage", openAIChunk(oContent), "data: [DONE]"),
			opts:    stream.RelayOptions{DropMalformed: true},
			want:    stream.RelayResult{Complete: true, Events: 3, Dropped: 1, Bytes: int64(len(sseStream(openAIChunk(oContent), openAIChunk(oContent), "data: [DONE]")))},
			wantOut: sseStream(openAIChunk(oContent), openAIChunk(oContent), "data: [DONE]"),
		},
		{
			name:    "malformed events forwarded by default",
			d:       dialectOpenAI,
			in:      sseStream(openAIChunk(oContent), "data: {garbage", "data: [DONE]"),
			want:    stream.RelayResult{Complete: true, Events: 3, Bytes: int64(len(sseStream(openAIChunk(oContent), "data: {garbage", "data: [DONE]")))},
			wantOut: sseStream(openAIChunk(oContent), "data: {garbage", "data: [DONE]"),
		},
		{
			name:      "event too large",
			d:         dialectAnthropic,
			in:        sseStream(anthropicEvent("content_block_delta", aTextDelta), "data: "+strings.Repeat("x", 5000)),
			want:      stream.RelayResult{Reason: "event_too_large", Events: 1, Bytes: int64(len(sseStream(anthropicEvent("content_block_delta", aTextDelta))))},
			wantError: "api_error",
		},
		{
			name:      "client write error",
			d:         dialectAnthropic,
			in:        anthropicStream,
			failAfter: 2,
			want:      stream.RelayResult{Reason: "client_gone", Events: 2, Bytes: int64(len(sseStream(anthropicEvent("content_block_delta", aTextDelta), ": keepalive")))},
			wantOut:   sseStream(anthropicEvent("content_block_delta", aTextDelta), ": keepalive"), // and no error event
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent()) // goroutines left by earlier tests (Caddy's log rotation) are not ours
			c := &relayClient{failAfter: tt.failAfter}
			var u wire.Usage
			rd := sse.NewReader(strings.NewReader(tt.in), 4096)
			got := stream.Relay(context.Background(), c, c.flush, rd, tt.d, &u, tt.opts, nil)
			if (got.Err == nil) != (got.Reason == "") {
				t.Errorf("Reason %q with Err %v", got.Reason, got.Err)
			}
			got.Err = nil
			if got != tt.want {
				t.Errorf("result = %+v, want %+v", got, tt.want)
			}
			if tt.wantOut != "" && c.String() != tt.wantOut && !strings.HasPrefix(c.String(), tt.wantOut) {
				t.Errorf("client got %q, want %q", c.String(), tt.wantOut)
			}
			if tt.wantOut != "" && tt.wantError == "" && c.String() != tt.wantOut {
				t.Errorf("client got %q, want exactly %q", c.String(), tt.wantOut)
			}
			if e := lastErrorType(t, tt.d, c.String()); e != tt.wantError {
				t.Errorf("final error event type %q, want %q; client got %q", e, tt.wantError, c.String())
			}
			if got.Reason != "client_gone" && c.flushes != c.writes {
				t.Errorf("%d writes but %d flushes", c.writes, c.flushes)
			}
		})
	}
}

func TestRelayUsage(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent()) // goroutines left by earlier tests (Caddy's log rotation) are not ours
	in := sseStream(anthropicEvent("message_delta", aMessageDelta), anthropicEvent("message_stop", aMessageStop))
	u := wire.Usage{Input: 25, Output: 1, Model: "claude"}
	res := stream.Relay(context.Background(), io.Discard, nil, sse.NewReader(strings.NewReader(in), 4096), dialectAnthropic, &u, stream.RelayOptions{}, nil)
	if !res.Complete || u.Output != 15 || u.Input != 25 {
		t.Errorf("result %+v, usage %+v", res, u)
	}
}

// The idle watchdog aborts a silent upstream and tells the client with a
// 504 in its dialect; OnStall is reported once on the way.
func TestRelayIdleTimeout(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent()) // goroutines left by earlier tests (Caddy's log rotation) are not ours
	for _, d := range []wire.Dialect{dialectAnthropic, dialectOpenAI} {
		t.Run(d.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				up := newPipeUpstream()
				first := sseStream(anthropicEvent("content_block_delta", aTextDelta), ": ping")
				if d == dialectOpenAI {
					first = sseStream(openAIChunk(oContent), ": ping")
				}
				go up.send(t, first) // then silence, connection open
				var stalls []time.Duration
				c := &relayClient{}
				opts := stream.RelayOptions{Idle: 30 * time.Second, OnStall: func(gap time.Duration) { stalls = append(stalls, gap) }}
				res := stream.Relay(context.Background(), c, c.flush, sse.NewReader(up.pr, 4096), d, nil, opts, up.abort)
				if res.Reason != "idle_timeout" || res.Complete || res.Events != 2 {
					t.Errorf("result %+v", res)
				}
				if up.aborted.Load() == 0 {
					t.Error("abort was not called")
				}
				if len(stalls) != 1 || stalls[0] < 15*time.Second || stalls[0] >= 30*time.Second {
					t.Errorf("OnStall calls %v, want one after half the idle limit", stalls)
				}
				want := "timeout_error"
				if d == dialectOpenAI {
					want = "timeout"
				}
				if e := lastErrorType(t, d, c.String()); e != want {
					t.Errorf("final event %q, want a %s error event: %q", e, want, c.String())
				}
			})
		})
	}
}

// Events that keep arriving, pings included, keep the stream alive far
// past the idle limit; a slow client does not count as an idle upstream.
func TestRelayNotIdle(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent()) // goroutines left by earlier tests (Caddy's log rotation) are not ours
	synctest.Test(t, func(t *testing.T) {
		up := newPipeUpstream()
		go func() {
			for range 10 {
				time.Sleep(8 * time.Second)
				up.send(t, sseStream(anthropicEvent("ping", aPing)))
			}
			up.send(t, sseStream(anthropicEvent("message_stop", aMessageStop)))
		}()
		c := &relayClient{slow: 25 * time.Second}
		res := stream.Relay(context.Background(), c, c.flush, sse.NewReader(up.pr, 4096), dialectAnthropic, nil,
			stream.RelayOptions{Idle: 10 * time.Second}, up.abort)
		if !res.Complete || res.Events != 11 || up.aborted.Load() != 0 {
			t.Errorf("result %+v, aborted %d", res, up.aborted.Load())
		}
	})
}

// OpenAI: after finish_reason, an upstream that neither sends [DONE] nor
// closes is finished after the grace, as a success.
func TestRelayFinishGrace(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent()) // goroutines left by earlier tests (Caddy's log rotation) are not ours
	synctest.Test(t, func(t *testing.T) {
		up := newPipeUpstream()
		in := sseStream(openAIChunk(oContent), openAIChunk(oFinish))
		go up.send(t, in)
		c := &relayClient{}
		var u wire.Usage
		start := time.Now()
		res := stream.Relay(context.Background(), c, c.flush, sse.NewReader(up.pr, 4096), dialectOpenAI, &u,
			stream.RelayOptions{Idle: time.Minute, FinishGrace: time.Second}, up.abort)
		if !res.Complete || res.Reason != "" || up.aborted.Load() == 0 {
			t.Errorf("result %+v, aborted %d", res, up.aborted.Load())
		}
		if waited := time.Since(start); waited < time.Second || waited >= time.Minute {
			t.Errorf("ended after %v, want the 1s grace", waited)
		}
		if c.String() != in+"data: [DONE]\n\n" {
			t.Errorf("client got %q", c.String())
		}
		if u.Model != "gpt-4o" {
			t.Errorf("usage %+v", u)
		}
	})
}

func TestRelayContext(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent()) // goroutines left by earlier tests (Caddy's log rotation) are not ours
	t.Run("client gone", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			up := newPipeUpstream()
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				up.send(t, sseStream(anthropicEvent("content_block_delta", aTextDelta)))
				cancel()
			}()
			c := &relayClient{}
			res := stream.Relay(ctx, c, c.flush, sse.NewReader(up.pr, 4096), dialectAnthropic, nil, stream.RelayOptions{Idle: time.Minute}, up.abort)
			if res.Reason != "client_gone" || up.aborted.Load() == 0 {
				t.Errorf("result %+v, aborted %d", res, up.aborted.Load())
			}
			if lastErrorType(t, dialectAnthropic, c.String()) != "" {
				t.Errorf("an error event was written to a gone client: %q", c.String())
			}
		})
	})
	// The proxy's reader reads a body whose request context derives from
	// ctx (ReadEndsWithCtx): ctx's end ends the read by itself, abort is
	// left to the idle limit, and the end is still the client's.
	t.Run("client gone, the read ends with ctx", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			up := newPipeUpstream()
			ctx, cancel := context.WithCancel(context.Background())
			stop := context.AfterFunc(ctx, func() { up.pr.CloseWithError(context.Canceled) })
			defer stop()
			go func() {
				up.send(t, sseStream(anthropicEvent("content_block_delta", aTextDelta)))
				cancel()
			}()
			c := &relayClient{}
			res := stream.Relay(ctx, c, c.flush, sse.NewReader(up.pr, 4096), dialectAnthropic, nil,
				stream.RelayOptions{Idle: time.Minute, ReadEndsWithCtx: true}, up.abort)
			if res.Reason != "client_gone" || res.Events != 1 || up.aborted.Load() != 0 {
				t.Errorf("result %+v, aborted %d", res, up.aborted.Load())
			}
		})
	})
	t.Run("total timeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			up := newPipeUpstream()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			go up.send(t, sseStream(openAIChunk(oContent)))
			c := &relayClient{}
			res := stream.Relay(ctx, c, c.flush, sse.NewReader(up.pr, 4096), dialectOpenAI, nil, stream.RelayOptions{Idle: time.Minute}, up.abort)
			if res.Reason != "total_timeout" || res.Events != 1 {
				t.Errorf("result %+v", res)
			}
			if e := lastErrorType(t, dialectOpenAI, c.String()); e != "timeout" {
				t.Errorf("final event %q: %q", e, c.String())
			}
		})
	})
}

// openAIDelta is a typical streamed content chunk.
const openAIDeltaChunk = `data: {"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[{"index":0,"delta":{"content":" the quick brown fox jumps over"},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n"

func benchmarkRelay(b *testing.B, d wire.Dialect, event, tail string) {
	benchmarkRelayWith(b, d, event, tail, stream.RelayOptions{Idle: time.Minute})
}

func benchmarkRelayWith(b *testing.B, d wire.Dialect, event, tail string, opts stream.RelayOptions) {
	var u wire.Usage
	rd := sse.NewReader(&ssetest.RepeatReader{Event: []byte(event), N: b.N, Tail: []byte(tail)}, 1<<20)
	b.ReportAllocs()
	b.SetBytes(int64(len(event)))
	b.ResetTimer()
	res := stream.Relay(context.Background(), io.Discard, func() error { return nil }, rd, d, &u, opts, func() {})
	if !res.Complete || res.Events != b.N+1 {
		b.Fatalf("%+v", res)
	}
}

func BenchmarkRelayAnthropicDelta(b *testing.B) {
	benchmarkRelay(b, dialectAnthropic, ssetest.AnthropicDelta, sseStream(anthropicEvent("message_stop", aMessageStop)))
}

// The relay of a stream that may be continued: every event is also
// tracked (its text kept for a continuation).
func BenchmarkRelayAnthropicDeltaTracked(b *testing.B) {
	benchmarkRelayWith(b, dialectAnthropic, ssetest.AnthropicDelta, sseStream(anthropicEvent("message_stop", aMessageStop)),
		stream.RelayOptions{Idle: time.Minute, Track: &anthropic.Resumer{}, HoldError: true})
}

func BenchmarkRelayOpenAIDelta(b *testing.B) {
	benchmarkRelay(b, dialectOpenAI, openAIDeltaChunk, "data: [DONE]\n\n")
}

// Tracked, as a stream that may be continued is read: the deltas after
// the first are read by their frame (internal/dialect/openai).
func BenchmarkRelayOpenAIDeltaTracked(b *testing.B) {
	benchmarkRelayWith(b, dialectOpenAI, openAIDeltaChunk, "data: [DONE]\n\n",
		stream.RelayOptions{Idle: time.Minute, Track: &openai.Resumer{}, HoldError: true})
}
