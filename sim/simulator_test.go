package sim

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
)

func TestHTTPErrors(t *testing.T) {
	tests := []struct {
		name       string
		method     string
		path, body string
		header     []string
		wantStatus int
		wantShape  string // "anthropic" or "openai"
		wantType   string
	}{
		{"unknown path, anthropic", http.MethodPost, "/v1/complete", "{}", []string{"X-Api-Key", "k"}, 404, "anthropic", "not_found_error"},
		{"unknown path, openai", http.MethodPost, "/v1/embeddings", "{}", nil, 404, "openai", "invalid_request_error"},
		{"wrong method", http.MethodGet, "/v1/messages", "", nil, 405, "anthropic", "invalid_request_error"},
		{"malformed JSON, anthropic", http.MethodPost, "/v1/messages", `{"model":`, nil, 400, "anthropic", "invalid_request_error"},
		{"malformed JSON, openai", http.MethodPost, "/v1/chat/completions", `not json`, nil, 400, "openai", "invalid_request_error"},
		{"no model", http.MethodPost, "/v1/messages", `{"max_tokens":1}`, nil, 400, "anthropic", "invalid_request_error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, srv := serve(t, Config{})
			req, _ := http.NewRequestWithContext(t.Context(), tt.method, srv.URL+tt.path, strings.NewReader(tt.body))
			for i := 0; i+1 < len(tt.header); i += 2 {
				req.Header.Set(tt.header[i], tt.header[i+1])
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var got errorShape
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.wantStatus || got.Error.Type != tt.wantType || got.Error.Message == "" {
				t.Errorf("got %d %+v", resp.StatusCode, got)
			}
			if (got.Type == "error") != (tt.wantShape == "anthropic") {
				t.Errorf("body %+v is not in the %s shape", got, tt.wantShape)
			}
			if rec := lastRecord(t, s); rec.Status != tt.wantStatus || rec.Fault != nil {
				t.Errorf("record = %+v", rec)
			}
		})
	}
}

func TestBodyTooLarge(t *testing.T) {
	defer func(saved int64) { maxBody = saved }(maxBody)
	maxBody = 100
	_, srv := serve(t, Config{})
	resp := mustPost(t, srv, "/v1/messages", `{"model":"m","pad":"`+strings.Repeat("x", 200)+`"}`)
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("status = %d, want 413", resp.StatusCode)
	}
}

func TestFaultMatching(t *testing.T) {
	tests := []struct {
		name   string
		faults []Fault
		models []string // one request each
		want   []int    // status of each
	}{
		{"count", []Fault{{Kind: FaultStatus, Status: 529, Count: 2}},
			[]string{"a", "a", "a"}, []int{529, 529, 200}},
		{"model glob", []Fault{{Kind: FaultStatus, Status: 404, Model: "claude-*"}},
			[]string{"claude-x", "gpt-x", "claude-y"}, []int{404, 200, 404}},
		{"first match wins", []Fault{{Kind: FaultStatus, Status: 429, Model: "a"}, {Kind: FaultStatus, Status: 500}},
			[]string{"a", "b"}, []int{429, 500}},
		{"spent fault falls through", []Fault{{Kind: FaultStatus, Status: 429, Count: 1}, {Kind: FaultStatus, Status: 503, Count: 1}},
			[]string{"a", "a", "a"}, []int{429, 503, 200}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, srv := serve(t, Config{Faults: tt.faults})
			for i, model := range tt.models {
				resp := mustPost(t, srv, "/v1/messages", `{"model":"`+model+`","max_tokens":1,"messages":[]}`)
				io.Copy(io.Discard, resp.Body)
				if resp.StatusCode != tt.want[i] {
					t.Errorf("request %d (%s): status %d, want %d", i, model, resp.StatusCode, tt.want[i])
				}
			}
			if got, want := s.Stats().Requests, int64(len(tt.models)); got != want {
				t.Errorf("requests = %d, want %d", got, want)
			}
		})
	}
}

// TestSeededRandomness checks a seed makes the slow share and fault
// percent reproducible, and that the shares are about right.
func TestSeededRandomness(t *testing.T) {
	draw := func(seed int64) (slow, faulted int) {
		s := New(Config{
			Seed: seed, SlowPercent: 10, SlowFirstToken: hour,
			Faults: []Fault{{Kind: FaultStatus, Percent: 30}},
		})
		p := s.plan.Load()
		for range 1000 {
			if p.firstTokenDelay() == time.Hour {
				slow++
			}
			if p.pickFault("m", nil, "") != nil {
				faulted++
			}
		}
		return slow, faulted
	}
	slow1, faulted1 := draw(7)
	slow2, faulted2 := draw(7)
	if slow1 != slow2 || faulted1 != faulted2 {
		t.Errorf("same seed, different draws: %d/%d vs %d/%d", slow1, faulted1, slow2, faulted2)
	}
	if slow1 < 50 || slow1 > 150 || faulted1 < 230 || faulted1 > 370 {
		t.Errorf("slow %d/1000 (want ~100), faulted %d/1000 (want ~300)", slow1, faulted1)
	}
}

// TestSetFaults flips a provider from failing to healthy at runtime.
func TestSetFaults(t *testing.T) {
	s, srv := serve(t, Config{Faults: []Fault{{Kind: FaultStatus, Status: 503}}})
	status := func() int {
		resp := mustPost(t, srv, "/v1/chat/completions", openaiBody)
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	if got := status(); got != 503 {
		t.Fatalf("status = %d, want 503", got)
	}
	if err := s.SetFaults(nil); err != nil {
		t.Fatal(err)
	}
	if got := status(); got != 200 {
		t.Fatalf("after SetFaults(nil): status = %d, want 200", got)
	}
	if err := s.SetFaults([]Fault{{Kind: "nope"}}); err == nil {
		t.Error("SetFaults accepted an unknown kind")
	}
	if err := s.SetConfig(Config{Text: "changed", Tokens: 1, Faults: []Fault{{Kind: FaultStatus, Status: 429, Count: 1}}}); err != nil {
		t.Fatal(err)
	}
	if got := status(); got != 429 {
		t.Fatalf("after SetConfig: status = %d, want 429", got)
	}
	resp := mustPost(t, srv, "/v1/chat/completions", openaiBody)
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), `"content":"changed"`) {
		t.Errorf("body = %s", body)
	}
	if cfg := s.Config(); cfg.Text != "changed" || len(cfg.Faults) != 1 || *cfg.Pings != DefaultPings {
		t.Errorf("Config() = %+v", cfg)
	}
}

func TestRecordsAndReset(t *testing.T) {
	s := New(Config{})
	for range maxRecords + 5 {
		r := httptest.NewRequest(http.MethodGet, "/v1/models", nil)
		s.ServeHTTP(httptest.NewRecorder(), r)
	}
	recs := s.Requests()
	if len(recs) != maxRecords {
		t.Fatalf("%d records, want the latest %d", len(recs), maxRecords)
	}
	for i := 1; i < len(recs); i++ {
		if recs[i].Start.Before(recs[i-1].Start) {
			t.Fatalf("records out of order at %d", i)
		}
	}
	if st := s.Stats(); st.Requests != maxRecords+5 || st.InFlight != 0 {
		t.Errorf("stats = %+v", st)
	}
	s.ResetStats()
	if st, recs := s.Stats(), s.Requests(); st != (Stats{}) || len(recs) != 0 {
		t.Errorf("after reset: %+v, %d records", st, len(recs))
	}
}

func TestSplitText(t *testing.T) {
	tests := []struct {
		text string
		n    int
		want []string
	}{
		{"a b c", 3, []string{"a ", "b ", "c"}},
		{"a b c d", 2, []string{"a b ", "c d"}},
		{"a b", 5, []string{"a ", "b ", "a ", "b ", "a"}},
		{"one.", 3, []string{"one. ", "one. ", "one."}},
		{"  lead  and\ntrail ", 3, []string{"  lead  ", "and\n", "trail "}},
		{"x", 1, []string{"x"}},
	}
	for _, tt := range tests {
		got := splitText(tt.text, tt.n)
		if strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("splitText(%q, %d) = %q, want %q", tt.text, tt.n, got, tt.want)
		}
	}
}

// TestFirstTokenJitter: jitter spreads the first-token delay over
// [d(1-j), d(1+j)] and never leaves it.
func TestFirstTokenJitter(t *testing.T) {
	p := compile(Config{FirstToken: caddy.Duration(100 * time.Millisecond), FirstTokenJitter: 20, Seed: 7})
	lo, hi := time.Hour, time.Duration(0)
	for range 1000 {
		d := p.firstTokenDelay()
		lo, hi = min(lo, d), max(hi, d)
	}
	if lo < 80*time.Millisecond || hi > 120*time.Millisecond {
		t.Fatalf("delays in [%v, %v], want within [80ms, 120ms]", lo, hi)
	}
	if lo > 85*time.Millisecond || hi < 115*time.Millisecond {
		t.Fatalf("delays in [%v, %v]: 1000 draws should reach near both ends", lo, hi)
	}
	if d := compile(Config{FirstToken: caddy.Duration(100 * time.Millisecond)}).firstTokenDelay(); d != 100*time.Millisecond {
		t.Fatalf("without jitter: %v, want 100ms", d)
	}
}
