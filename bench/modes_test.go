package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
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

// TestPrintTableFailures: failed requests show in the table and the
// targets, and a cell with no success is a FAILED row, not a figure.
func TestPrintTableFailures(t *testing.T) {
	const ms = 1e6
	rs := []cellResult{
		{mode: "gemini-stream", config: "direct", conc: 1, rps: 3000, p50: 300e3, p99: ms, cpuPer1k: -1, hwmKB: -1, requests: 3000},
		{mode: "gemini-stream", config: "reverse_proxy", conc: 1, rps: 1500, p50: 500e3, p99: ms, cpuPer1k: 0.3, hwmKB: 50 << 10, requests: 1500},
		{mode: "gemini-stream", config: "llm_hedge", conc: 1, rps: 1400, p50: 520e3, p99: ms, cpuPer1k: 0.3, hwmKB: 50 << 10, requests: 1400, failed: 7, failSample: "stream without a finishReason chunk"},
		{mode: "gemini-stream", config: "llm_hedge_3", conc: 1, cpuPer1k: -1, hwmKB: -1, failed: 9000, failSample: "status 404: no such endpoint"},
	}
	f, err := os.CreateTemp(t.TempDir(), "table")
	if err != nil {
		t.Fatal(err)
	}
	printTable(f, rs, []string{"gemini-stream"}, []int{1}, []string{"direct", "reverse_proxy", "llm_hedge", "llm_hedge_3"})
	f.Close()
	b, _ := os.ReadFile(f.Name())
	out := string(b)
	for _, want := range []string{
		"7 of 1407 requests FAILED, e.g. stream without a finishReason chunk",
		"llm_hedge_3  FAILED  ",
		"9000 of 9000 requests FAILED, e.g. status 404",
		"FAILED requests: 7 here, 0 in reverse_proxy",
		"llm_hedge_3  FAILED: no request succeeded (9000 errors)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	t.Log("\n" + out)
}
