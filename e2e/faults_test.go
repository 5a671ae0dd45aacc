package e2e

import (
	"bufio"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"go.uber.org/goleak"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/llmhedge/caddy-llm-hedge/bench/load"
	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// The fault and bad-input suite: whatever a client or a provider throws at
// the proxy, the client gets a clear error in its own dialect with a
// fitting status, the process stays up, no goroutine is left behind, and
// the next ordinary request succeeds.

// faultCaddyGoroutines are Caddy's process-wide workers, which outlive
// caddy.Stop by design (the admin server kept across configs, certmagic's
// lock refresher, the log file's rotation worker): not request work.
var faultCaddyGoroutines = []goleak.Option{
	goleak.IgnoreAnyFunction("github.com/caddyserver/caddy/v2.replaceLocalAdminServer.func2"),
	goleak.IgnoreAnyFunction("github.com/caddyserver/certmagic.keepLockfileFresh"),
	goleak.IgnoreTopFunction("github.com/DeRuina/timberjack.(*Logger).millRun"),
}

// faultNoLeaks must be the first call of a test: its cleanup runs last,
// after Caddy stopped and the upstreams closed, and fails the test if a
// goroutine started since is still running.
func faultNoLeaks(t *testing.T) {
	base := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		_ = caddy.Stop() // idempotent; closes the pooled upstream connections
		http.DefaultClient.CloseIdleConnections()
		if t.Failed() {
			return
		}
		opts := append([]goleak.Option{base}, faultCaddyGoroutines...)
		// goleak retries for about a second; a server shutting down waits
		// longer for a connection it refused (net/http lingers 500ms before
		// closing it, then polls).
		for deadline := time.Now().Add(10 * time.Second); goleak.Find(opts...) != nil && time.Now().Before(deadline); {
			time.Sleep(100 * time.Millisecond)
		}
		goleak.VerifyNone(t, opts...)
	})
}

// faultClient is a plain client whose idle connections close with the test.
func faultClient(t *testing.T) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// faultOK sends ordinary requests through both SDKs, streaming and not:
// the proxy is up and serving after whatever came before.
func faultOK(t *testing.T, p *proxy) {
	t.Helper()
	m, err := anthropicClient(p, "k").Messages.New(ctxTimeout(t, 10*time.Second), anthropicParams("claude-test"))
	if err != nil || messageText(*m) != wantText {
		t.Fatalf("ok request afterwards: %v", err)
	}
	acc, err := streamOpenAI(ctxTimeout(t, 10*time.Second), openaiClient(p, "k"), openaiParams("gpt-test"))
	if err != nil || len(acc.Choices) == 0 || acc.Choices[0].Message.Content != wantText {
		t.Fatalf("ok stream afterwards: %v", err)
	}
}

// faultExpectError sends a request and requires an error response in the
// dialect of kind with the given status, whose message contains want.
func faultExpectError(t *testing.T, c *http.Client, req *http.Request, k load.Kind, status int, want string) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != status {
		t.Fatalf("%s %s: status %d, want %d: %s", req.Method, req.URL.Path, resp.StatusCode, status, body)
	}
	v, why := load.Check(k, resp.StatusCode, resp.Header.Get("Content-Type"), body, "")
	if v != load.CleanError {
		t.Fatalf("%s %s: not an error in the %s dialect (%v: %s): %s", req.Method, req.URL.Path, k, v, why, body)
	}
	if !strings.Contains(strings.ToLower(string(body)), strings.ToLower(want)) {
		t.Fatalf("%s %s: message does not say %q: %s", req.Method, req.URL.Path, want, body)
	}
}

func faultRequest(method, url string, k load.Kind, body io.Reader) *http.Request {
	req, _ := http.NewRequest(method, url+k.Path("m"), body)
	req.Header.Set("Content-Type", "application/json")
	if k.Dialect == load.OpenAI {
		req.Header.Set("Authorization", "Bearer k")
	} else {
		req.Header.Set("X-Api-Key", "k")
	}
	return req
}

var (
	faultAnthropic = load.Kind{}
	faultOpenAI    = load.Kind{Dialect: load.OpenAI}
)

// Bad input from a client is refused by the proxy itself, in the client's
// dialect, and never reaches a provider.
func TestFaultBadInput(t *testing.T) {
	faultNoLeaks(t)
	up := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("only", up)+"max_body 4KiB")
	c := faultClient(t)
	big := `{"model":"claude-test","pad":"` + strings.Repeat("a", 8<<10) + `"}`
	cases := []struct {
		name   string
		method string
		k      load.Kind
		body   string
		chunk  bool // no Content-Length: the limit must hold while reading
		status int
		want   string
	}{
		{"malformed json", "POST", faultAnthropic, `{"model":"claude-test","messages":[`, false, 400, "not valid JSON"},
		{"malformed json openai", "POST", faultOpenAI, `{"model": gpt}`, false, 400, "not valid JSON"},
		{"trailing garbage", "POST", faultAnthropic, `{"model":"claude-test"} {}`, false, 400, "not valid JSON"},
		{"empty body", "POST", faultOpenAI, ``, false, 400, "JSON"},
		{"not an object", "POST", faultAnthropic, `["model","claude-test"]`, false, 400, "JSON object"},
		{"missing model", "POST", faultAnthropic, `{"max_tokens":5,"messages":[]}`, false, 400, "model"},
		{"model not a string", "POST", faultOpenAI, `{"model":42,"messages":[]}`, false, 400, "model"},
		{"empty model", "POST", faultAnthropic, `{"model":"","messages":[]}`, false, 400, "model"},
		{"over max_body", "POST", faultOpenAI, big, false, 413, "limit"},
		{"over max_body chunked", "POST", faultAnthropic, big, true, 413, "limit"},
		{"GET on messages", "GET", faultAnthropic, ``, false, 405, "use POST"},
		{"GET on chat completions", "GET", faultOpenAI, ``, false, 405, "use POST"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader = strings.NewReader(tc.body)
			if tc.chunk {
				body = io.MultiReader(body) // hides the length: sent chunked
			}
			req := faultRequest(tc.method, p.URL, tc.k, body)
			faultExpectError(t, c, req, tc.k, tc.status, tc.want)
		})
	}
	if n := completions(up); n != 0 {
		t.Fatalf("bad input reached the provider %d times", n)
	}
	faultOK(t, p)
	if n := completions(up); n != 2 {
		t.Fatalf("provider served %d requests, want the 2 ok ones", n)
	}
}

// A header block over Go's limit (1 MiB, Caddy's default max_header_size)
// is refused by net/http before any handler runs: 431 with a plain-text
// body, since no dialect is known yet. The connection is dropped and the
// proxy serves on.
func TestFaultHugeHeader(t *testing.T) {
	faultNoLeaks(t)
	up := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("only", up))
	conn, err := net.Dial("tcp", strings.TrimPrefix(p.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	go func() {
		// The server answers before reading it all; the rest of the write
		// may fail, which is fine.
		w := bufio.NewWriter(conn)
		fmt.Fprintf(w, "POST /v1/messages HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 2\r\n", conn.RemoteAddr())
		for i := range 2048 {
			fmt.Fprintf(w, "X-Pad-%d: %s\r\n", i, strings.Repeat("p", 1000))
		}
		fmt.Fprintf(w, "\r\n{}")
		_ = w.Flush()
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no response to a 2 MB header: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("status %d, want 431: %s", resp.StatusCode, body)
	}
	if n := completions(up); n != 0 {
		t.Fatalf("a refused request reached the provider %d times", n)
	}
	faultOK(t, p)
}

// faultProxy loads a Caddyfile with extra global options (the harness has
// none), llm_hedge { block } on one site, and stops it with the test.
func faultProxy(t *testing.T, globals, block string) *proxy {
	t.Helper()
	port, admin := freePort(t), freePort(t)
	p := &proxy{URL: fmt.Sprintf("http://127.0.0.1:%d", port), AdminURL: fmt.Sprintf("http://127.0.0.1:%d", admin),
		LogFile: filepath.Join(t.TempDir(), "caddy.log")}
	cfg := fmt.Sprintf("{\n\tadmin 127.0.0.1:%d\n\tlog {\n\t\toutput file %s\n\t\tformat json\n\t}\n%s\n}\nhttp://127.0.0.1:%d {\n\tllm_hedge {\n%s\n\t}\n}\n",
		admin, p.LogFile, globals, port, block)
	js, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cfg), nil)
	if err != nil {
		t.Fatalf("adapt: %v\n%s", err, cfg)
	}
	if err := caddy.Load(js, true); err != nil {
		t.Fatalf("load: %v", err)
	}
	t.Cleanup(func() { _ = caddy.Stop() })
	waitListening(t, strings.TrimPrefix(p.URL, "http://"))
	return p
}

// faultServerTimeouts are the recommended server timeouts of the README,
// with read_body shortened so the test is quick.
const faultServerTimeouts = `	servers {
		timeouts {
			read_header 10s
			read_body 2s
			read_body_idle 1s
			idle 2m
		}
	}`

// A client that sends its body slowly (slowloris) is cut off by the
// server's read timeouts: the proxy answers 408 in the client's dialect
// instead of holding the connection and a goroutine forever. The same
// timeouts must not cut a stream that lasts longer than read_body: they
// bound reading the request, not relaying the answer.
func TestFaultSlowRequestBody(t *testing.T) {
	faultNoLeaks(t)
	up := newUpstream(t, sim.Config{})
	p := faultProxy(t, faultServerTimeouts, provider("only", up))

	for _, tc := range []struct {
		name    string
		trickle bool
	}{{"stalled body", false}, {"trickled body", true}} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", strings.TrimPrefix(p.URL, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			// Generous: the timeouts are 1-2s; a loaded machine is slow.
			_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
			// The Host must match the site, or Caddy answers an empty 200
			// without reading the body.
			fmt.Fprintf(conn, "POST /v1/messages HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 4000\r\n\r\n{\"model\":", conn.RemoteAddr())
			stop := make(chan struct{})
			defer close(stop)
			if tc.trickle {
				// One byte every 300ms never stalls read_body_idle (1s), so
				// read_body (2s) must end it.
				go func() {
					tick := time.NewTicker(300 * time.Millisecond)
					defer tick.Stop()
					for {
						select {
						case <-stop:
							return
						case <-tick.C:
							if _, err := conn.Write([]byte(" ")); err != nil {
								return
							}
						}
					}
				}()
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer to a slow body: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			v, why := load.Check(faultAnthropic, resp.StatusCode, resp.Header.Get("Content-Type"), body, "")
			if resp.StatusCode != http.StatusRequestTimeout || v != load.CleanError {
				t.Fatalf("status %d (%v %s): %s; want 408 in the Anthropic dialect", resp.StatusCode, v, why, body)
			}
		})
	}
	if n := completions(up); n != 0 {
		t.Fatalf("a partial body reached the provider %d times", n)
	}

	// 9 deltas 400ms apart: the stream outlasts read_body (2s) by far.
	if err := up.SetConfig(sim.Config{Tokens: 9, TokenDelay: caddyDur(400 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	m, err := streamAnthropic(ctxTimeout(t, 20*time.Second), anthropicClient(p, "k"), anthropicParams("claude-test"))
	if err != nil || messageText(m) != wantText {
		t.Fatalf("a stream longer than read_body: %v (text %q)", err, messageText(m))
	}
	if d := time.Since(start); d < 2*time.Second {
		t.Fatalf("the stream took %v: it did not outlast read_body", d)
	}
	if err := up.SetConfig(sim.Config{Tokens: 9}); err != nil {
		t.Fatal(err)
	}
	faultOK(t, p)
}

// faultFlood is a provider gone wrong: it answers 200 text/event-stream,
// sends head, then writes chunk again and again (flushing each) until
// limit bytes or until the proxy hangs up. written reports the bytes it
// got out; done is closed when its handler returned.
type faultFlood struct {
	URL     string
	written atomic.Int64
	done    chan struct{}
}

func newFaultFlood(t *testing.T, head, chunk string, limit int64) *faultFlood {
	f := &faultFlood{done: make(chan struct{}, 64)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { f.done <- struct{}{} }()
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		n, err := io.WriteString(w, head)
		f.written.Add(int64(n))
		for err == nil && f.written.Load() < limit {
			n, err = io.WriteString(w, chunk)
			f.written.Add(int64(n))
			if err == nil {
				err = rc.Flush()
			}
		}
	}))
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	return f
}

// waitHandler waits for the flood's handler to return: it stopped because
// the proxy closed the connection, not because it ran out of data.
func (f *faultFlood) waitHandler(t *testing.T, limit int64) {
	t.Helper()
	select {
	case <-f.done:
	case <-time.After(20 * time.Second):
		t.Fatal("the flooding upstream is still writing: the proxy did not hang up")
	}
	if n := f.written.Load(); n >= limit {
		t.Fatalf("the upstream got all %d bytes out: the proxy kept reading", n)
	}
}

// A provider whose first event never ends (no blank line) or that sends
// 10 MB of pings and comments before any content fails its attempt on the
// pre-commit bounds (stream max_buffer, the event count), not by memory;
// one that answers a non-streaming request with an endless event stream
// fails at once. Alone, such a provider gets the client a generic 503 and
// the log line says what went wrong; with a second provider, the client
// gets the answer.
func TestFaultUpstreamFloods(t *testing.T) {
	faultNoLeaks(t)
	const limit = 10 << 20
	aStart := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"x\",\"content\":[],\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n"
	pings := strings.Repeat("event: ping\ndata: {\"type\": \"ping\"}\n\n", 64)
	cases := []struct {
		name        string
		k           load.Kind
		head, chunk string
		want        string
	}{
		{"unbounded first event", load.Kind{Stream: true}, aStart + "event: content_block_delta\ndata: ", strings.Repeat("x", 32<<10), "size limit"},
		{"unbounded data lines", load.Kind{Dialect: load.OpenAI, Stream: true}, "", "data: {\"choices\":[]}\n", "size limit"},
		{"10 MB of pings", load.Kind{Stream: true}, aStart, pings, "no output after"},
		{"10 MB of comments", load.Kind{Dialect: load.OpenAI, Stream: true}, "", strings.Repeat(": keep-alive\n\n", 64), "no output after"},
		{"event stream for a non-stream request", load.Kind{}, aStart, pings, "event stream"},
	}
	good := newUpstream(t, sim.Config{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			flood := newFaultFlood(t, tc.head, tc.chunk, limit)
			bad := &upstream{URL: flood.URL}
			block := "\t\tstream {\n\t\t\tmax_buffer 64KiB\n\t\t}\n\t\tretry {\n\t\t\tsame_provider 0\n\t\t}\n"
			p := startProxy(t, provider("flood", bad)+block)
			req := faultRequest("POST", p.URL, tc.k, strings.NewReader(string(load.Body(tc.k, "m"))))
			faultExpectError(t, faultClient(t), req, tc.k, http.StatusServiceUnavailable, "all providers failed")
			observeWaitFor(t, p.LogFile, tc.want)
			flood.waitHandler(t, limit)

			p = startProxy(t, provider("flood", bad, "priority 0")+provider("good", good, "priority 1")+block)
			ctx := ctxTimeout(t, 20*time.Second)
			var err error
			var text string
			switch {
			case (tc.k.Dialect == load.OpenAI):
				var acc openai.ChatCompletionAccumulator
				acc, err = streamOpenAI(ctx, openaiClient(p, "k"), openaiParams("gpt-test"))
				if len(acc.Choices) > 0 {
					text = acc.Choices[0].Message.Content
				}
			case tc.k.Stream:
				m, e := streamAnthropic(ctx, anthropicClient(p, "k"), anthropicParams("claude-test"))
				err, text = e, messageText(m)
			default:
				m, e := anthropicClient(p, "k").Messages.New(ctx, anthropicParams("claude-test"))
				if err = e; m != nil {
					text = messageText(*m)
				}
			}
			if err != nil || text != wantText {
				t.Fatalf("no failover past the flood: %v (text %q)", err, text)
			}
			flood.waitHandler(t, limit)
			faultOK(t, p)
		})
	}
}

// An upstream that stalls mid-stream must not stall what it already sent:
// the relay coalesces a burst of events into one write, but every event
// reaches the client before the proxy waits on the upstream again.
func TestFaultStalledUpstreamFlushed(t *testing.T) {
	faultNoLeaks(t)
	release := make(chan struct{})
	ev := func(name, data string) string { return "event: " + name + "\ndata: " + data + "\n\n" }
	delta := func(s string) string {
		return ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`+s+`"}}`)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		io.WriteString(w, ev("message_start", `{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","model":"x","content":[],"usage":{"input_tokens":1,"output_tokens":1}}}`)+
			ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)+delta("one"))
		rc.Flush()
		io.WriteString(w, delta(" two")+delta(" three")) // relayed after the commit
		rc.Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, delta(" four")+ev("content_block_stop", `{"type":"content_block_stop","index":0}`)+
			ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":4}}`)+
			ev("message_stop", `{"type":"message_stop"}`))
	}))
	t.Cleanup(srv.Close)
	p := startProxy(t, provider("stalling", &upstream{URL: srv.URL}))
	k := load.Kind{Stream: true}
	req := faultRequest("POST", p.URL, k, strings.NewReader(string(load.Body(k, "claude-test"))))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := faultClient(t).Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got strings.Builder
	buf := make([]byte, 4096)
	for !strings.Contains(got.String(), `"text":" three"`) {
		n, err := resp.Body.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			t.Fatalf("the events before the stall did not reach the client (%v): %q", err, got.String())
		}
	}
	close(release)
	rest, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	got.Write(rest)
	if v, why := load.Check(k, resp.StatusCode, resp.Header.Get("Content-Type"), []byte(got.String()), "one two three four"); v != load.Complete {
		t.Fatalf("%v: %s", v, why)
	}
	faultOK(t, startProxy(t, provider("good", newUpstream(t, sim.Config{}))))
}

// faultPEM writes the certificate of a TLS test server to a PEM file.
func faultPEM(t *testing.T, cert *x509.Certificate) string {
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A provider with a self-signed certificate fails with an error that says
// so in the log, until its CA is configured with tls_trusted_ca.
func TestFaultProviderTLS(t *testing.T) {
	faultNoLeaks(t)
	srv := httptest.NewTLSServer(sim.New(sim.Config{Tokens: 9}))
	t.Cleanup(srv.Close)
	tlsUp := &upstream{URL: srv.URL}
	fast := "\t\tretry {\n\t\t\tbackoff 10ms 20ms\n\t\t}\n"

	p := startProxy(t, provider("selfsigned", tlsUp)+fast)
	c := faultClient(t)
	req := faultRequest("POST", p.URL, faultAnthropic, strings.NewReader(string(load.Body(faultAnthropic, "claude-test"))))
	faultExpectError(t, c, req, faultAnthropic, http.StatusServiceUnavailable, "all providers failed")
	observeWaitFor(t, p.LogFile, "certificate")

	p = startProxy(t, provider("selfsigned", tlsUp, "tls_trusted_ca "+faultPEM(t, srv.Certificate()))+fast)
	faultOK(t, p)
}

// A provider whose host does not resolve (.invalid never does, RFC 6761)
// fails fast with an error naming the lookup in the log, and the next
// provider answers.
func TestFaultProviderDNS(t *testing.T) {
	faultNoLeaks(t)
	nowhere := &upstream{URL: "http://llm-provider.invalid"}
	good := newUpstream(t, sim.Config{})
	block := "\t\ttimeouts {\n\t\t\tconnect 3s\n\t\t}\n\t\tretry {\n\t\t\tbackoff 10ms 20ms\n\t\t}\n"

	p := startProxy(t, provider("nowhere", nowhere)+block)
	start := time.Now()
	req := faultRequest("POST", p.URL, faultOpenAI, strings.NewReader(string(load.Body(faultOpenAI, "gpt-test"))))
	faultExpectError(t, faultClient(t), req, faultOpenAI, http.StatusServiceUnavailable, "all providers failed")
	observeWaitFor(t, p.LogFile, "no such host")
	// Bounded by the connect timeout whatever the resolver does (two
	// attempts of at most 3s each); generous for a loaded machine.
	if d := time.Since(start); d > 15*time.Second {
		t.Fatalf("DNS failure took %v", d)
	}

	p = startProxy(t, provider("nowhere", nowhere, "priority 0")+provider("good", good, "priority 1")+block)
	faultOK(t, p)
}

// A short soak: steady mixed load (all four dialects, streaming or not,
// 1% of streams left by the client) on three providers that each fault
// about 5% of requests in every way the simulator can. Every response is
// complete or a clean error, and no goroutine outlives the load.
// `make -f xcaddy.mk soak` is the long form (with reloads).
func TestFaultSoakShort(t *testing.T) {
	if testing.Short() {
		t.Skip("30 s soak: skipped with -short")
	}
	faultNoLeaks(t)
	var ups []*upstream
	var urls []string
	for range 3 {
		u := newUpstream(t, sim.Config{Tokens: 18, Faults: load.SoakFaults()})
		ups = append(ups, u)
		urls = append(urls, u.URL)
	}
	p := startProxy(t, load.SoakProxyBlock(urls, false))
	tr := load.NewTransport(64)
	t.Cleanup(tr.CloseIdleConnections)
	duration := 30 * time.Second
	if d, err := time.ParseDuration(os.Getenv("LLM_HEDGE_SOAK")); err == nil {
		duration = d
	}
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	g0 := runtime.NumGoroutine()
	tally := load.Soak(context.Background(), load.SoakConfig{
		BaseURL: p.URL, Client: &http.Client{Transport: tr}, Model: "claude-soak", Kinds: load.AllKinds, AbortPercent: 1,
		WantText: strings.TrimSpace(strings.Repeat(sim.DefaultText+" ", 2)),
		Rate:     40, MaxInFlight: 64, Duration: duration, Timeout: 30 * time.Second,
	})
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	var faulted int64
	for _, u := range ups {
		faulted += u.Stats().Faulted
	}
	t.Logf("soak %v: %s\nprovider faults injected: %d; goroutines %d -> %d under load; heap in use %.1f -> %.1f MiB",
		duration, tally.Summary(), faulted, g0, runtime.NumGoroutine(), float64(before.HeapInuse)/(1<<20), float64(after.HeapInuse)/(1<<20))
	if tally.Dirty > 0 {
		t.Fatalf("%d responses were neither complete nor a clean error", tally.Dirty)
	}
	if tally.Complete == 0 || faulted == 0 {
		t.Fatalf("the soak proved nothing: %d complete, %d faults", tally.Complete, faulted)
	}
	for _, u := range ups {
		if err := u.SetConfig(sim.Config{Tokens: 9}); err != nil { // healthy again
			t.Fatal(err)
		}
	}
	faultOK(t, p)
}
