package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// TestBenchModesCheck sends every mode's request to the simulator and
// requires its check to pass the whole answer and to fail the answer
// without its last event, or with a body that is no stream at all.
func TestBenchModesCheck(t *testing.T) {
	wantEvents := map[string]int{"non-stream": 0, "stream": 60, "responses-stream": 62, "gemini-stream": 55}
	for name, m := range benchModes {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(sim.New(sim.Config{Tokens: m.tokens}))
			defer srv.Close()
			resp, err := http.DefaultClient.Do(m.newRequest(context.Background(), srv.URL))
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d, %v: %.300s", resp.StatusCode, err, b)
			}
			if err := m.check(b); err != nil {
				t.Fatalf("complete answer rejected: %v", err)
			}
			if got := countEvents(b); got != wantEvents[name] {
				t.Errorf("%d events, want %d", got, wantEvents[name])
			}
			if name == "non-stream" {
				if m.check(b[:len(b)/2]) == nil {
					t.Error("truncated body passed")
				}
				return
			}
			// As relayed with LF line ends only.
			if lf := bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n")); m.check(lf) != nil {
				t.Errorf("LF-only stream rejected: %v", m.check(lf))
			}
			sep := "\n\n"
			if bytes.HasSuffix(b, []byte("\r\n\r\n")) {
				sep = "\r\n\r\n"
			}
			body := strings.TrimSuffix(string(b), sep)
			cut := body[:strings.LastIndex(body, sep)+len(sep)]
			for desc, bad := range map[string]string{
				"without its last event":  cut,
				"cut inside the last one": body,
				"error JSON":              `{"error":{"type":"not_found","message":"no"}}`,
				"empty":                   "",
			} {
				if m.check([]byte(bad)) == nil {
					t.Errorf("stream %s passed", desc)
				}
			}
		})
	}
}
