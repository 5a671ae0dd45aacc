package engine

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/cloud"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/stream"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// The per-dialect relay benchmarks (issue 24): one simulated answer of the
// bench's size (54 output tokens) per op, through the path a committed
// stream takes: the first-event gate telling the continuation's resumer
// each event (as launch sets it up), then the coalescing relay with
// continuation tracking and usage, as commit does. The upstream delivers one event per read, as the
// simulator flushes each.

// relayCase is one dialect's recorded stream and the request it answers.
type relayCase struct {
	name    string
	d       wire.Dialect
	req     *wire.Request
	stream  []byte // what the upstream sends (Bedrock: event-stream frames)
	bedrock bool
}

const relayBenchTokens = 54

// simAnswer is the simulator's answer to one request, as the upstream sends it.
func simAnswer(t testing.TB, cfg sim.Config, path string, header map[string]string, body string) []byte {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	sim.New(cfg).ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("simulator %s: %d %s", path, w.Code, w.Body.String())
	}
	return w.Body.Bytes()
}

// relayCases are the five stream modes of the bench, as recorded from the
// simulator with tokens output tokens.
func relayCases(t testing.TB, tokens int) []relayCase {
	t.Helper()
	cfg := sim.Config{Tokens: tokens}
	const prompt = `"Write a short paragraph about the sea."`
	type spec struct {
		name, path string
		d          wire.Dialect
		header     map[string]string
		body       string
	}
	specs := []spec{
		{"Anthropic", "/v1/messages", dialectAnthropic, map[string]string{"X-Api-Key": "k", "Anthropic-Version": "2023-06-01"},
			`{"model":"claude-bench","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":` + prompt + `}]}`},
		{"OpenAI", "/v1/chat/completions", dialectOpenAI, map[string]string{"Authorization": "Bearer k"},
			`{"model":"gpt-bench","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":` + prompt + `}]}`},
		{"Responses", "/v1/responses", dialectResponses, map[string]string{"Authorization": "Bearer k"},
			`{"model":"gpt-bench","stream":true,"store":false,"max_output_tokens":1024,"input":` + prompt + `}`},
		{"Gemini", "/v1beta/models/gemini-bench:streamGenerateContent?alt=sse", dialectGemini, map[string]string{"X-Goog-Api-Key": "k"},
			`{"contents":[{"role":"user","parts":[{"text":` + prompt + `}]}],"generationConfig":{"maxOutputTokens":1024}}`},
	}
	var out []relayCase
	for _, s := range specs {
		path, query, _ := strings.Cut(s.path, "?")
		req, err := wire.ParseCompletion(s.d, path, query, []byte(s.body))
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		out = append(out, relayCase{name: s.name, d: s.d, req: req, stream: simAnswer(t, cfg, s.path, s.header, s.body)})
	}
	// Bedrock: the simulator's event stream, read back as Anthropic SSE.
	bcfg := sim.Config{Tokens: tokens, Wire: sim.WireBedrock, Key: "k", Region: "us-east-1"}
	frames := simAnswer(t, bcfg, "/model/anthropic.claude-bench-v1%3A0/invoke-with-response-stream",
		map[string]string{"Authorization": "Bearer k", "Accept": "application/vnd.amazon.eventstream"},
		`{"anthropic_version":"bedrock-2023-05-31","max_tokens":1024,"messages":[{"role":"user","content":`+prompt+`}]}`)
	req, err := wire.ParseCompletion(dialectAnthropic, "/v1/messages", "", []byte(specs[0].body))
	if err != nil {
		t.Fatal(err)
	}
	return append(out, relayCase{name: "Bedrock", d: dialectAnthropic, req: req, stream: frames, bedrock: true})
}

// eventReads serves a stream in reads that each end at an event boundary
// (SSE "\n\n", or an event-stream frame's length), one event per read.
type eventReads struct {
	data    []byte
	off     int
	bedrock bool
}

func (r *eventReads) Read(p []byte) (int, error) {
	if r.off == len(r.data) {
		return 0, io.EOF
	}
	rest := r.data[r.off:]
	n := len(rest)
	if r.bedrock {
		if len(rest) >= 4 {
			n = int(uint32(rest[0])<<24 | uint32(rest[1])<<16 | uint32(rest[2])<<8 | uint32(rest[3]))
		}
	} else if i := bytes.Index(rest, []byte("\n\n")); i >= 0 {
		n = i + 2
	}
	n = copy(p, rest[:min(n, len(rest))])
	r.off += n
	return n, nil
}

func (r *eventReads) Close() error { return nil }

// relayRun is the reusable state of one benchmarked stream: what an
// attempt and its commit hold.
type relayRun struct {
	c    relayCase
	up   eventReads
	rd   *sse.Reader
	gate *stream.Gate
	told *waiterSlot // as a cleartext provider's connection (internal/upconn): a Waiter is set, and never told (the bytes are all there)
	// untracked: no resumer, as a translated stream (a continuation never
	// crosses formats) or one with continuation off is relayed.
	untracked bool
}

func newRelayRun(c relayCase) *relayRun {
	return &relayRun{c: c, rd: sse.NewReader(nil, 0), gate: stream.NewGate(c.d, nil, 0, 0)}
}

// run relays the recorded stream once, as commit does, and returns the
// relay's result and the events it and the gate read.
func (r *relayRun) run(tb testing.TB, u *wire.Usage) (stream.RelayResult, int) {
	r.up = eventReads{data: r.c.stream, bedrock: r.c.bedrock}
	var body io.Reader = &r.up
	if r.c.bedrock {
		bs := cloud.NewBedrockStream(&r.up)
		defer func() { // as commit ends a complete stream (reuseConn): the decoder's buffers go back to their pool
			_, _ = io.CopyN(io.Discard, bs, tailMax)
			_ = bs.Close()
		}()
		body = bs
	}
	r.rd.Reset(body)
	r.gate.Reset(r.c.d, nil, 0, 0)
	var rs wire.Resumer
	if !r.untracked {
		rs = wire.NewResumer(r.c.d, r.c.req) // as launch sets it up: told the gate's events
	}
	r.gate.Track, r.gate.Usage = rs, u
	gated := 0
	for decision := stream.GateHold; decision == stream.GateHold; {
		ev, err := r.rd.Next()
		if err != nil {
			tb.Fatalf("%s: before commit: %v", r.c.name, err)
		}
		gated++
		if decision = r.gate.Feed(ev); decision == stream.GateFail {
			tb.Fatalf("%s: gate failed: %v", r.c.name, r.gate.Err())
		}
	}
	opts := stream.RelayOptions{Idle: time.Minute, FinishGrace: time.Second, Choices: r.gate.Choices,
		Coalesce: true, Track: rs, HoldError: rs != nil}
	if r.told != nil {
		opts.Upstream, opts.EndUnflushed = r.told, true
	}
	res := stream.Relay(context.Background(), io.Discard, func() error { return nil }, r.rd, r.c.d, u, opts, func() {})
	return res, gated + res.Events
}

func benchmarkRelayDialect(b *testing.B, name string, told bool) {
	benchmarkRelayCase(b, name, told, false)
}

func benchmarkRelayCase(b *testing.B, name string, told, untracked bool) {
	var c relayCase
	for _, rc := range relayCases(b, relayBenchTokens) {
		if rc.name == name {
			c = rc
		}
	}
	run := newRelayRun(c)
	run.untracked = untracked
	if told {
		run.told = &waiterSlot{}
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(c.stream)))
	events := 0
	for b.Loop() {
		var u wire.Usage
		res, n := run.run(b, &u)
		if !res.Complete || u.Output != relayBenchTokens {
			b.Fatalf("%s: %+v, usage %+v", name, res, u)
		}
		events = n
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*events), "ns/event")
	b.ReportMetric(float64(events), "events")
}

func BenchmarkRelayAnthropic(b *testing.B) { benchmarkRelayDialect(b, "Anthropic", false) }
func BenchmarkRelayOpenAI(b *testing.B)    { benchmarkRelayDialect(b, "OpenAI", false) }
func BenchmarkRelayResponses(b *testing.B) { benchmarkRelayDialect(b, "Responses", false) }
func BenchmarkRelayGemini(b *testing.B)    { benchmarkRelayDialect(b, "Gemini", false) }
func BenchmarkRelayBedrock(b *testing.B)   { benchmarkRelayDialect(b, "Bedrock", false) }

// The same over a cleartext provider's connection, which says where a
// read waits (RelayOptions.Upstream): the bench's simulated providers.
func BenchmarkRelayAnthropicTold(b *testing.B) { benchmarkRelayDialect(b, "Anthropic", true) }
func BenchmarkRelayGeminiTold(b *testing.B)    { benchmarkRelayDialect(b, "Gemini", true) }

// A Chat Completions stream with no resumer: how a Chat client's
// translated stream is relayed (its deltas read by the frame, as a
// tracked stream's are).
func BenchmarkRelayOpenAIUntracked(b *testing.B) { benchmarkRelayCase(b, "OpenAI", false, true) }
