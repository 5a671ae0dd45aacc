package llmhedge_test

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"

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
	conns       atomic.Int64
	connsByAddr sync.Map
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
		if _, seen := u.connsByAddr.LoadOrStore(r.RemoteAddr, true); !seen {
			u.conns.Add(1)
		}
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
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			m, err := streamAnthropic(ctxTimeout(t, 10*time.Second), anthropicClient(p, "k"), anthropicParams("claude-test"))
			if err == nil && messageText(m) != wantText {
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
	if all, h2 := u.all.Load(), u.h2.Load(); all != 10 || h2 != all {
		t.Fatalf("%d of %d upstream requests over HTTP/2, want 10 of 10", h2, all)
	}
	if n := u.conns.Load(); n > 2 {
		t.Fatalf("10 requests opened %d connections: HTTP/2 shares one", n)
	}
}

type errText string

func (e errText) Error() string { return "text " + string(e) }

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
		"hedge off\ntimeouts {\n idle 500ms\n}\n")
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	run := func(header string) {
		defer wg.Done()
		opts := []aoption.RequestOption{aoption.WithBaseURL(p.URL), aoption.WithAPIKey("k"), aoption.WithMaxRetries(0)}
		if header != "" {
			opts = append(opts, aoption.WithHeader(header, "1"))
		}
		c := anthropic.NewClient(opts...)
		m, err := streamAnthropic(ctxTimeout(t, 15*time.Second), &c, anthropicParams("claude-test"))
		if err == nil && messageText(m) != longText {
			err = errText(header + ": " + messageText(m))
		}
		errs <- err
	}
	wg.Add(10)
	go run("X-Cut")
	go run("X-Stall")
	for range 8 {
		go run("")
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if h2, all := flaky.h2.Load(), flaky.all.Load(); h2 != all || all < 10 {
		t.Fatalf("flaky provider: %d of %d requests over HTTP/2", h2, all)
	}
}
