package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A stream whose committing event is also its last (a Responses
// response.incomplete before any output), in CRLF lines, read up to the
// last CR with its LF still to come: the client gets the LF too, as the
// relay gives it for a terminal event it reads. Without it a client that
// splits events at "\r\n\r\n" never sees the end of the answer. The
// official SDK reads it too.
func TestGateEndedCRLFCutBeforeLF(t *testing.T) {
	events := "event: response.created\r\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_c\",\"object\":\"response\",\"created_at\":1,\"status\":\"in_progress\",\"model\":\"gpt-x\",\"output\":[]}}\r\n\r\n" +
		"event: response.incomplete\r\ndata: {\"type\":\"response.incomplete\",\"sequence_number\":1,\"response\":{\"id\":\"resp_c\",\"object\":\"response\",\"created_at\":1,\"status\":\"incomplete\",\"incomplete_details\":{\"reason\":\"max_output_tokens\"},\"model\":\"gpt-x\",\"output\":[],\"usage\":{\"input_tokens\":7,\"output_tokens\":16,\"total_tokens\":23}}}\r\n\r\n"
	_, up := newPathsUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		io.Copy(io.Discard, req.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, events[:len(events)-1])
		w.(http.Flusher).Flush()
		time.Sleep(300 * time.Millisecond) // the LF comes in the provider's next write
		io.WriteString(w, events[len(events)-1:])
	}))
	p := startProxy(t, fmt.Sprintf("\t\tprovider only %s {\n\t\t\tapi openai\n\t\t\tkey sk-up\n\t\t}\n\t\thedge {\n\t\t\toff\n\t\t}\n", up))
	req, _ := http.NewRequestWithContext(ctxTimeout(t, 10*time.Second), http.MethodPost, p.URL+"/v1/responses",
		strings.NewReader(`{"model":"gpt-x","stream":true,"input":"hi"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-client")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, %v: %s", resp.StatusCode, err, b)
	}
	if !bytes.Equal(b, []byte(events)) {
		t.Fatalf("the client got %q, want the provider's events exactly", b[max(0, len(b)-80):])
	}
	// The official SDK, asking the same: it gets the answer's end.
	stream := openaiClient(p, "sk-client").Responses.NewStreaming(ctxTimeout(t, 10*time.Second), responsesParams("gpt-x"))
	var types []string
	for stream.Next() {
		types = append(types, stream.Current().Type)
	}
	if err := stream.Err(); err != nil || len(types) != 2 || types[1] != "response.incomplete" {
		t.Fatalf("the SDK saw %v, %v; want response.created, response.incomplete", types, err)
	}
	stream.Close()
}
