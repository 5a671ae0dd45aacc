package llmhedge

import (
	"bytes"
	"fmt"
	"io"
	"testing"
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
	rd := newSSEReader(nil, 0)
	fills := 0
	rd.beforeFill = func() { fills++ }
	for b.Loop() {
		rd.Reset(newBedrockStream(io.NopCloser(bytes.NewReader(wire))))
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
