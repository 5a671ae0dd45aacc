package llmhedge_test

import (
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// refusingH2 is a bare HTTP/2 server over TLS, written with x/net/http2's
// framer so that it can do what net/http's server does not on demand: it
// answers the first refuse streams with RST_STREAM REFUSED_STREAM (a
// provider shedding load or rotating a connection: the stream was not
// processed), and every later stream with one Anthropic message.
type refusingH2 struct {
	URL, trust string
	refuse     int64
	streams    atomic.Int64
	ln         net.Listener
	done       chan struct{} // closed when the test ends
	wg         sync.WaitGroup
}

const refusingAnswer = `{"id":"msg_h2","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":"` +
	wantText + `"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":9}}`

func newRefusingH2(t *testing.T, refuse int64) *refusingH2 {
	t.Helper()
	// httptest's certificate (127.0.0.1), on a listener of our own.
	cert := httptest.NewUnstartedServer(nil)
	cert.StartTLS()
	cfg := cert.TLS.Clone()
	s := &refusingH2{refuse: refuse, trust: "tls_trusted_ca " + faultPEM(t, cert.Certificate()), done: make(chan struct{})}
	cert.Close()
	cfg.NextProtos = []string{"h2"}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.ln, s.URL = ln, "https://"+ln.Addr().String()
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Go(func() { s.serve(c) })
		}
	})
	t.Cleanup(func() { close(s.done); ln.Close(); s.wg.Wait() })
	return s
}

func (s *refusingH2) serve(c net.Conn) {
	defer c.Close()
	stop := make(chan struct{})
	defer close(stop)
	go func() { // the test's end closes the connections too
		select {
		case <-stop:
		case <-s.done:
			c.Close()
		}
	}()
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(c, preface); err != nil || string(preface) != http2.ClientPreface {
		return
	}
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if fr.WriteSettings() != nil {
		return
	}
	var hdr bytes.Buffer
	enc := hpack.NewEncoder(&hdr)
	answer := func(id uint32) error {
		hdr.Reset()
		enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
		enc.WriteField(hpack.HeaderField{Name: "content-type", Value: "application/json"})
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hdr.Bytes(), EndHeaders: true}); err != nil {
			return err
		}
		return fr.WriteData(id, true, []byte(refusingAnswer))
	}
	open := map[uint32]bool{} // streams to answer once their body ends
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				err = fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				err = fr.WritePing(true, f.Data)
			}
		case *http2.MetaHeadersFrame:
			if s.streams.Add(1) <= s.refuse {
				err = fr.WriteRSTStream(f.StreamID, http2.ErrCodeRefusedStream)
				break
			}
			if open[f.StreamID] = true; f.StreamEnded() {
				delete(open, f.StreamID)
				err = answer(f.StreamID)
			}
		case *http2.DataFrame:
			if f.StreamEnded() && open[f.StreamID] {
				delete(open, f.StreamID)
				err = answer(f.StreamID)
			}
		}
		if err != nil {
			return
		}
	}
}

// A stream the provider refused unprocessed (REFUSED_STREAM) is sent again
// at once on the same provider, by net/http, once: with one provider and
// no same-provider retries the client still gets its answer.
func TestH2ProviderRefusedStreamResent(t *testing.T) {
	faultNoLeaks(t)
	s := newRefusingH2(t, 1)
	up := &upstream{URL: s.URL}
	p := startProxy(t, provider("h2", up, s.trust)+"hedge off\nretry {\n same_provider 0\n}\n")
	m, err := anthropicClient(p, "k").Messages.New(ctxTimeout(t, 10*time.Second), anthropicParams("claude-test"))
	if err != nil || messageText(*m) != wantText {
		t.Fatalf("answer after a refused stream: %v", err)
	}
	if n := s.streams.Load(); n != 2 {
		t.Fatalf("%d streams, want 2 (one refused, one resend)", n)
	}
}

// Refused twice, the request is not resent a third time by net/http (it
// would try six times, with backoff): it fails as a reset, not as a silent
// route, and the next provider answers.
func TestH2ProviderRefusedTwiceFailsOver(t *testing.T) {
	faultNoLeaks(t)
	s := newRefusingH2(t, 2)
	good := newH2Upstream(t, sim.Config{})
	p := startProxy(t, provider("refusing", &upstream{URL: s.URL}, s.trust, "priority 0")+
		provider("good", good.upstream, good.trust, "priority 1")+"hedge off\nretry {\n same_provider 0\n}\n")
	m, err := anthropicClient(p, "k").Messages.New(ctxTimeout(t, 10*time.Second), anthropicParams("claude-test"))
	if err != nil || messageText(*m) != wantText {
		t.Fatalf("answer: %v", err)
	}
	if n := s.streams.Load(); n != 2 {
		t.Fatalf("the refusing provider saw %d streams, want 2", n)
	}
	_, _, body := healthAdmin(t, p, "GET", "/llm_hedge/providers")
	for _, v := range healthViews(t, body) {
		if v.Name == "refusing" && (v.LastError == nil || v.LastError.Class != "reset") {
			t.Fatalf("refusing provider's last error %+v, want class reset", v.LastError)
		}
	}
}
