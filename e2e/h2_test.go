package e2e

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"

	"github.com/llmhedge/caddy-llm-hedge/internal/engine"
	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// Real providers are reached over TLS, where the transport negotiates
// HTTP/2: one connection carries many streams, and a provider ends one
// with RST_STREAM or GOAWAY rather than by closing a connection. These
// tests put the simulator behind TLS with HTTP/2 on.

// h2Upstream is a simulator served over TLS with HTTP/2; h2 counts the
// requests that arrived over HTTP/2, all the requests that arrived.
type h2Upstream struct {
	*upstream
	trust       string // the provider option that trusts its certificate
	h2, all     atomic.Int64
	connsByAddr sync.Map // one entry per connection that carried a request
}

func newH2Upstream(t *testing.T, cfg sim.Config) *h2Upstream {
	t.Helper()
	if cfg.Tokens == 0 {
		cfg.Tokens = 9
	}
	s := sim.New(cfg)
	u := &h2Upstream{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.all.Add(1)
		if r.ProtoMajor == 2 {
			u.h2.Add(1)
		}
		u.connsByAddr.Store(r.RemoteAddr, true)
		s.ServeHTTP(w, r)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	u.upstream = &upstream{Simulator: s, URL: srv.URL}
	u.trust = "tls_trusted_ca " + faultPEM(t, srv.Certificate())
	return u
}

// Streams and answers through the SDKs, every upstream request over
// HTTP/2, concurrent streams on one connection.
func TestH2ProviderStreams(t *testing.T) {
	faultNoLeaks(t)
	u := newH2Upstream(t, sim.Config{})
	p := startProxy(t, provider("h2", u.upstream, u.trust))
	faultOK(t, p)
	clients := make([]*anthropic.Client, 8)
	for i := range clients {
		clients[i] = anthropicClient(p, "k")
	}
	allStreamed(t, wantText, clients...)
	if all, h2 := u.all.Load(), u.h2.Load(); all != 10 || h2 != all {
		t.Fatalf("%d of %d upstream requests over HTTP/2, want 10 of 10", h2, all)
	}
	n := 0
	u.connsByAddr.Range(func(any, any) bool { n++; return true })
	if n > 2 {
		t.Fatalf("10 requests opened %d connections: HTTP/2 shares one", n)
	}
}

type errText string

func (e errText) Error() string { return "text " + string(e) }

// allStreamed streams one message through each client at once; each must
// read want.
func allStreamed(t *testing.T, want string, clients ...*anthropic.Client) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(clients))
	for _, c := range clients {
		wg.Go(func() {
			m, err := streamAnthropic(ctxTimeout(t, 15*time.Second), c, anthropicParams("claude-test"))
			if err == nil && messageText(m) != want {
				err = errText(messageText(m))
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// A provider that resets a stream before its answer (RST_STREAM, an
// HTTP/2 provider's crash of one request) fails as a reset, as a closed
// connection does over HTTP/1, not as a connection that never reached it;
// the next provider answers.
func TestH2ProviderResetIsReset(t *testing.T) {
	faultNoLeaks(t)
	bad := newH2Upstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultReset}}})
	good := newH2Upstream(t, sim.Config{})
	p := startProxy(t, provider("bad", bad.upstream, bad.trust, "priority 0")+provider("good", good.upstream, good.trust, "priority 1")+
		"hedge off\ncooldown {\n failures 100\n}\n")
	m, err := anthropicClient(p, "k").Messages.New(ctxTimeout(t, 10*time.Second), anthropicParams("claude-test"))
	if err != nil || messageText(*m) != wantText {
		t.Fatalf("answer: %v", err)
	}
	_, _, body := healthAdmin(t, p, "GET", "/llm_hedge/providers")
	for _, v := range healthViews(t, body) {
		if v.Name != "bad" {
			continue
		}
		if v.LastError == nil || v.LastError.Class != "reset" {
			t.Fatalf("bad provider's last error %+v, want class reset", v.LastError)
		}
		return
	}
	t.Fatalf("no provider bad in %s", body)
}

// A cut stream and a stalled one over HTTP/2 are continued on the next
// provider as over HTTP/1, and the streams sharing the stalled stream's
// connection are not disturbed by its reset.
func TestH2ProviderCutAndStall(t *testing.T) {
	faultNoLeaks(t)
	flaky := newH2Upstream(t, sim.Config{Tokens: 60, Text: longText, Faults: []sim.Fault{
		{Kind: sim.FaultCut, After: 20, Count: 1, Header: "X-Cut"},
		{Kind: sim.FaultStall, After: 20, Count: 1, Header: "X-Stall"},
	}})
	other := newH2Upstream(t, sim.Config{Tokens: 60, Text: longText})
	p := startProxy(t, provider("flaky", flaky.upstream, flaky.trust, "priority 1", "api anthropic")+
		provider("other", other.upstream, other.trust, "priority 2", "api anthropic")+
		"hedge off\ntimeouts {\n idle 2s\n}\n") // far above the eight healthy streams' gaps under -race
	clients := make([]*anthropic.Client, 10)
	for i := range clients {
		opts := []aoption.RequestOption{aoption.WithBaseURL(p.URL), aoption.WithAPIKey("k"), aoption.WithMaxRetries(0)}
		switch i { // the one cut stream and the one stalled stream among eight others
		case 0:
			opts = append(opts, aoption.WithHeader("X-Cut", "1"))
		case 1:
			opts = append(opts, aoption.WithHeader("X-Stall", "1"))
		}
		c := anthropic.NewClient(opts...)
		clients[i] = &c
	}
	allStreamed(t, longText, clients...)
	if h2, all := flaky.h2.Load(), flaky.all.Load(); h2 != all || all < 10 {
		t.Fatalf("flaky provider: %d of %d requests over HTTP/2 %s", h2, all, p.logs(t))
	}
}

// freezer forwards TCP connections to target until freeze: from then on,
// the connections open at that moment carry nothing more either way and
// stay open (a NAT or a load balancer that lost them, silently), while new
// connections are forwarded as before.
type freezer struct {
	addr   string
	frozen chan struct{} // closed by freeze
	done   chan struct{}
	wg     sync.WaitGroup
}

func newFreezer(t *testing.T, target string) *freezer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{addr: ln.Addr().String(), frozen: make(chan struct{}), done: make(chan struct{})}
	f.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			old := true // accepted before freeze
			select {
			case <-f.frozen:
				old = false
			default:
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			pipe := func(dst, src net.Conn) {
				buf := make([]byte, 32<<10)
				for {
					n, err := src.Read(buf)
					if old {
						select {
						case <-f.frozen:
							<-f.done // hold both ends open, carry nothing
							return
						default:
						}
					}
					if n > 0 {
						if _, werr := dst.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}
			f.wg.Go(func() { pipe(up, c); c.Close(); up.Close() })
			f.wg.Go(func() { pipe(c, up); c.Close(); up.Close() })
		}
	})
	t.Cleanup(func() { close(f.done); ln.Close(); f.wg.Wait() })
	return f
}

func (f *freezer) freeze() { close(f.frozen) }

// A provider's HTTP/2 connection that the network dropped silently is
// found out by a PING within seconds and closed: the request on it ends
// then, not at its response timeout, and the next request dials anew
// instead of hanging on the same dead connection.
func TestH2DeadConnectionIsDropped(t *testing.T) {
	faultNoLeaks(t)
	defer engine.SetH2Ping(200*time.Millisecond, 0)() // answer within timeouts.connect
	u := newH2Upstream(t, sim.Config{})
	f := newFreezer(t, strings.TrimPrefix(u.URL, "https://"))
	via := &upstream{URL: "https://" + f.addr}
	p := startProxy(t, provider("h2", via, u.trust)+"hedge off\ntimeouts {\n connect 1500ms\n response 8s\n}\nretry {\n same_provider 0\n}\n") // a healthy PING is answered well within 1.5s under -race; a dead one is found by ~1.7s, against the 4s bound
	ask := func() (time.Duration, error) {
		start := time.Now()
		m, err := anthropicClient(p, "k").Messages.New(ctxTimeout(t, 20*time.Second), anthropicParams("claude-test"))
		if err == nil && messageText(*m) != wantText {
			err = errText(messageText(*m))
		}
		return time.Since(start), err
	}
	if _, err := ask(); err != nil {
		t.Fatal(err)
	}
	f.freeze()
	if d, _ := ask(); d > 4*time.Second { // its error, or an answer, is the policy's; its time is the point
		t.Fatalf("the request on the dead connection took %v: the connection was not checked", d)
	}
	d, err := ask()
	if err != nil || d > 4*time.Second {
		t.Fatalf("the request after it: %v after %v, want an answer on a new connection", err, d)
	}
}
