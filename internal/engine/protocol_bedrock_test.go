package engine

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"github.com/llmhedge/caddy-llm-hedge/internal/cloud"
	"github.com/llmhedge/caddy-llm-hedge/internal/cloud/cloudtest"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
)

// bedrockBenchEvents is the bench's stream: message_start,
// content_block_start, ping, 54 deltas, content_block_stop, message_delta,
// message_stop.
func bedrockBenchEvents() []string {
	evs := []string{
		`{"type":"message_start","message":{"id":"msg_bench","type":"message","role":"assistant","content":[],"model":"anthropic.claude-bench-v1:0","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":1}}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`{"type":"ping"}`,
	}
	for i := range 54 {
		evs = append(evs, fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" word%d"}}`, i))
	}
	return append(evs, `{"type":"content_block_stop","index":0}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":54}}`,
		`{"type":"message_stop"}`)
}

// BenchmarkBedrockStream reads a 60-event Bedrock stream, all of it
// already received, as the relay does (SSE events from newBedrockStream);
// fills/op is the reads the SSE reader makes, each a flush to the client
// when the relay coalesces.
func BenchmarkBedrockStream(b *testing.B) {
	events := bedrockBenchEvents()
	wire := bedrockFrames(b, events...)
	b.SetBytes(int64(len(wire)))
	b.ReportAllocs()
	rd := sse.NewReader(nil, 0)
	fills := 0
	rd.BeforeFill = func(bool) { fills++ }
	for b.Loop() {
		rd.Reset(cloud.NewBedrockStream(io.NopCloser(bytes.NewReader(wire))))
		n := 0
		for {
			_, err := rd.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != len(events) {
			b.Fatalf("%d events, want %d", n, len(events))
		}
	}
	b.ReportMetric(float64(fills)/float64(b.N), "fills/op")
}

// The frames already received reach the reader in one read (the relay
// flushes once per read); a frame still arriving is not waited for.
func TestBedrockStreamBatchesReceivedFrames(t *testing.T) {
	events := bedrockBenchEvents()
	wire := bedrockFrames(t, events...)
	first := bedrockFrames(t, events[0])
	five := len(bedrockFrames(t, events[:5]...))
	// Five frames and 10 bytes of the sixth have arrived; the rest comes later.
	in := &twoReads{parts: [][]byte{append([]byte(nil), wire[:five+10]...), append([]byte(nil), wire[five+10:]...)}}
	s := cloud.NewBedrockStream(io.NopCloser(in))
	buf := make([]byte, 64<<10)
	n, err := s.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	if got := bytes.Count(buf[:n], []byte("\n\n")); got != 5 {
		t.Errorf("first read: %d events, want the 5 received whole", got)
	}
	if len(in.parts[1]) != len(wire)-five-10 {
		t.Error("the first read waited for the frame still arriving")
	}
	rest, err := io.ReadAll(s)
	if err != nil || !bytes.HasSuffix(rest, []byte("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")) {
		t.Fatalf("rest: %v %q", err, rest)
	}
	// A frame that yields nothing for the client (not a chunk) is skipped
	// without ending the read.
	var other bytes.Buffer
	var msg eventstream.Message
	msg.Headers.Set(":message-type", eventstream.StringValue("event"))
	msg.Headers.Set(":event-type", eventstream.StringValue("metadata"))
	msg.Payload = []byte(`{}`)
	if err := eventstream.NewEncoder().Encode(&other, msg); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(cloud.NewBedrockStream(io.NopCloser(bytes.NewReader(append(other.Bytes(), first...)))))
	if err != nil || !bytes.HasPrefix(got, []byte("event: message_start\n")) {
		t.Fatalf("after a metadata frame: %v %q", err, got)
	}
}

// The stream's frame decoder agrees with the AWS SDK's: the same headers
// and payload for a frame the SDK decodes, an error for one it rejects.
func FuzzBedrockFrameDecode(f *testing.F) {
	f.Add(bedrockFrames(f, `{"type":"ping"}`))
	f.Add(cloudtest.ExceptionFrame(f, "throttlingException", "x"))
	var all bytes.Buffer
	var msg eventstream.Message
	msg.Headers.Set(":message-type", eventstream.StringValue("error"))
	msg.Headers.Set(":error-code", eventstream.StringValue("InternalFailure"))
	msg.Headers.Set(":error-message", eventstream.StringValue("boom"))
	msg.Headers.Set("b", eventstream.BoolValue(true))
	msg.Headers.Set("i", eventstream.Int64Value(7))
	msg.Headers.Set("u", eventstream.UUIDValue{1, 2})
	msg.Headers.Set("y", eventstream.BytesValue("xy"))
	msg.Headers.Set("t", eventstream.Int16Value(3))
	if err := eventstream.NewEncoder().Encode(&all, msg); err != nil {
		f.Fatal(err)
	}
	f.Add(all.Bytes())
	f.Add([]byte{0, 0, 0, 16, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		// Frames with a good prelude checksum get past the first check.
		if len(b) >= 12 && b[8] == 0 {
			binary.BigEndian.PutUint32(b[8:], crc32.ChecksumIEEE(b[:8]))
			if n := binary.BigEndian.Uint32(b); n >= 16 && int(n) <= len(b) && b[n-1] == 0 {
				binary.BigEndian.PutUint32(b[n-4:], crc32.ChecksumIEEE(b[:n-4]))
			}
		}
		want, werr := sdkDecode(b)
		s := cloud.NewBedrockStream(io.NopCloser(bytes.NewReader(b)))
		got, err := s.Decode()
		if (werr == nil) != (err == nil) {
			t.Fatalf("SDK: %v; ours: %v", werr, err)
		}
		if err != nil {
			return
		}
		for _, h := range []struct {
			name string
			v    []byte
		}{{":message-type", got.MessageType}, {":event-type", got.EventType}, {":exception-type", got.ExceptionType},
			{":error-code", got.ErrorCode}, {":error-message", got.ErrorMessage}} {
			var w string
			if v := want.Headers.Get(h.name); v != nil {
				w, _ = v.Get().(string)
			}
			if string(h.v) != w {
				t.Fatalf("%s: %q, SDK %q", h.name, h.v, w)
			}
		}
		if !bytes.Equal(got.Payload, want.Payload) {
			t.Fatalf("payload %q, SDK %q", got.Payload, want.Payload)
		}
	})
}

// sdkDecode is the AWS SDK's decoding of one frame; it panics on a header
// value type it does not know.
func sdkDecode(b []byte) (msg eventstream.Message, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = errors.New(fmt.Sprint(v))
		}
	}()
	return eventstream.NewDecoder().Decode(bytes.NewReader(b), nil)
}

// cloudBody drops the named members however their keys are escaped and
// wherever they repeat, sets the others once, and keeps the rest as written.
func TestCloudBodySplices(t *testing.T) {
	in := `{"model":"m", "max_tokens" : 5,"stream":true,"mod\u0065l":"x","messages":[{"role":"user","content":"a<b"}],"anthropic_version":"old","x":{"y":[1,2]}}`
	got, err := cloud.CloudBody([]byte(in), []string{"model", "stream"}, map[string]json.RawMessage{
		"anthropic_version": json.RawMessage(`"bedrock-2023-05-31"`), "anthropic_beta": json.RawMessage(`["b"]`)})
	want := `{"max_tokens" : 5,"messages":[{"role":"user","content":"a<b"}],"x":{"y":[1,2]},"anthropic_beta":["b"],"anthropic_version":"bedrock-2023-05-31"}`
	if err != nil || string(got) != want {
		t.Fatalf("got %s, %v\nwant %s", got, err, want)
	}
	for _, bad := range []string{`[1]`, `{"a":}`, `{"a":1`, ``} {
		if _, err := cloud.CloudBody([]byte(bad), nil, nil); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// BenchmarkBedrockCloudBody is the Bedrock request body of the bench.
func BenchmarkBedrockCloudBody(b *testing.B) {
	body := []byte(`{"model":"claude-bench","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":"Write a short paragraph about the sea."}]}`)
	set := map[string]json.RawMessage{"anthropic_version": json.RawMessage(cloud.BedrockAnthropicVersion)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := cloud.CloudBody(body, []string{"model", "stream"}, set); err != nil {
			b.Fatal(err)
		}
	}
}

// A Bedrock stream read to its end and closed gives its buffers to the
// next stream: that one decodes as if they were new, and reading a closed
// stream is an error, not a read of buffers another stream now owns. One
// closed before its end (a cancelled attempt, perhaps read elsewhere)
// keeps its buffers.
func TestBedrockStreamBuffersReused(t *testing.T) {
	events := bedrockBenchEvents()
	want := ""
	for _, e := range events {
		var typ struct{ Type string }
		if err := json.Unmarshal([]byte(e), &typ); err != nil {
			t.Fatal(err)
		}
		want += "event: " + typ.Type + "\ndata: " + e + "\n\n"
	}
	wire := bedrockFrames(t, events...)
	for i := range 5 {
		s := cloud.NewBedrockStream(io.NopCloser(bytes.NewReader(wire)))
		got, err := io.ReadAll(s)
		if err != nil || string(got) != want {
			t.Fatalf("stream %d: %v, %d bytes (want %d): %.200q", i, err, len(got), len(want), got)
		}
		s.Close()
		if _, err := s.Read(make([]byte, 16)); err == nil {
			t.Fatalf("stream %d: a read after close succeeded", i)
		}
		early := cloud.NewBedrockStream(io.NopCloser(bytes.NewReader(wire)))
		if _, err := early.Read(make([]byte, 64)); err != nil {
			t.Fatal(err)
		}
		early.Close()
		if _, err := early.Read(make([]byte, 64)); err != nil {
			t.Fatalf("stream closed early: its buffers went away: %v", err)
		}
	}
}
