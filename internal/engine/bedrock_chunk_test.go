package engine

import (
	"bytes"
	"encoding/base64"
	"io"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"github.com/llmhedge/caddy-llm-hedge/internal/cloud"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
)

// A chunk's bytes read as Bedrock writes them ({"bytes":"...") give the
// event a JSON reading of the payload gives; a payload the shortcut does
// not take (escapes, line ends, another member first) is read as before.
func TestBedrockChunkPayloads(t *testing.T) {
	ev := `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi/there?"}}`
	b64 := base64.StdEncoding.EncodeToString([]byte(ev))
	for _, tc := range []struct {
		payload string
		ok      bool
	}{
		{`{"bytes":"` + b64 + `"}`, true},
		{`{"bytes":"` + b64 + `","p":"abcdefghij"}`, true},
		{`{"p":"x","bytes":"` + b64 + `"}`, true},
		{`{"bytes":"` + b64[:8] + "\n" + b64[8:] + `"}`, false}, // a raw line end: not a JSON string
		// Line ends the base64 decoder would skip, four of them so that
		// what is left still decodes: refused all the same.
		{`{"bytes":"` + b64[:8] + "\r\n\r\n" + b64[8:] + `"}`, false},
		{`{"bytes":"` + "\n\n\n\n" + b64 + `"}`, false},
		{`{"bytes":"` + b64 + "\r\r\r\r" + `"}`, false},
		{`{"bytes":"` + b64[:8] + `\/` + b64[8:] + `"}`, false}, // an escape: not base64 as written
		{`{"bytes":"` + b64[:7] + `"}`, false},
		{`{"bytes":1}`, false},
	} {
		var msg eventstream.Message
		msg.Headers.Set(":message-type", eventstream.StringValue("event"))
		msg.Headers.Set(":event-type", eventstream.StringValue("chunk"))
		msg.Payload = []byte(tc.payload)
		var buf bytes.Buffer
		if err := eventstream.NewEncoder().Encode(&buf, msg); err != nil {
			t.Fatal(err)
		}
		rd := sse.NewReader(cloud.NewBedrockStream(io.NopCloser(&buf)), 0)
		got, err := rd.Next()
		if tc.ok != (err == nil) || tc.ok && string(got.Data) != ev {
			t.Errorf("payload %q: event %q, error %v; want ok %v", tc.payload, got.Data, err, tc.ok)
		}
	}
}
