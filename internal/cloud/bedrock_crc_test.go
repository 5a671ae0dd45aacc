package cloud

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

// Decode checks both CRC32s of a frame, the message's carried on from the
// prelude's: a frame as AWS's encoder writes it decodes; any byte changed,
// in the prelude, the headers, the payload or either checksum, is refused.
func TestBedrockFrameChecksums(t *testing.T) {
	var buf bytes.Buffer
	msg := eventstream.Message{
		Headers: eventstream.Headers{
			{Name: ":message-type", Value: eventstream.StringValue("event")},
			{Name: ":event-type", Value: eventstream.StringValue("chunk")},
		},
		Payload: []byte(`{"bytes":"eyJ0eXBlIjoibWVzc2FnZV9zdG9wIn0="}` + strings.Repeat(" ", 70)),
	}
	if err := eventstream.NewEncoder().Encode(&buf, msg); err != nil {
		t.Fatal(err)
	}
	frame := buf.Bytes()
	decode := func(b []byte) (bedrockFrame, error) {
		return NewBedrockStream(io.NopCloser(bytes.NewReader(b))).Decode()
	}
	f, err := decode(frame)
	if err != nil || string(f.EventType) != "chunk" || !bytes.Equal(f.Payload, msg.Payload) {
		t.Fatalf("intact frame: %+v, %v", f, err)
	}
	for i := range frame {
		bad := bytes.Clone(frame)
		bad[i] ^= 0x10
		if _, err := decode(bad); err == nil {
			t.Fatalf("byte %d of %d changed: decoded", i, len(frame))
		} else if i >= 12 && !strings.Contains(err.Error(), "message checksum mismatch") {
			t.Fatalf("byte %d changed: %v, want the message checksum's mismatch", i, err)
		}
	}
}
