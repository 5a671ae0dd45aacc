package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Non-stream answers of unknown length (chunked, as an HTTP/2 provider
// sends them) in the pooled sizes, several requests at once, after a
// provider whose 200 is an error dressed as an answer (read into a pooled
// buffer too, then failed over): every client gets its own answer, byte
// for byte, so no answer was read into or written from a buffer another
// request held.
func TestPooledAnswersReachClientsWhole(t *testing.T) {
	chunked := func(w http.ResponseWriter, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		for len(body) > 0 {
			n := min(len(body), 4096)
			_, _ = w.Write(body[:n])
			w.(http.Flusher).Flush() // no Content-Length: the proxy reads to the end
			body = body[n:]
		}
	}
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		msg := strings.Repeat("busy ", 6_000)
		chunked(w, fmt.Appendf(nil, `{"type":"error","error":{"type":"overloaded_error","message":%q}}`, msg))
	}))
	defer fake.Close()
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct{ Content string } `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		chunked(w, answerFor(req.Messages[0].Content))
	}))
	defer ok.Close()
	postEach(t, failoverFront(t, fake.URL, ok.URL), 4, 6, func(c, i int) []byte {
		return fmt.Appendf(nil, `{"model":"claude-x","max_tokens":5,"messages":[{"role":"user","content":%q}]}`, marker(c, i))
	}, func(c, i, status int, got []byte) error {
		if want := answerFor(marker(c, i)); status != http.StatusOK || !bytes.Equal(got, want) {
			return fmt.Errorf("status %d, %d bytes (want %d): %.200s", status, len(got), len(want), got)
		}
		return nil
	})
}

func marker(c, i int) string { return fmt.Sprintf("client %d turn %d;", c, i) }

// answerFor is the complete Anthropic answer to the prompt marker: its
// text the marker repeated, 20-90 KB long by the marker's bytes.
func answerFor(marker string) []byte {
	n := 20_000 + int(marker[len(marker)-2]-'0')*14_000 + int(marker[7]-'0')*3_000
	text := strings.Repeat(marker, n/len(marker)+1)
	return fmt.Appendf(nil, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":%q}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":%d}}`, text, n/4)
}
