package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// The streaming tests drive the official SDKs through the in-process Caddy
// against the simulator, or, for upstream behaviours the simulator lacks,
// against a scripted httptest handler (streamScript).

// streamTap is an SDK transport that notes when the response headers
// arrived and keeps a copy of every body byte the SDK read, so a test sees
// exactly what the client got.
type streamTap struct {
	mu      sync.Mutex
	headers time.Time
	body    bytes.Buffer
}

func (tp *streamTap) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	tp.mu.Lock()
	tp.headers = time.Now()
	tp.mu.Unlock()
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.TeeReader(resp.Body, tp), resp.Body}
	return resp, nil
}

func (tp *streamTap) Write(b []byte) (int, error) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.body.Write(b)
}

func (tp *streamTap) headersAt() time.Time {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.headers
}

func (tp *streamTap) raw() string {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.body.String()
}

// streamTapped returns SDK clients of the proxy whose traffic goes through
// one new tap.
func streamTapped(p *proxy) (*streamTap, *anthropic.Client, *openai.Client) {
	tap := &streamTap{}
	hc := &http.Client{Transport: tap}
	ac := anthropic.NewClient(aoption.WithBaseURL(p.URL), aoption.WithAPIKey("k"), aoption.WithMaxRetries(0), aoption.WithHTTPClient(hc))
	oc := openai.NewClient(ooption.WithBaseURL(p.URL+"/v1"), ooption.WithAPIKey("k"), ooption.WithMaxRetries(0), ooption.WithHTTPClient(hc))
	return tap, &ac, &oc
}

// streamAsk streams one completion in the dialect through the SDK and
// returns the text the SDK accumulated (also on error) and the SDK's error.
func streamAsk(ctx context.Context, ac *anthropic.Client, oc *openai.Client, dialect string) (id, text string, err error) {
	if dialect == "anthropic" {
		m, err := streamAnthropic(ctx, ac, anthropicParams("claude-test"))
		return m.ID, messageText(m), err
	}
	acc, err := streamOpenAI(ctx, oc, openaiParams("gpt-test"))
	if len(acc.Choices) > 0 {
		text = acc.Choices[0].Message.Content
	}
	return acc.ID, text, err
}

// streamEv is one event of a raw stream.
type streamEv struct{ Name, Data string }

// streamParse splits a raw text/event-stream (LF line ends, as both the
// simulator and the proxy write) into events; comments are skipped.
func streamParse(raw string) []streamEv {
	var out []streamEv
	for _, block := range strings.Split(raw, "\n\n") {
		var ev streamEv
		for _, line := range strings.Split(block, "\n") {
			switch {
			case strings.HasPrefix(line, "event:"):
				ev.Name = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
			case strings.HasPrefix(line, "data:"):
				ev.Data += strings.TrimSpace(strings.TrimPrefix(line, "data:"))
			}
		}
		if ev != (streamEv{}) {
			out = append(out, ev)
		}
	}
	return out
}

// streamLogLines waits (up to 5 s) for at least n request log lines of the
// module and returns them in order: the line is written when the handler
// returns, which may be just after the client saw the end of the response.
func streamLogLines(t testing.TB, p *proxy, n int) []map[string]any {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var lines []map[string]any
		b, err := os.ReadFile(p.LogFile)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) != nil {
				continue
			}
			msg, _ := m["msg"].(string)
			logger, _ := m["logger"].(string)
			if strings.Contains(logger, "llm_hedge") && msg == "llm request" {
				lines = append(lines, m)
			}
		}
		if len(lines) >= n {
			return lines
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d request log lines, want %d", len(lines), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// streamLogLine is the n-th (1-based) request log line.
func streamLogLine(t testing.TB, p *proxy, n int) map[string]any {
	t.Helper()
	return streamLogLines(t, p, n)[n-1]
}

func streamNum(line map[string]any, key string) int64 {
	f, _ := line[key].(float64)
	return int64(f)
}

func streamChain(line map[string]any) []map[string]any {
	raw, _ := line["chain"].([]any)
	var out []map[string]any
	for _, e := range raw {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// streamWait polls cond for up to d; what names the condition.
func streamWait(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// streamLastCompletion is the newest completion record of a simulator.
func streamLastCompletion(t testing.TB, u *upstream) sim.RequestRecord {
	t.Helper()
	recs := u.Requests()
	for i := len(recs) - 1; i >= 0; i-- {
		if r := recs[i]; r.Path == "/v1/messages" || r.Path == "/v1/chat/completions" {
			return r
		}
	}
	t.Fatal("no completion request reached the simulator")
	return sim.RequestRecord{}
}

// streamScript is a scripted upstream on httptest, for behaviours the
// simulator does not have. serve writes the response with send, which
// writes and flushes whole events and reports false once the proxy is gone.
type streamScript struct {
	URL  string
	hits atomic.Int32
	// gone receives once per request whose connection the proxy closed
	// while the script still ran.
	gone chan struct{}
}

func newStreamScript(t testing.TB, serve func(r *http.Request, send func(events ...string) bool)) *streamScript {
	t.Helper()
	sc := &streamScript{gone: make(chan struct{}, 16)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sc.hits.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		send := func(events ...string) bool {
			for _, e := range events {
				if _, err := io.WriteString(w, e); err != nil {
					return false
				}
			}
			return rc.Flush() == nil
		}
		serve(r, send)
		if r.Context().Err() != nil {
			sc.gone <- struct{}{}
		}
	}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	sc.URL = srv.URL
	return sc
}

// up lets provider() name the script.
func (sc *streamScript) up() *upstream { return &upstream{URL: sc.URL} }

// waitGone waits for the proxy to close the script's connection.
func (sc *streamScript) waitGone(t testing.TB) {
	t.Helper()
	select {
	case <-sc.gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the proxy never closed the upstream connection")
	}
}

func streamSSE(name, data string) string {
	if name == "" {
		return "data: " + data + "\n\n"
	}
	return "event: " + name + "\ndata: " + data + "\n\n"
}

// Events of a scripted primary; "primary-model", "msg_primary",
// "chatcmpl-primary" and 7777 mark them so the client's bytes can be
// searched for any trace.
var (
	streamAMessageStart = streamSSE("message_start", `{"type":"message_start","message":{"id":"msg_primary","type":"message","role":"assistant","model":"primary-model","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":7777,"cache_read_input_tokens":7777,"output_tokens":1}}}`)
	streamABlockStart   = streamSSE("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
	streamAPing         = streamSSE("ping", `{"type": "ping"}`)
	streamAError        = streamSSE("error", `{"type":"error","error":{"type":"overloaded_error","message":"primary overloaded"}}`)
	streamABlockStop    = streamSSE("content_block_stop", `{"type":"content_block_stop","index":0}`)
	streamAMessageDelta = streamSSE("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":0}}`)
	streamAMessageStop  = streamSSE("message_stop", `{"type":"message_stop"}`)
	streamORole         = streamOChunk(`{"role":"assistant","content":""}`, "null")
	streamOError        = streamSSE("", `{"error":{"message":"primary overloaded","type":"server_error","code":null}}`)
	streamODone         = "data: [DONE]\n\n"
)

func streamADelta(text string) string {
	b, _ := json.Marshal(text)
	return streamSSE("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`+string(b)+`}}`)
}

func streamOChunk(delta, finish string) string {
	return streamSSE("", `{"id":"chatcmpl-primary","object":"chat.completion.chunk","created":1,"model":"primary-model","choices":[{"index":0,"delta":`+delta+`,"logprobs":null,"finish_reason":`+finish+`}]}`)
}

func streamOContent(text string) string {
	b, _ := json.Marshal(text)
	return streamOChunk(`{"content":`+string(b)+`}`, "null")
}

var streamDialects = []string{"anthropic", "openai"}

// Nothing reaches the client, not even the status line, while the
// upstream has sent only message_start, content_block_start and pings (or
// OpenAI's role-only chunk): the attempt commits at its first delta, and
// every buffered event then reaches the client in order.
func TestStreamGateHoldsUntilFirstDelta(t *testing.T) {
	const firstToken = time.Second
	up := newUpstream(t, sim.Config{FirstToken: caddyDur(firstToken), Pings: new(2)})
	p := startProxy(t, provider("only", up))

	for i, d := range streamDialects {
		t.Run(d, func(t *testing.T) {
			tap, ac, oc := streamTapped(p)
			id, text, err := streamAsk(ctxTimeout(t, 10*time.Second), ac, oc, d)
			if err != nil || text != wantText {
				t.Fatalf("text %q, err %v; want %q", text, err, wantText)
			}
			rec := streamLastCompletion(t, up)
			if id != rec.ID {
				t.Fatalf("SDK saw message %q, the simulator sent %q", id, rec.ID)
			}
			// The simulator sends its prelude the moment the request
			// arrives (rec.Start) and its first delta no earlier than
			// firstToken after that. The headers are the first bytes the
			// client gets: they must not precede the delta.
			if at := tap.headersAt(); at.Before(rec.Start.Add(firstToken)) {
				t.Fatalf("response headers reached the client %v after the upstream request started, before its first delta could exist (%v); first delta sent at +%v",
					at.Sub(rec.Start), firstToken, rec.FirstDelta.Sub(rec.Start))
			}
			evs := streamParse(tap.raw())
			if d == "anthropic" {
				var names []string
				for _, e := range evs[:min(5, len(evs))] {
					names = append(names, e.Name)
				}
				if got := strings.Join(names, ","); got != "message_start,content_block_start,ping,ping,content_block_delta" {
					t.Fatalf("the client's stream starts %s; want the buffered prelude in order, then the delta", got)
				}
			} else if len(evs) < 2 || !strings.Contains(evs[0].Data, `"role":"assistant"`) || !strings.Contains(evs[1].Data, `"content":"The `) {
				t.Fatalf("the client's stream starts %v; want the role chunk, then the first content", evs[:min(2, len(evs))])
			}
			// The log records what committed and how long the gate waited.
			line := streamLogLine(t, p, i+1)
			if ms := streamNum(line, "first_event_ms"); ms < firstToken.Milliseconds() {
				t.Fatalf("first_event_ms %d, want at least %d: the gate waited for the delta", ms, firstToken.Milliseconds())
			}
			wantBy := map[string]string{"anthropic": "content_block_delta", "openai": "content"}[d]
			if line["committed_by"] != wantBy {
				t.Fatalf("committed_by %v, want %s", line["committed_by"], wantBy)
			}
		})
	}
}

// Every way a stream can prove bad before its first output fails the
// attempt over to the secondary, whose answer the client gets with no
// trace of the primary: not its events, not its usage.
func TestStreamFailsOverBeforeCommit(t *testing.T) {
	type primaryFn func(t *testing.T, d string) (u *upstream, hits func() int)
	simPrimary := func(cfg sim.Config) primaryFn {
		return func(t *testing.T, d string) (*upstream, func() int) {
			cfg.Model = "primary-model"
			u := newUpstream(t, cfg)
			return u, func() int { return completions(u) }
		}
	}
	scripted := func(anthropicEvents, openaiEvents []string) primaryFn {
		return func(t *testing.T, d string) (*upstream, func() int) {
			evs := anthropicEvents
			if d == "openai" {
				evs = openaiEvents
			}
			sc := newStreamScript(t, func(r *http.Request, send func(...string) bool) { send(evs...) })
			return sc.up(), func() int { return int(sc.hits.Load()) }
		}
	}
	cases := []struct {
		name    string
		primary primaryFn
		block   string
		class   string
	}{
		{
			name:    "error event first",
			primary: simPrimary(sim.Config{Faults: []sim.Fault{{Kind: sim.FaultFake200}}}),
			class:   "fake200",
		},
		{
			name: "error after message_start and ping",
			primary: scripted(
				[]string{streamAMessageStart, streamABlockStart, streamAPing, streamAError},
				[]string{streamORole, streamOError}),
			class: "fake200",
		},
		{
			// The phrase arrives word by word, as real providers stream it.
			name:    "rejected phrase",
			primary: simPrimary(sim.Config{Text: "I cannot help with that request."}),
			block:   "stream {\n reject \"I cannot help\"\n }",
			class:   "rejected_phrase",
		},
		{
			name: "terminal before content",
			primary: scripted(
				[]string{streamAMessageStart, streamABlockStart, streamABlockStop, streamAMessageDelta, streamAMessageStop},
				[]string{streamORole, streamODone}),
			class: "closed_early",
		},
		{
			name: "malformed first event",
			primary: scripted(
				[]string{streamAMessageStart, streamSSE("content_block_delta", "<html>502 Bad Gateway</html>")},
				[]string{streamORole, streamSSE("", "upstream connect error or disconnect/reset before headers")}),
			class: "malformed",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, d := range streamDialects {
				primary, hits := tc.primary(t, d)
				secondary := newUpstream(t, sim.Config{})
				p := startProxy(t, provider("primary", primary, "priority 0")+provider("secondary", secondary, "priority 1")+
					"hedge off\n cooldown {\n failures 100\n }\n"+tc.block)

				tap, ac, oc := streamTapped(p)
				id, text, err := streamAsk(ctxTimeout(t, 10*time.Second), ac, oc, d)
				if err != nil || text != wantText {
					t.Fatalf("%s: text %q, err %v; want the secondary's %q", d, text, err, wantText)
				}
				if n := hits(); n != 1 {
					t.Fatalf("%s: primary got %d requests, want 1", d, n)
				}
				sec := streamLastCompletion(t, secondary)
				if id != sec.ID {
					t.Fatalf("%s: SDK saw message %q, want the secondary's %q", d, id, sec.ID)
				}
				raw := tap.raw()
				for _, trace := range []string{"primary", ":7777,", "error", "cannot", "Bad Gateway", "upstream connect"} {
					if strings.Contains(raw, trace) {
						t.Fatalf("%s: the client's stream holds %q from the primary:\n%s", d, trace, raw)
					}
				}
				if d == "anthropic" && strings.Count(raw, "event: message_start") != 1 {
					t.Fatalf("%s: %d message_start events, want one:\n%s", d, strings.Count(raw, "event: message_start"), raw)
				}

				line := streamLogLine(t, p, 1)
				chain := streamChain(line)
				if len(chain) != 2 || chain[0]["provider"] != "primary" || chain[0]["error_class"] != tc.class ||
					chain[1]["provider"] != "secondary" || line["outcome"] != "success" {
					t.Fatalf("%s: log line outcome %v chain %v; want primary failed with %s, secondary served", d, line["outcome"], chain, tc.class)
				}
				// Usage is the winner's alone.
				if d == "anthropic" {
					if in, want := streamNum(line, "input_tokens"), max(1, sec.BodySize/4); in != want || streamNum(line, "cache_read_tokens") != 0 {
						t.Fatalf("log input_tokens %d cache_read_tokens %d; want the secondary's %d and 0", in, streamNum(line, "cache_read_tokens"), want)
					}
				}
			}
		})
	}
}

// A mid-stream event whose data is not JSON is dropped: the SDK, which
// would fail on it, gets the complete answer, and the log counts it.
func TestStreamMalformedMidStreamDropped(t *testing.T) {
	up := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultMalformed, After: 4}}})
	p := startProxy(t, provider("only", up))
	for i, d := range streamDialects {
		tap, ac, oc := streamTapped(p)
		_, text, err := streamAsk(ctxTimeout(t, 10*time.Second), ac, oc, d)
		if err != nil || text != wantText {
			t.Fatalf("%s: text %q, err %v; want %q", d, text, err, wantText)
		}
		if rec := streamLastCompletion(t, up); rec.Fault == nil || rec.Fault.Kind != sim.FaultMalformed || rec.Deltas != 9 {
			t.Fatalf("%s: simulator record %+v: the fault did not strike mid-stream", d, rec)
		}
		if raw := tap.raw(); strings.Contains(raw, `"text_del`+"\n") || strings.Contains(raw, `chat.completion.chu`+"\n") {
			t.Fatalf("%s: the malformed event reached the client:\n%s", d, raw)
		}
		line := streamLogLine(t, p, i+1)
		if line["outcome"] != "success" || streamNum(line, "dropped_malformed") != 1 {
			t.Fatalf("%s: log outcome %v dropped_malformed %v; want success and 1", d, line["outcome"], line["dropped_malformed"])
		}
	}
}

// An OpenAI upstream that sends its finish_reason but never [DONE] has
// finished: the client gets a clean end within the 1 s grace (whether the
// upstream then hangs or closes), and the upstream connection is closed.
func TestStreamFinishReasonWithoutDone(t *testing.T) {
	for _, keepOpen := range []bool{true, false} {
		t.Run(fmt.Sprintf("keep open %v", keepOpen), func(t *testing.T) {
			lastSent := make(chan time.Time, 1)
			sc := newStreamScript(t, func(r *http.Request, send func(...string) bool) {
				send(streamORole, streamOContent("The quick brown fox "), streamOContent("jumps over the lazy dog."), streamOChunk(`{}`, `"stop"`))
				lastSent <- time.Now()
				if keepOpen {
					<-r.Context().Done() // no [DONE], no end: only the proxy can finish this
				}
			})
			p := startProxy(t, provider("only", sc.up()))
			tap, _, oc := streamTapped(p)
			acc, err := streamOpenAI(ctxTimeout(t, 10*time.Second), oc, openaiParams("gpt-test"))
			end := time.Now()
			if err != nil || len(acc.Choices) != 1 || acc.Choices[0].Message.Content != wantText || acc.Choices[0].FinishReason != "stop" {
				t.Fatalf("SDK: %+v, err %v; want a clean finish with %q", acc.Choices, err, wantText)
			}
			// The grace is 1 s; the slack is for a loaded 2-core machine.
			if gap := end.Sub(<-lastSent); gap > 3*time.Second {
				t.Fatalf("the client's stream ended %v after the upstream's last event; want about 1 s", gap)
			}
			if raw := tap.raw(); !strings.HasSuffix(raw, "data: [DONE]\n\n") || strings.Count(raw, "[DONE]") != 1 {
				t.Fatalf("the client's stream does not end with one [DONE]:\n%s", raw)
			}
			if keepOpen {
				sc.waitGone(t)
			}
			if line := streamLogLine(t, p, 1); line["outcome"] != "success" || line["stream_end"] != nil {
				t.Fatalf("log outcome %v stream_end %v; want success", line["outcome"], line["stream_end"])
			}
		})
	}
}

// A stream cut before its terminal event reaches both SDKs as an error
// after the text that did arrive, never as a clean finish.
func TestStreamCutIsAnError(t *testing.T) {
	words := make([]string, 60)
	for i := range words {
		words[i] = fmt.Sprintf("w%d", i)
	}
	up := newUpstream(t, sim.Config{Text: strings.Join(words, " "), Tokens: 60, Faults: []sim.Fault{{Kind: sim.FaultCut, After: 40}}})
	p := startProxy(t, provider("only", up))
	wantPrefix := strings.Join(words[:40], " ") + " "
	for i, d := range streamDialects {
		_, ac, oc := streamTapped(p)
		_, text, err := streamAsk(ctxTimeout(t, 10*time.Second), ac, oc, d)
		if err == nil {
			t.Fatalf("%s: the cut stream finished cleanly with %q", d, text)
		}
		if !strings.Contains(err.Error(), "ended the stream before it was complete") {
			t.Fatalf("%s: SDK error %v; want the proxy's error event", d, err)
		}
		if text != wantPrefix {
			t.Fatalf("%s: text before the error %q, want the 40 deltas sent %q", d, text, wantPrefix)
		}
		line := streamLogLine(t, p, i+1)
		if line["outcome"] != "stream_error" || line["stream_end"] != "upstream_cut" {
			t.Fatalf("%s: log outcome %v stream_end %v; want stream_error, upstream_cut", d, line["outcome"], line["stream_end"])
		}
	}
}

// A client that leaves a committed stream while the upstream is quiet:
// the proxy hangs up on the upstream at once (the relay's read ends with
// the request's context, no idle limit involved) and logs the client's
// leaving.
func TestStreamClientLeavesIdleStream(t *testing.T) {
	stall := sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStall, After: 2}}}
	t.Run("HTTP/1.1 provider", func(t *testing.T) {
		up := newUpstream(t, stall)
		streamClientLeaves(t, up, provider("only", up))
	})
	t.Run("HTTP/2 provider", func(t *testing.T) {
		up := newH2Upstream(t, stall)
		streamClientLeaves(t, up.upstream, provider("only", up.upstream, up.trust))
		if h2, all := up.h2.Load(), up.all.Load(); all == 0 || h2 != all {
			t.Fatalf("%d of %d upstream requests over HTTP/2", h2, all)
		}
	})
}

func streamClientLeaves(t *testing.T, up *upstream, block string) {
	p := startProxy(t, block+"timeouts {\n idle 1m\n }\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := openCommittedStream(ctx, http.DefaultClient, p.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	streamWait(t, 5*time.Second, "the upstream to stall", func() bool {
		r := streamLastCompletion(t, up)
		return r.Deltas == 2
	})
	leftAt := time.Now()
	cancel()
	streamWait(t, 5*time.Second, "the upstream request to be cancelled", func() bool {
		r := streamLastCompletion(t, up)
		return r.Canceled && !r.End.IsZero()
	})
	if d := streamLastCompletion(t, up).CanceledAt.Sub(leftAt); d > time.Second {
		t.Fatalf("upstream closed %v after the client left, want within 1s", d)
	}
	line := streamLogLine(t, p, 1)
	if line["outcome"] != "client_abort" || line["stream_end"] != "client_gone" {
		t.Fatalf("log outcome %v stream_end %v; want client_abort, client_gone", line["outcome"], line["stream_end"])
	}
}

// An upstream that stalls after commit longer than the idle timeout: the
// client gets an error event (not a clean end), the proxy hangs up on the
// upstream, logs a stall warning first, and serves the next request.
func TestStreamIdleTimeout(t *testing.T) {
	// 2 s: no healthy gap between the first deltas comes near it on a
	// loaded machine under -race.
	const idle = 2 * time.Second
	up := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStall, After: 3, Count: len(streamDialects)}}})
	// Without continuation (TestResumeStall continues a stalled stream).
	p := startProxy(t, provider("only", up)+"timeouts {\n idle 2s\n }\nstream {\n resume off\n }")
	for i, d := range streamDialects {
		_, ac, oc := streamTapped(p)
		_, text, err := streamAsk(ctxTimeout(t, 10*time.Second), ac, oc, d)
		if err == nil {
			t.Fatalf("%s: the stalled stream finished cleanly with %q", d, text)
		}
		if !strings.Contains(err.Error(), "sent nothing for "+idle.String()) {
			t.Fatalf("%s: SDK error %v; want the proxy's idle timeout event", d, err)
		}
		if text != "The quick brown " {
			t.Fatalf("%s: text before the error %q, want the 3 deltas sent", d, text)
		}
		stalled := streamLastCompletion(t, up)
		streamWait(t, 5*time.Second, "the stalled upstream request to be cancelled", func() bool {
			for _, r := range up.Requests() {
				if r.ID == stalled.ID {
					return r.Canceled && !r.End.IsZero()
				}
			}
			return false
		})
		line := streamLogLine(t, p, i+1)
		if line["outcome"] != "stream_error" || line["stream_end"] != "idle_timeout" {
			t.Fatalf("%s: log outcome %v stream_end %v; want stream_error, idle_timeout", d, line["outcome"], line["stream_end"])
		}
	}
	if logs := p.logs(t); strings.Count(logs, "upstream stream stalled") < len(streamDialects) {
		t.Fatalf("want a stall warning per stalled stream in the log")
	}
	// The fault is spent: the process and the provider serve on.
	for _, d := range streamDialects {
		_, ac, oc := streamTapped(p)
		if _, text, err := streamAsk(ctxTimeout(t, 10*time.Second), ac, oc, d); err != nil || text != wantText {
			t.Fatalf("%s after the stalls: text %q, err %v", d, text, err)
		}
	}
}

// timeouts.total bounds a committed stream even when the upstream keeps it
// alive with pings (comments for OpenAI) that reset the idle timer.
func TestStreamTotalTimeoutBoundsPings(t *testing.T) {
	for _, d := range streamDialects {
		t.Run(d, func(t *testing.T) {
			sc := newStreamScript(t, func(r *http.Request, send func(...string) bool) {
				ping := streamAPing
				ok := send(streamAMessageStart, streamABlockStart, streamADelta("Thinking"))
				if d == "openai" {
					ping = ": keepalive\n\n"
					ok = send(streamORole, streamOContent("Thinking"))
				}
				tick := time.NewTicker(100 * time.Millisecond)
				defer tick.Stop()
				for ok {
					select {
					case <-tick.C:
						ok = send(ping)
					case <-r.Context().Done():
						ok = false
					}
				}
			})
			p := startProxy(t, provider("only", sc.up())+"timeouts {\n total 1s\n idle 10s\n }")
			_, ac, oc := streamTapped(p)
			start := time.Now()
			_, text, err := streamAsk(ctxTimeout(t, 20*time.Second), ac, oc, d)
			took := time.Since(start)
			if err == nil || !strings.Contains(err.Error(), "total time limit") {
				t.Fatalf("text %q, err %v; want the proxy's total timeout error event", text, err)
			}
			// Not before the total timeout; well before the idle timeout
			// (the slack is for a loaded machine).
			if took < time.Second || took > 6*time.Second {
				t.Fatalf("the stream ended after %v; want about 1 s (total), not 10 s (idle)", took)
			}
			if text != "Thinking" {
				t.Fatalf("text %q, want the one delta sent", text)
			}
			sc.waitGone(t)
			if line := streamLogLine(t, p, 1); line["stream_end"] != "total_timeout" {
				t.Fatalf("log stream_end %v, want total_timeout", line["stream_end"])
			}
		})
	}
}

// Usage in the request log (the {http.llm_hedge.input_tokens} and
// .output_tokens placeholders take the same values) is what the provider
// reported, in both dialects, streaming or not. OpenAI sends usage in a
// stream only when the client asks for it with stream_options.include_usage.
func TestStreamUsage(t *testing.T) {
	const cacheRead = 5
	up := newUpstream(t, sim.Config{CacheRead: cacheRead})
	p := startProxy(t, provider("only", up))
	cases := []struct {
		name string
		ask  func(ctx context.Context, ac *anthropic.Client, oc *openai.Client) (in, out, cached int64, err error)
		// want derives the expected log figures from the simulator's
		// record; the simulator counts input tokens as body bytes / 4.
		want func(rec sim.RequestRecord) (in, out, cached int64)
	}{
		{
			name: "anthropic stream",
			ask: func(ctx context.Context, ac *anthropic.Client, _ *openai.Client) (int64, int64, int64, error) {
				m, err := streamAnthropic(ctx, ac, anthropicParams("claude-test"))
				return m.Usage.InputTokens, m.Usage.OutputTokens, m.Usage.CacheReadInputTokens, err
			},
			want: func(rec sim.RequestRecord) (int64, int64, int64) { return max(1, rec.BodySize/4), 9, cacheRead },
		},
		{
			name: "anthropic",
			ask: func(ctx context.Context, ac *anthropic.Client, _ *openai.Client) (int64, int64, int64, error) {
				m, err := ac.Messages.New(ctx, anthropicParams("claude-test"))
				if err != nil {
					return 0, 0, 0, err
				}
				return m.Usage.InputTokens, m.Usage.OutputTokens, m.Usage.CacheReadInputTokens, nil
			},
			want: func(rec sim.RequestRecord) (int64, int64, int64) { return max(1, rec.BodySize/4), 9, cacheRead },
		},
		{
			// prompt_tokens includes the cached tokens, as OpenAI reports it.
			name: "openai stream with include_usage",
			ask: func(ctx context.Context, _ *anthropic.Client, oc *openai.Client) (int64, int64, int64, error) {
				params := openaiParams("gpt-test")
				params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
				acc, err := streamOpenAI(ctx, oc, params)
				return acc.Usage.PromptTokens, acc.Usage.CompletionTokens, acc.Usage.PromptTokensDetails.CachedTokens, err
			},
			want: func(rec sim.RequestRecord) (int64, int64, int64) {
				return max(1, rec.BodySize/4) + cacheRead, 9, cacheRead
			},
		},
		{
			// Without include_usage the stream carries no usage at all:
			// the proxy does not change the client's request to get it.
			name: "openai stream without include_usage",
			ask: func(ctx context.Context, _ *anthropic.Client, oc *openai.Client) (int64, int64, int64, error) {
				acc, err := streamOpenAI(ctx, oc, openaiParams("gpt-test"))
				return acc.Usage.PromptTokens, acc.Usage.CompletionTokens, acc.Usage.PromptTokensDetails.CachedTokens, err
			},
			want: func(sim.RequestRecord) (int64, int64, int64) { return 0, 0, 0 },
		},
		{
			name: "openai",
			ask: func(ctx context.Context, _ *anthropic.Client, oc *openai.Client) (int64, int64, int64, error) {
				c, err := oc.Chat.Completions.New(ctx, openaiParams("gpt-test"))
				if err != nil {
					return 0, 0, 0, err
				}
				return c.Usage.PromptTokens, c.Usage.CompletionTokens, c.Usage.PromptTokensDetails.CachedTokens, nil
			},
			want: func(rec sim.RequestRecord) (int64, int64, int64) {
				return max(1, rec.BodySize/4) + cacheRead, 9, cacheRead
			},
		},
	}
	for i, tc := range cases {
		_, ac, oc := streamTapped(p)
		in, out, cached, err := tc.ask(ctxTimeout(t, 10*time.Second), ac, oc)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		rec := streamLastCompletion(t, up)
		wantIn, wantOut, wantCached := tc.want(rec)
		if in != wantIn || out != wantOut || cached != wantCached {
			t.Fatalf("%s: the SDK saw usage %d/%d/%d, want %d/%d/%d", tc.name, in, out, cached, wantIn, wantOut, wantCached)
		}
		// Wait for this request's line before the next request, so the
		// n-th line is the n-th request's.
		line := streamLogLine(t, p, i+1)
		gotIn, gotOut, gotCached := streamNum(line, "input_tokens"), streamNum(line, "output_tokens"), streamNum(line, "cache_read_tokens")
		if gotIn != wantIn || gotOut != wantOut || gotCached != wantCached {
			t.Fatalf("%s: log input/output/cache_read tokens %d/%d/%d, want %d/%d/%d", tc.name, gotIn, gotOut, gotCached, wantIn, wantOut, wantCached)
		}
	}
}
