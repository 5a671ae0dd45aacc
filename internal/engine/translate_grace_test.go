package engine

import (
	"context"
	"io"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/stream"
	"github.com/llmhedge/caddy-llm-hedge/internal/translate"
)

// A translated Chat stream whose server sends the finish_reason and then
// neither the usage chunk, [DONE] nor its end is complete after the finish
// grace, as a native Chat stream is (the relay's FinishGrace), and so is a
// Gemini one that does not end after its finishReason: the client
// gets its terminal event, and the upstream, still holding, is aborted.
// The idle timeout is an hour of the bubble's clock: only the grace ends
// the stream before it (before, it ended there, in an error event).
func TestTranslatedChatFinishGrace(t *testing.T) {
	gemini, _ := translate.For(translate.Anthropic, translate.Gemini)
	for _, tc := range []struct {
		name, in string
		pair     translate.Pair
	}{
		{"text", chatChunk(`{"role":"assistant","content":"hi"}`, "null") + chatChunk(`{}`, `"stop"`), nil},
		{"finish with the text", chatChunk(`{"role":"assistant","content":"hi"}`, `"stop"`), nil},
		{"tool call", chatChunk(`{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]}`, "null") +
			chatChunk(`{}`, `"tool_calls"`), nil},
		// Gemini's finishReason, and then no end of the body: the native
		// Gemini stream has the same grace.
		{"gemini", `data: {"candidates":[{"content":{"role":"model","parts":[{"text":"hi"}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":1,"totalTokenCount":4},"modelVersion":"gemini-x"}` + "\n\n", gemini},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.pair == nil {
				tc.pair = anthropicFromChat(t)
			}
			synctest.Test(t, func(t *testing.T) {
				up := newPipeUpstream()
				go up.send(t, tc.in) // and then holds: the pipe is never closed by the server
				x := &xlBody{rd: sse.NewReader(up.pr, 0), s: tc.pair.NewStream(), body: io.NopCloser(nil),
					grace: time.Second, abort: up.abort}
				c := &relayClient{}
				start := time.Now()
				res := stream.Relay(context.Background(), c, c.flush, sse.NewReader(x, 1<<20), dialectAnthropic, nil,
					stream.RelayOptions{Idle: time.Hour}, up.abort)
				if !res.Complete || up.aborted.Load() == 0 {
					t.Fatalf("result %+v, upstream aborted %d times; want complete, the upstream aborted\nclient got %q", res, up.aborted.Load(), c.String())
				}
				if waited := time.Since(start); waited != time.Second {
					t.Errorf("ended after %v of the bubble's clock, want the 1s grace", waited)
				}
				out := c.String()
				if !strings.HasSuffix(out, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n") || !strings.Contains(out, `"stop_reason":`) {
					t.Errorf("the client's stream does not end in message_delta and message_stop: %q", out)
				}
			})
		})
	}
}
