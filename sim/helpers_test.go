package sim

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const (
	anthropicStreamBody = `{"model":"claude-test","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
	anthropicBody       = `{"model":"claude-test","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`
	openaiStreamBody    = `{"model":"gpt-test","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
	openaiBody          = `{"model":"gpt-test","messages":[{"role":"user","content":"hi"}]}`
)

// serve runs a simulator under httptest until the test ends.
func serve(t *testing.T, cfg Config) (*Simulator, *httptest.Server) {
	t.Helper()
	s := New(cfg)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv
}

// post sends body to path and returns the response; the caller closes it.
func post(t *testing.T, ctx context.Context, srv *httptest.Server, path, body string, header ...string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return srv.Client().Do(req)
}

// mustPost is post for requests that must get a response.
func mustPost(t *testing.T, srv *httptest.Server, path, body string, header ...string) *http.Response {
	t.Helper()
	resp, err := post(t, t.Context(), srv, path, body, header...)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// event is one server-sent event; name is empty for data-only events.
type event struct{ name, data string }

// nextEvent reads one event from an SSE body.
func nextEvent(br *bufio.Reader) (event, error) {
	var ev event
	for {
		line, err := br.ReadString('\n')
		switch {
		case errors.Is(err, io.EOF) && (line != "" || ev != (event{})):
			return ev, io.ErrUnexpectedEOF // an event cut short
		case err != nil:
			return ev, err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if ev != (event{}) {
				return ev, nil
			}
		case strings.HasPrefix(line, "event: "):
			ev.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			ev.data = strings.TrimPrefix(line, "data: ")
		}
	}
}

// readEvents reads every event up to the end of the body; err is what
// ended the reading (io.EOF for a clean end).
func readEvents(body io.Reader) (events []event, err error) {
	br := bufio.NewReader(body)
	for {
		ev, err := nextEvent(br)
		if err != nil {
			return events, err
		}
		events = append(events, ev)
	}
}

// names lists the event names (or, for data-only events, the data).
func names(events []event) []string {
	out := make([]string, len(events))
	for i, ev := range events {
		out[i] = ev.name
		if ev.name == "" {
			out[i] = ev.data
		}
	}
	return out
}

// waitFor waits, without sleeping, until cond holds for the records.
func waitFor(t *testing.T, s *Simulator, what string, cond func([]RequestRecord) bool) []RequestRecord {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		changed := s.Changed()
		if recs := s.Requests(); cond(recs) {
			return recs
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("timed out waiting for %s; records: %+v", what, s.Requests())
		}
	}
}

// lastRecord waits for the simulator to go idle and returns the latest record.
func lastRecord(t *testing.T, s *Simulator) RequestRecord {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := s.WaitIdle(ctx); err != nil {
		t.Fatalf("waiting for the simulator to go idle: %v", err)
	}
	recs := s.Requests()
	if len(recs) == 0 {
		t.Fatal("no request recorded")
	}
	return recs[len(recs)-1]
}
