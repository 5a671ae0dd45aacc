package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/engine"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/llmhedge/caddy-llm-hedge"
	"github.com/llmhedge/caddy-llm-hedge/internal/freeport"
	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// upstream is a simulated provider on a loopback port.
type upstream struct {
	*sim.Simulator
	URL string
}

func newUpstream(t testing.TB, cfg sim.Config) *upstream {
	t.Helper()
	if cfg.Tokens == 0 {
		cfg.Tokens = 9 // one delta per word of sim.DefaultText
	}
	s := sim.New(cfg)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return &upstream{Simulator: s, URL: srv.URL}
}

// proxy is a real Caddy, loaded in this process from a Caddyfile, with
// llm_hedge in front of the given upstreams.
type proxy struct {
	URL      string
	AdminURL string
	LogFile  string
}

// freePort is freeport.Port, failing the test when there is none.
func freePort(t testing.TB) int {
	t.Helper()
	port, err := freeport.Port()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// startProxy loads a Caddy config whose site serves `llm_hedge { <block> }`.
// Extra site directives (log_append, ...) go in siteExtra.
func startProxy(t testing.TB, block string, siteExtra ...string) *proxy {
	t.Helper()
	p := &proxy{LogFile: filepath.Join(t.TempDir(), "caddy.log")}
	port, admin := freePort(t), freePort(t)
	p.URL = fmt.Sprintf("http://127.0.0.1:%d", port)
	p.AdminURL = fmt.Sprintf("http://127.0.0.1:%d", admin)
	p.load(t, port, admin, block, siteExtra...)
	t.Cleanup(func() { _ = caddy.Stop() })
	return p
}

func (p *proxy) caddyfile(port, admin int, block string, siteExtra ...string) string {
	return fmt.Sprintf(`{
	admin 127.0.0.1:%d
	log {
		output file %s
		format json
		level DEBUG
	}
}
http://127.0.0.1:%d {
	%s
	llm_hedge {
%s
	}
}
`, admin, p.LogFile, port, strings.Join(siteExtra, "\n\t"), block)
}

func (p *proxy) load(t testing.TB, port, admin int, block string, siteExtra ...string) {
	t.Helper()
	cfg := p.caddyfile(port, admin, block, siteExtra...)
	js, warn, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cfg), nil)
	if err != nil {
		t.Fatalf("adapt: %v\n%s", err, cfg)
	}
	for _, w := range warn {
		t.Logf("adapt warning: %s", w.String())
	}
	if err := caddy.Load(js, true); err != nil {
		t.Fatalf("load: %v", err)
	}
	waitListening(t, fmt.Sprintf("127.0.0.1:%d", port))
}

// reload replaces the running config through the admin endpoint, as an
// operator's `caddy reload` does.
func (p *proxy) reload(t testing.TB, block string) {
	t.Helper()
	if status := p.postLoad(t, block); status != 200 {
		t.Fatalf("reload: status %d", status)
	}
}

// postLoad posts the config of block to /load and returns the status,
// once the servers /load restarted listen anew (settleReload).
func (p *proxy) postLoad(t testing.TB, block string) int {
	t.Helper()
	port, admin := p.ports()
	siteBefore, adminBefore := listenSockets(port), listenSockets(admin)
	req, _ := http.NewRequest(http.MethodPost, p.AdminURL+"/load", strings.NewReader(p.caddyfile(port, admin, block)))
	req.Header.Set("Content-Type", "text/caddyfile")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("reload: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		siteBefore = nil // a refused config leaves the site's servers as they were
	}
	settleReload(t, port, admin, siteBefore, adminBefore)
	return resp.StatusCode
}

// settleReload waits out a /load's restart of Caddy's servers and drops
// the connections the client pooled to them: after a load that failed
// too, which puts the running config back and restarts the admin server
// (siteBefore nil: the site's listener is not waited for).
func settleReload(t testing.TB, port, admin int, siteBefore, adminBefore map[string]bool) {
	t.Helper()
	// Caddy closes the old server's idle connections at once; a client
	// (the SDKs here, with retries off) that writes its next request on
	// one races that close and may get a broken pipe before the proxy
	// sees the request (docs/fleet.md). Requests in flight are untouched.
	// The old server closes its listener and connections after /load has
	// answered, and a connection a client dialled meanwhile can land in
	// its accept queue (SO_REUSEPORT) and be reset: wait for the old
	// listeners to close (the kernel's list of sockets says), then drop
	// what the client pooled meanwhile.
	http.DefaultClient.CloseIdleConnections()
	if siteBefore != nil {
		waitListenersReplaced(t, port, siteBefore)
	}
	waitListenersReplaced(t, admin, adminBefore)
	http.DefaultClient.CloseIdleConnections()
}

func (p *proxy) logs(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(p.LogFile)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func waitListening(t testing.TB, addr string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s not listening", addr)
}

func anthropicClient(p *proxy, key string) *anthropic.Client {
	c := anthropic.NewClient(aoption.WithBaseURL(p.URL), aoption.WithAPIKey(key), aoption.WithMaxRetries(0))
	return &c
}

func openaiClient(p *proxy, key string) *openai.Client {
	c := openai.NewClient(ooption.WithBaseURL(p.URL+"/v1"), ooption.WithAPIKey(key), ooption.WithMaxRetries(0))
	return &c
}

func anthropicParams(model string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     anthropic.Model(model),
		MaxTokens: 64,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))},
	}
}

func openaiParams(model string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    openai.ChatModel(model),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
	}
}

// streamAnthropic streams a message through the SDK and returns its text
// and the SDK's error (nil only for a clean finish).
func streamAnthropic(ctx context.Context, c *anthropic.Client, params anthropic.MessageNewParams) (anthropic.Message, error) {
	stream := c.Messages.NewStreaming(ctx, params)
	defer stream.Close()
	var msg anthropic.Message
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			return msg, err
		}
	}
	return msg, stream.Err()
}

func streamOpenAI(ctx context.Context, c *openai.Client, params openai.ChatCompletionNewParams) (openai.ChatCompletionAccumulator, error) {
	stream := c.Chat.Completions.NewStreaming(ctx, params)
	defer stream.Close()
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	return acc, stream.Err()
}

func messageText(m anthropic.Message) string {
	var b strings.Builder
	for _, c := range m.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// completions counts the completion requests an upstream received.
func completions(u *upstream) int {
	n := 0
	for _, r := range u.Requests() {
		if r.Path == "/v1/messages" || r.Path == "/v1/chat/completions" {
			n++
		}
	}
	return n
}

func provider(name string, u *upstream, opts ...string) string {
	return fmt.Sprintf("\t\tprovider %s %s {\n\t\t\t%s\n\t\t}\n", name, u.URL, strings.Join(opts, "\n\t\t\t"))
}

func ctxTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// watchBookkeeping makes every request report its bookkeeping once it is
// done, until the test ends (engine.WatchBookkeeping).
func watchBookkeeping(t testing.TB) <-chan engine.BookkeepingReport {
	ch, stop := engine.WatchBookkeeping()
	t.Cleanup(stop)
	return ch
}
