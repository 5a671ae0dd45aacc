// Package cloudtest builds what the clouds send, for tests: the engine's
// unit tests and the end-to-end suites share it.
package cloudtest

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

// ExceptionFrame is a Bedrock event-stream exception frame of kind (e.g.
// throttlingException) carrying message.
func ExceptionFrame(t testing.TB, kind, message string) []byte {
	var buf bytes.Buffer
	var msg eventstream.Message
	msg.Headers.Set(":message-type", eventstream.StringValue("exception"))
	msg.Headers.Set(":exception-type", eventstream.StringValue(kind))
	msg.Payload, _ = json.Marshal(map[string]string{"message": message})
	if err := eventstream.NewEncoder().Encode(&buf, msg); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
