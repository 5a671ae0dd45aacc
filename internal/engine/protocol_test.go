package engine

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"github.com/llmhedge/caddy-llm-hedge/internal/cloud"
	"github.com/llmhedge/caddy-llm-hedge/internal/cloud/cloudtest"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/stream"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// bedrockFrames encodes Anthropic events as Bedrock chunk frames.
func bedrockFrames(t testing.TB, events ...string) []byte {
	var buf bytes.Buffer
	enc := eventstream.NewEncoder()
	for _, ev := range events {
		var msg eventstream.Message
		msg.Headers.Set(":message-type", eventstream.StringValue("event"))
		msg.Headers.Set(":event-type", eventstream.StringValue("chunk"))
		msg.Headers.Set(":content-type", eventstream.StringValue("application/json"))
		msg.Payload, _ = json.Marshal(map[string]string{"bytes": base64.StdEncoding.EncodeToString([]byte(ev))})
		if err := enc.Encode(&buf, msg); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

// twoReads returns its parts one read each (or more when p is short).
type twoReads struct {
	parts [][]byte
}

func (s *twoReads) Read(p []byte) (int, error) {
	for len(s.parts) > 0 && len(s.parts[0]) == 0 {
		s.parts = s.parts[1:]
	}
	if len(s.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, s.parts[0])
	s.parts[0] = s.parts[0][n:]
	return n, nil
}

// The event stream decodes to the same Anthropic SSE events wherever the
// network splits the bytes, and the SSE reader reads them as the events.
func TestBedrockEventStreamSplits(t *testing.T) {
	events := []string{
		`{"type":"message_start","message":{"id":"m1","type":"message","role":"assistant","content":[],"model":"x","usage":{"input_tokens":3,"output_tokens":1}}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}`,
		`{"type":"message_stop","amazon-bedrock-invocationMetrics":{"inputTokenCount":3,"outputTokenCount":2}}`,
	}
	frames := bedrockFrames(t, events...)
	var want strings.Builder
	for _, ev := range events {
		var v struct{ Type string }
		json.Unmarshal([]byte(ev), &v)
		want.WriteString("event: " + v.Type + "\ndata: " + ev + "\n\n")
	}
	for split := 0; split <= len(frames); split++ {
		in := &twoReads{parts: [][]byte{append([]byte(nil), frames[:split]...), append([]byte(nil), frames[split:]...)}}
		got, err := io.ReadAll(cloud.NewBedrockStream(io.NopCloser(in)))
		if err != nil || string(got) != want.String() {
			t.Fatalf("split %d: %v\n%s", split, err, got)
		}
	}
	got, err := io.ReadAll(cloud.NewBedrockStream(io.NopCloser(iotest.OneByteReader(bytes.NewReader(frames)))))
	if err != nil || string(got) != want.String() {
		t.Fatalf("one byte at a time: %v", err)
	}
	rd := sse.NewReader(cloud.NewBedrockStream(io.NopCloser(bytes.NewReader(frames))), 0)
	for i, ev := range events {
		e, err := rd.Next()
		if err != nil || string(e.Data) != ev {
			t.Fatalf("event %d: %v %q", i, err, e.Data)
		}
	}
	if _, err := rd.Next(); err != io.EOF {
		t.Fatalf("after the last event: %v, want EOF", err)
	}
	// A cut inside a frame is an unexpected EOF, wherever it falls.
	for cut := len(frames) - 1; cut > len(frames)-40; cut-- {
		_, err := io.ReadAll(cloud.NewBedrockStream(io.NopCloser(bytes.NewReader(frames[:cut]))))
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("cut at %d: %v, want unexpected EOF", cut, err)
		}
	}
}

// Exception frames end the stream with the class their HTTP status has.
func TestBedrockExceptionClasses(t *testing.T) {
	for kind, want := range map[string]wire.FailClass{
		"throttlingException":           wire.ClassRateLimited,
		"serviceUnavailableException":   wire.ClassOverloaded,
		"modelStreamErrorException":     wire.ClassStatus5xx,
		"internalServerException":       wire.ClassStatus5xx,
		"validationException":           wire.ClassRequest,
		"ThrottlingException":           wire.ClassRateLimited,
		"somethingNewException":         wire.ClassStatus5xx,
		"serviceQuotaExceededException": wire.ClassRateLimited,
	} {
		frames := append(bedrockFrames(t, `{"type":"ping"}`), cloudtest.ExceptionFrame(t, kind, "slow down")...)
		got, err := io.ReadAll(cloud.NewBedrockStream(io.NopCloser(bytes.NewReader(frames))))
		var sf *cloud.StreamFault
		if !errors.As(err, &sf) || sf.Class != want || !strings.Contains(sf.Msg, kind) || !strings.Contains(sf.Msg, "slow down") {
			t.Errorf("%s: %v, want class %s", kind, err, want)
		}
		if string(got) != "event: ping\ndata: {\"type\":\"ping\"}\n\n" {
			t.Errorf("%s: events before the exception %q", kind, got)
		}
	}
}

func FuzzBedrockEventStream(f *testing.F) {
	f.Add(bedrockFrames(f, `{"type":"ping"}`, `{"type":"message_stop"}`))
	f.Add(cloudtest.ExceptionFrame(f, "throttlingException", "x"))
	f.Add(bedrockFrames(f, "{\"type\":\"a\nb\",\r\n\"x\":1}"))
	f.Add([]byte{0, 0, 0, 16, 0, 0, 0, 0})
	f.Add(bedrockFrames(f, "{\"type\":\"x\"}\n", "\r\n{\"type\":\" y\",\n\r\"z\":[]}\r", ""))
	f.Add(append(bedrockFrames(f, `{"type":"ping"}`), bedrockFrames(f, `{"type":"message_stop"}`)[:20]...))
	f.Fuzz(func(t *testing.T, b []byte) {
		// The reader takes the stream's whole events (sse.Source); the
		// same stream read as bytes and parsed must give the same events.
		rd := sse.NewReader(cloud.NewBedrockStream(io.NopCloser(bytes.NewReader(b))), 1<<20)
		parsed := sse.NewReader(struct{ io.Reader }{cloud.NewBedrockStream(io.NopCloser(bytes.NewReader(b)))}, 1<<20)
		for range 1000 {
			ev, err := rd.Next()
			pev, perr := parsed.Next()
			if (err == nil) != (perr == nil) || err != nil && err.Error() != perr.Error() {
				t.Fatalf("source: %v, parsed: %v", err, perr)
			}
			if err != nil {
				return
			}
			if !bytes.Equal(ev.Raw, pev.Raw) || !bytes.Equal(ev.Name, pev.Name) || (ev.Name == nil) != (pev.Name == nil) ||
				!bytes.Equal(ev.Data, pev.Data) || (ev.Data == nil) != (pev.Data == nil) {
				t.Fatalf("source %q %q %q, parsed %q %q %q", ev.Raw, ev.Name, ev.Data, pev.Raw, pev.Name, pev.Data)
			}
			if !bytes.HasSuffix(ev.Raw, []byte("\n\n")) {
				t.Fatalf("event %q does not end in a blank line", ev.Raw)
			}
		}
	})
}

// An exception frame after commit ends the client's stream with Anthropic's
// error event, after the events before it; usage counts what came.
func TestBedrockExceptionAfterCommit(t *testing.T) {
	frames := append(bedrockFrames(t,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`,
		`{"type":"message_delta","delta":{"stop_reason":null},"usage":{"output_tokens":7}}`),
		cloudtest.ExceptionFrame(t, "modelStreamErrorException", "the model failed")...)
	var out bytes.Buffer
	var u wire.Usage
	res := stream.Relay(context.Background(), &out, nil, sse.NewReader(cloud.NewBedrockStream(io.NopCloser(bytes.NewReader(frames))), 4096), dialectAnthropic, &u, stream.RelayOptions{}, nil)
	if res.Complete || res.Err == nil || !strings.Contains(res.Err.Error(), "modelStreamErrorException") {
		t.Fatalf("relay result %+v", res)
	}
	got := out.String()
	if !strings.HasPrefix(got, "event: content_block_delta\n") || !strings.Contains(got, "event: error\n") ||
		!strings.Contains(got, `"type":"error"`) {
		t.Fatalf("client stream:\n%s", got)
	}
	if u.Output != 7 {
		t.Errorf("usage %+v, want 7 output tokens from message_delta", u)
	}
}
