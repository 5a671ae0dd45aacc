package e2e

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/engine"
	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// countedUpstream is a simulated provider that counts the connections the
// proxy opens to it.
func countedUpstream(t *testing.T, cfg sim.Config) (*upstream, *atomic.Int64) {
	t.Helper()
	if cfg.Tokens == 0 {
		cfg.Tokens = 9
	}
	return countedServer(t, sim.New(cfg))
}

// countedServer serves h on loopback and counts the connections opened
// to it.
func countedServer(t *testing.T, h http.Handler) (*upstream, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return &upstream{URL: srv.URL}, &conns
}

// A complete stream gives its upstream connection back to the pool: the
// relay stops at the terminal event, and the body's end (HTTP/1.1's last
// chunk) must still be read, or every request dials the provider anew
// (and, to a real one, shakes hands anew). Every dialect and Bedrock's
// event stream, requests one after another: one connection serves them all.
func TestStreamReusesUpstreamConnection(t *testing.T) {
	awsTestEnv(t)
	// The body's end comes right after the terminal event; on two busy
	// cores under -race it may come later than the 5 ms the proxy waits in
	// production. What is checked is that the proxy reads it, so the wait
	// is long here: the verdict does not hang on the scheduler.
	defer engine.SetTailWait(10 * time.Second)()
	const reqs = 8
	for _, tc := range []struct {
		name, path, key, body, end string
		cfg                        sim.Config
		opts                       []string
	}{
		{name: "anthropic", path: "/v1/messages", key: "x-api-key",
			body: `{"model":"claude-test","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, end: "message_stop"},
		{name: "openai", path: "/v1/chat/completions", key: "Authorization",
			body: `{"model":"gpt-test","stream":true,"messages":[{"role":"user","content":"hi"}]}`, end: "[DONE]"},
		{name: "responses", path: "/v1/responses", key: "Authorization",
			body: `{"model":"gpt-test","stream":true,"store":false,"input":"hi"}`, end: "response.completed"},
		{name: "gemini", path: "/v1beta/models/gemini-test:streamGenerateContent?alt=sse", key: "X-Goog-Api-Key",
			body: `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, end: `"finishReason"`},
		{name: "bedrock", path: "/v1/messages", key: "x-api-key",
			body: `{"model":"claude-test","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, end: "message_stop",
			cfg:  sim.Config{Wire: sim.WireBedrock, Region: "us-west-2", AWSAccessKey: testAWSKeyID, AWSSecretKey: testAWSSecret},
			opts: []string{"api bedrock", "region us-west-2", "model claude-test " + bedrockModel}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, conns := countedUpstream(t, tc.cfg)
			p := startProxy(t, provider("only", up, tc.opts...)+"hedge off")
			for i := range reqs {
				req, _ := http.NewRequestWithContext(ctxTimeout(t, 10*time.Second), http.MethodPost, p.URL+tc.path, strings.NewReader(tc.body))
				req.Header.Set("Content-Type", "application/json")
				val := "sk-client"
				if tc.key == "Authorization" {
					val = "Bearer sk-client"
				}
				req.Header.Set(tc.key, val)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || !bytes.Contains(b, []byte(tc.end)) {
					t.Fatalf("request %d: status %d, err %v, body %.300s", i, resp.StatusCode, err, b)
				}
			}
			if n := conns.Load(); n != 1 {
				t.Errorf("%d streams one after another opened %d upstream connections, want 1", reqs, n)
			}
		})
	}
}

// An upstream that keeps its body open after the terminal event does not
// hold the client: the proxy waits a few milliseconds for the body's end,
// then ends the client's answer (complete, a success) and drops that
// connection.
func TestStreamEndsAtTerminalWhenUpstreamLingers(t *testing.T) {
	sc := newStreamScript(t, func(r *http.Request, send func(events ...string) bool) {
		send(streamAMessageStart, streamABlockStart, streamADelta("Hello"), streamABlockStop, streamAMessageDelta, streamAMessageStop)
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	p := startProxy(t, provider("lingers", sc.up())+"hedge off")
	start := time.Now()
	m, err := streamAnthropic(ctxTimeout(t, 20*time.Second), anthropicClient(p, "sk-client"), anthropicParams("claude-test"))
	if err != nil || messageText(m) != "Hello" || m.StopReason != "end_turn" {
		t.Fatalf("stream: %v, text %q, stop %q", err, messageText(m), m.StopReason)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the client's answer ended after %s: held by the upstream's open body", d)
	}
	sc.waitGone(t)
	if line := streamLogLine(t, p, 1); line["outcome"] != "success" {
		t.Errorf("log %v: want success", line)
	}
}

// The terminal event is not held back for the body's end. After it, the
// proxy reads the rest of the body, to keep the connection; it sends the
// terminal event together with the end of its own response, unless that
// read has to wait: then the event goes out first. Here the provider ends
// its body only once the client has the terminal event, and the proxy
// would wait 10 s for that end. The client has the event at once, and
// every request is served over one connection.
func TestTerminalEventNotHeldByBodyEnd(t *testing.T) {
	defer engine.SetTailWait(10 * time.Second)()
	got := make(chan struct{}, 1) // the client has message_stop
	up, conns := countedServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range []string{streamAMessageStart, streamABlockStart, streamADelta("Hello"), streamABlockStop, streamAMessageDelta, streamAMessageStop} {
			_, _ = io.WriteString(w, e)
		}
		_ = http.NewResponseController(w).Flush()
		select {
		case <-got:
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	p := startProxy(t, provider("tail", up)+"hedge off")
	for i := range 3 {
		req, _ := http.NewRequestWithContext(ctxTimeout(t, 20*time.Second), http.MethodPost, p.URL+"/v1/messages",
			strings.NewReader(`{"model":"claude-test","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("x-api-key", "sk-client")
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(resp.Body)
		var stopAfter time.Duration
		for stopAfter == 0 {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("request %d: no message_stop before %v", i, err)
			}
			if strings.Contains(line, `"message_stop"`) {
				stopAfter = time.Since(start)
				got <- struct{}{}
			}
		}
		rest, err := io.ReadAll(br)
		resp.Body.Close()
		if err != nil || len(bytes.TrimSpace(rest)) != 0 {
			t.Fatalf("request %d: after message_stop: %q, %v", i, rest, err)
		}
		if stopAfter > 5*time.Second {
			t.Errorf("request %d: message_stop reached the client after %s: held for the upstream body's end", i, stopAfter)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("3 streams one after another opened %d upstream connections, want 1", n)
	}
}

// A continuation that completes the client's stream gives its connection
// back to the pool too: streams cut on one provider, each continued on the
// other, are served there over one connection. The other provider ends
// each body a millisecond after its terminal event (the proxy has stopped
// reading by then), as a real one over a network does.
func TestContinuationReusesUpstreamConnection(t *testing.T) {
	defer engine.SetTailWait(10 * time.Second)() // as TestStreamReusesUpstreamConnection: 1 ms is no margin under -race
	cut := newUpstream(t, sim.Config{Tokens: 60, Text: longText, Faults: []sim.Fault{{Kind: sim.FaultCut, After: 40}}})
	s := sim.New(sim.Config{Tokens: 60, Text: longText})
	other, conns := countedServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.ServeHTTP(w, r)
		_ = http.NewResponseController(w).Flush()
		time.Sleep(time.Millisecond)
	}))
	p := startProxy(t, provider("cut", cut, "priority 1", "api anthropic")+provider("other", other, "priority 2", "api anthropic")+"hedge off\n")
	for i := range 4 {
		m, err := streamAnthropic(ctxTimeout(t, 10*time.Second), anthropicClient(p, "k"), anthropicParams("claude-test"))
		if err != nil || messageText(m) != longText {
			t.Fatalf("stream %d: %v (text %q)", i, err, messageText(m))
		}
	}
	if len(cut.Requests()) < 2 {
		t.Fatalf("the cut provider saw %d requests, want at least 2 (continued streams)", len(cut.Requests()))
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d continuations (of 4 streams) opened %d connections to the other provider, want 1", len(cut.Requests()), n)
	}
}
