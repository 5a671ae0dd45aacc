package sim

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"

	"github.com/caddyserver/caddy/v2"
)

// errorShape decodes both dialects' error bodies.
type errorShape struct {
	Type  string `json:"type"`
	Error struct {
		Type    string  `json:"type"`
		Message string  `json:"message"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func TestStatusFault(t *testing.T) {
	tests := []struct {
		name            string
		fault           Fault
		path, body      string
		wantStatus      int
		wantType        string
		wantMessage     string
		wantRetryAfter  string
		wantShouldRetry string
	}{
		{"anthropic overloaded", Fault{Kind: FaultStatus, Status: 529}, "/v1/messages", anthropicStreamBody,
			529, "overloaded_error", "Overloaded", "", ""},
		{"anthropic rate limit with retry-after", Fault{Kind: FaultStatus, Status: 429, RetryAfter: "2"}, "/v1/messages", anthropicBody,
			429, "rate_limit_error", "rate limit", "2", ""},
		{"anthropic prompt too long, no retry", Fault{Kind: FaultStatus, Status: 400, NoRetry: true}, "/v1/messages", anthropicBody,
			400, "invalid_request_error", "prompt is too long", "", "false"},
		{"anthropic unknown model", Fault{Kind: FaultStatus, Status: 404}, "/v1/messages", anthropicBody,
			404, "not_found_error", "model: claude-test", "", ""},
		{"anthropic default status", Fault{Kind: FaultStatus}, "/v1/messages", anthropicBody,
			500, "api_error", "Internal server error", "", ""},
		{"anthropic retry-after date", Fault{Kind: FaultStatus, Status: 503, RetryAfter: "Wed, 21 Oct 2015 07:28:00 GMT"}, "/v1/messages", anthropicBody,
			503, "overloaded_error", "Overloaded", "Wed, 21 Oct 2015 07:28:00 GMT", ""},
		{"openai server error", Fault{Kind: FaultStatus, Status: 500}, "/v1/chat/completions", openaiStreamBody,
			500, "server_error", "error while processing", "", ""},
		{"openai rate limit", Fault{Kind: FaultStatus, Status: 429, RetryAfter: "1"}, "/v1/chat/completions", openaiBody,
			429, "requests", "Rate limit", "1", ""},
		{"models list", Fault{Kind: FaultStatus, Status: 503}, "/v1/models", "", 0, "", "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, srv := serve(t, Config{Faults: []Fault{tt.fault}})
			if tt.path == "/v1/models" {
				resp, err := srv.Client().Get(srv.URL + tt.path)
				if err != nil || resp.StatusCode != http.StatusServiceUnavailable {
					t.Fatalf("GET /v1/models = %v, %v", resp, err)
				}
				resp.Body.Close()
				return
			}
			resp := mustPost(t, srv, tt.path, tt.body)
			var got errorShape
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
				t.Fatalf("decoding the error body: %v", err)
			}
			if resp.StatusCode != tt.wantStatus || got.Error.Type != tt.wantType || !strings.Contains(got.Error.Message, tt.wantMessage) {
				t.Errorf("got %d %+v, want %d %s %q", resp.StatusCode, got, tt.wantStatus, tt.wantType, tt.wantMessage)
			}
			if strings.HasPrefix(tt.path, "/v1/messages") != (got.Type == "error") {
				t.Errorf("top-level type %q in the wrong dialect", got.Type)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			if ra, sr := resp.Header.Get("Retry-After"), resp.Header.Get("X-Should-Retry"); ra != tt.wantRetryAfter || sr != tt.wantShouldRetry {
				t.Errorf("Retry-After, x-should-retry = %q, %q", ra, sr)
			}
			if rec := lastRecord(t, s); rec.Fault == nil || rec.Fault.Kind != FaultStatus || rec.Status != tt.wantStatus || rec.Deltas != 0 {
				t.Errorf("record = %+v", rec)
			}
		})
	}
}

func TestFake200(t *testing.T) {
	tests := []struct {
		name       string
		path, body string
		wantEvents []string
	}{
		{"anthropic stream", "/v1/messages", anthropicStreamBody, []string{"error"}},
		{"openai stream", "/v1/chat/completions", openaiStreamBody, []string{`{"error":{"message":"The engine is currently overloaded, please try again later","type":"server_error","param":null,"code":"overloaded"}}`}},
		{"anthropic", "/v1/messages", anthropicBody, nil},
		{"openai", "/v1/chat/completions", openaiBody, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, srv := serve(t, Config{Faults: []Fault{{Kind: FaultFake200}}})
			resp := mustPost(t, srv, tt.path, tt.body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status = %d, want 200", resp.StatusCode)
			}
			if tt.wantEvents != nil {
				events, err := readEvents(resp.Body)
				if !errors.Is(err, io.EOF) || !slices.Equal(names(events), tt.wantEvents) {
					t.Fatalf("events = %q (%v), want %q", names(events), err, tt.wantEvents)
				}
				if tt.path == "/v1/messages" && events[0].data != `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}` {
					t.Errorf("error event data = %s", events[0].data)
				}
			} else {
				var got errorShape
				if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || got.Error.Type == "" {
					t.Errorf("body = %+v, %v; want an error object", got, err)
				}
			}
			if rec := lastRecord(t, s); rec.Fault == nil || rec.Fault.Kind != FaultFake200 || rec.Deltas != 0 {
				t.Errorf("record = %+v", rec)
			}
		})
	}

	// The SDKs see the error in the 200 stream.
	_, srv := serve(t, Config{Faults: []Fault{{Kind: FaultFake200}}})
	aclient := anthropicClient(srv, "k")
	astream := aclient.Messages.NewStreaming(t.Context(), anthropicParams)
	for astream.Next() {
	}
	var aerr *anthropic.Error
	if !errors.As(astream.Err(), &aerr) || aerr.Type() != "overloaded_error" {
		t.Errorf("anthropic stream error = %v", astream.Err())
	}
	astream.Close()
	oclient := openaiClient(srv, "k")
	ostream := oclient.Chat.Completions.NewStreaming(t.Context(), openaiParams)
	for ostream.Next() {
	}
	if ostream.Err() == nil {
		t.Error("openai stream: no error")
	}
	ostream.Close()
}

// wantAnthropic is the event sequence of a complete Anthropic stream with
// one ping and n deltas.
func wantAnthropic(n int, extra ...string) []string {
	out := []string{"message_start", "content_block_start", "ping"}
	for range n {
		out = append(out, "content_block_delta")
	}
	return append(append(out, extra...), "content_block_stop", "message_delta", "message_stop")
}

func TestStreamSequences(t *testing.T) {
	tests := []struct {
		name    string
		fault   *Fault
		wantErr error
		want    []string
	}{
		{"healthy", nil, io.EOF, wantAnthropic(4)},
		{"cut after 2", &Fault{Kind: FaultCut, After: 2}, io.EOF,
			[]string{"message_start", "content_block_start", "ping", "content_block_delta", "content_block_delta"}},
		{"cut after 0", &Fault{Kind: FaultCut}, io.EOF, []string{"message_start", "content_block_start", "ping"}},
		{"cut after the last delta", &Fault{Kind: FaultCut, After: 99}, io.EOF, wantAnthropic(4)[:7]},
		{"malformed after 1", &Fault{Kind: FaultMalformed, After: 1}, io.EOF,
			[]string{"message_start", "content_block_start", "ping", "content_block_delta", "content_block_delta",
				"content_block_delta", "content_block_delta", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{Tokens: 4}
			if tt.fault != nil {
				cfg.Faults = []Fault{*tt.fault}
			}
			s, srv := serve(t, cfg)
			resp := mustPost(t, srv, "/v1/messages", anthropicStreamBody)
			if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
				t.Errorf("Content-Type = %q", ct)
			}
			events, err := readEvents(resp.Body)
			if !errors.Is(err, tt.wantErr) || !slices.Equal(names(events), tt.want) {
				t.Fatalf("events = %q (%v), want %q (%v)", names(events), err, tt.want, tt.wantErr)
			}
			var text strings.Builder
			malformed := 0
			for _, ev := range events {
				var data struct {
					Type  string `json:"type"`
					Delta struct {
						Text string `json:"text"`
					} `json:"delta"`
				}
				if err := json.Unmarshal([]byte(ev.data), &data); err != nil {
					malformed++
					continue
				}
				if data.Type != ev.name {
					t.Errorf("event %q carries type %q", ev.name, data.Type)
				}
				text.WriteString(data.Delta.Text)
			}
			wantMalformed := 0
			if tt.fault != nil && tt.fault.Kind == FaultMalformed {
				wantMalformed = 1
			}
			if full := strings.Join(splitText(s.Config().Text, 4), ""); !strings.HasPrefix(full, text.String()) ||
				(tt.want[len(tt.want)-1] == "message_stop" && text.String() != full) {
				t.Errorf("text = %q, want %q or a prefix of it when cut", text.String(), full)
			}
			if malformed != wantMalformed {
				t.Errorf("%d events are not JSON, want %d", malformed, wantMalformed)
			}
			if rec := lastRecord(t, s); rec.Canceled || (tt.fault == nil) != (rec.Fault == nil) {
				t.Errorf("record = %+v", rec)
			}
		})
	}
}

func TestOpenAIStreamSequences(t *testing.T) {
	tests := []struct {
		name  string
		fault *Fault
		body  string
		want  []string // "role", "content", "stop", "usage", "[DONE]", "bad"
	}{
		{"with usage", nil, openaiStreamBody, []string{"role", "content", "content", "stop", "usage", "[DONE]"}},
		{"without usage", nil, strings.Replace(openaiStreamBody, "true}", "false}", 1), []string{"role", "content", "content", "stop", "[DONE]"}},
		{"cut after 1", &Fault{Kind: FaultCut, After: 1}, openaiStreamBody, []string{"role", "content"}},
		{"malformed after 1", &Fault{Kind: FaultMalformed, After: 1}, openaiStreamBody, []string{"role", "content", "bad", "content", "stop", "usage", "[DONE]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{Tokens: 2}
			if tt.fault != nil {
				cfg.Faults = []Fault{*tt.fault}
			}
			_, srv := serve(t, cfg)
			resp := mustPost(t, srv, "/v1/chat/completions", tt.body)
			events, err := readEvents(resp.Body)
			if !errors.Is(err, io.EOF) {
				t.Fatalf("reading: %v", err)
			}
			var got []string
			for _, ev := range events {
				if ev.data == "[DONE]" {
					got = append(got, "[DONE]")
					continue
				}
				var chunk openai.ChatCompletionChunk
				if err := json.Unmarshal([]byte(ev.data), &chunk); err != nil {
					got = append(got, "bad")
					continue
				}
				switch {
				case len(chunk.Choices) == 0 && chunk.Usage.TotalTokens > 0:
					got = append(got, "usage")
				case len(chunk.Choices) == 1 && chunk.Choices[0].Delta.Role == "assistant":
					got = append(got, "role")
				case len(chunk.Choices) == 1 && chunk.Choices[0].FinishReason == "stop":
					got = append(got, "stop")
				case len(chunk.Choices) == 1 && chunk.Choices[0].Delta.Content != "":
					got = append(got, "content")
				default:
					got = append(got, "?"+ev.data)
				}
				if chunk.Object != "chat.completion.chunk" || chunk.Model != "gpt-test" || chunk.Created == 0 || chunk.ID == "" {
					t.Errorf("chunk = %s", ev.data)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("chunks = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestNonStreamMidStreamFaults(t *testing.T) {
	tests := []struct {
		name       string
		kind       FaultKind
		wantReadOK bool
	}{
		{"cut drops the connection", FaultCut, false},
		{"malformed is truncated JSON", FaultMalformed, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, srv := serve(t, Config{Faults: []Fault{{Kind: tt.kind}}})
			resp := mustPost(t, srv, "/v1/messages", anthropicBody)
			body, err := io.ReadAll(resp.Body)
			if (err == nil) != tt.wantReadOK {
				t.Errorf("reading the body: %v", err)
			}
			if json.Valid(body) || len(body) == 0 {
				t.Errorf("body = %q, want a JSON fragment", body)
			}
		})
	}
}

func TestReset(t *testing.T) {
	for _, path := range []string{"/v1/messages", "/v1/chat/completions"} {
		t.Run(path, func(t *testing.T) {
			s, srv := serve(t, Config{Faults: []Fault{{Kind: FaultReset}}})
			resp, err := post(t, t.Context(), srv, path, openaiBody)
			if err == nil {
				resp.Body.Close()
				t.Fatalf("got a response (%d), want a dropped connection", resp.StatusCode)
			}
			if rec := lastRecord(t, s); rec.Status != 0 || rec.Fault == nil || rec.Fault.Kind != FaultReset {
				t.Errorf("record = %+v", rec)
			}
		})
	}
}

// TestStallAndCancel checks the moments tests of the proxy rely on: the
// events before the first delta arrive at once, a stall sends nothing more,
// and the client going away is recorded within milliseconds.
func TestStallAndCancel(t *testing.T) {
	tests := []struct {
		name       string
		cfg        Config
		path, body string
		readEvents int // events to read before the client goes away
		wantDeltas int
	}{
		{"stall after 2", Config{Faults: []Fault{{Kind: FaultStall, After: 2}}}, "/v1/messages", anthropicStreamBody, 5, 2},
		{"stall non-stream", Config{Faults: []Fault{{Kind: FaultStall}}}, "/v1/messages", anthropicBody, 0, 0},
		{"slow first token", Config{FirstToken: hour, Pings: new(2)}, "/v1/messages", anthropicStreamBody, 4, 0},
		{"slow first token openai", Config{FirstToken: hour}, "/v1/chat/completions", openaiStreamBody, 1, 0},
		{"slow non-stream", Config{FirstToken: hour}, "/v1/chat/completions", openaiBody, 0, 0},
		{"slow share", Config{SlowPercent: 100, SlowFirstToken: hour}, "/v1/messages", anthropicStreamBody, 3, 0},
		{"token delay", Config{TokenDelay: hour}, "/v1/messages", anthropicStreamBody, 4, 1},
		{"fault delay", Config{Faults: []Fault{{Kind: FaultStatus, Delay: hour}}}, "/v1/messages", anthropicBody, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, srv := serve(t, tt.cfg)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if tt.readEvents > 0 {
				resp, err := post(t, ctx, srv, tt.path, tt.body)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				br := bufio.NewReader(resp.Body)
				for i := range tt.readEvents {
					if _, err := nextEvent(br); err != nil {
						t.Fatalf("event %d: %v", i, err)
					}
				}
			} else {
				// No response comes before the client goes away.
				done := make(chan error, 1)
				go func() {
					resp, err := post(t, ctx, srv, tt.path, tt.body)
					if err == nil {
						resp.Body.Close()
					}
					done <- err
				}()
				defer func() {
					cancel()
					if err := <-done; !errors.Is(err, context.Canceled) {
						t.Errorf("request error = %v, want context.Canceled", err)
					}
				}()
				waitFor(t, s, "the body to be read", func(recs []RequestRecord) bool {
					return len(recs) == 1 && recs[0].BodySize > 0
				})
			}

			canceledAt := time.Now()
			cancel()
			rec := lastRecordFor(t, s, tt.path)
			if !rec.Canceled || rec.Deltas != tt.wantDeltas {
				t.Fatalf("record = %+v, want canceled after %d deltas", rec, tt.wantDeltas)
			}
			// The wrong behaviour waits an hour: 5 s is no margin a loaded
			// machine's scheduling eats.
			if lag := rec.CanceledAt.Sub(canceledAt); lag > 5*time.Second {
				t.Errorf("cancellation observed %v after the client went away", lag)
			}
			if lag := rec.End.Sub(canceledAt); lag > 5*time.Second {
				t.Errorf("request ended %v after the client went away", lag)
			}
			if st := s.Stats(); st.InFlight != 0 || st.Canceled != 1 {
				t.Errorf("stats = %+v", st)
			}
		})
	}
}

const hour = caddy.Duration(time.Hour)

// lastRecordFor waits for the simulator to go idle and returns the latest
// record of path.
func lastRecordFor(t *testing.T, s *Simulator, path string) RequestRecord {
	t.Helper()
	lastRecord(t, s)
	recs := s.Requests()
	for i := len(recs) - 1; i >= 0; i-- {
		if recs[i].Path == path {
			return recs[i]
		}
	}
	t.Fatalf("no record of %s", path)
	return RequestRecord{}
}
