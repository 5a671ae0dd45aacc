package e2e

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
// resets the first refuse streams with code (REFUSED_STREAM: a provider
// shedding load, the stream not processed), sends a graceful GOAWAY that
// excludes the goawayAt-th stream (a provider rotating the connection),
// and answers every other stream with one Anthropic message.
type refusingH2 struct {
	URL, trust string
	refuse     int64
	code       http2.ErrCode
	goawayAt   int64
	streams    atomic.Int64
	conns      atomic.Int64
	ln         net.Listener
	done       chan struct{} // closed when the test ends
	wg         sync.WaitGroup
}

const refusingAnswer = `{"id":"msg_h2","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":"` +
	wantText + `"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":9}}`

func newRefusingH2(t *testing.T, refuse int64, code http2.ErrCode, goawayAt int64) *refusingH2 {
	t.Helper()
	// httptest's certificate (127.0.0.1), on a listener of our own.
	cert := httptest.NewUnstartedServer(nil)
	cert.StartTLS()
	cfg := cert.TLS.Clone()
	s := &refusingH2{refuse: refuse, code: code, goawayAt: goawayAt, trust: "tls_trusted_ca " + faultPEM(t, cert.Certificate()), done: make(chan struct{})}
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
	s.conns.Add(1)
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
	var last uint32           // the last stream taken on this connection
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
			switch n := s.streams.Add(1); {
			case n <= s.refuse:
				err = fr.WriteRSTStream(f.StreamID, s.code)
				continue
			case n == s.goawayAt:
				err = fr.WriteGoAway(last, http2.ErrCodeNo, nil)
				continue
			}
			last = f.StreamID
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
// at once on the same provider, once: with one provider and no
// same-provider retries the client still gets its answer.
func TestH2ProviderRefusedStreamResent(t *testing.T) {
	faultNoLeaks(t)
	s := newRefusingH2(t, 1, http2.ErrCodeRefusedStream, 0)
	p := startProxy(t, provider("h2", &upstream{URL: s.URL}, s.trust)+"hedge off\nretry {\n same_provider 0\n}\n")
	h2Answered(t, p)
	if n := s.streams.Load(); n != 2 {
		t.Fatalf("%d streams, want 2 (one refused, one resend)", n)
	}
}

// A graceful GOAWAY that excludes the request's stream (the provider
// rotating its connection) has it sent again at once, on a new connection.
func TestH2ProviderGoAwayResent(t *testing.T) {
	faultNoLeaks(t)
	s := newRefusingH2(t, 0, 0, 2)
	p := startProxy(t, provider("h2", &upstream{URL: s.URL}, s.trust)+"hedge off\nretry {\n same_provider 0\n}\n")
	h2Answered(t, p) // stream 1, answered
	h2Answered(t, p) // stream 3 excluded by the GOAWAY, then stream 1 of a new connection
	if n, c := s.streams.Load(), s.conns.Load(); n != 3 || c != 2 {
		t.Fatalf("%d streams on %d connections, want 3 on 2", n, c)
	}
}

// Refused twice, the request is not sent a third time: it fails as a
// reset (not a silent route: the provider answered), and the next provider
// answers.
func TestH2ProviderRefusedTwiceFailsOver(t *testing.T) {
	faultNoLeaks(t)
	s := newRefusingH2(t, 2, http2.ErrCodeRefusedStream, 0)
	h2FailsOverOnce(t, s)
}

// A PROTOCOL_ERROR reset proves nothing about the stream (net/http would
// resend it, golang/go#47635): it is not resent, and the next provider
// answers.
func TestH2ProviderProtocolErrorNotResent(t *testing.T) {
	faultNoLeaks(t)
	s := newRefusingH2(t, 1, http2.ErrCodeProtocol, 0)
	h2FailsOverOnce(t, s)
}

func h2Answered(t *testing.T, p *proxy) {
	t.Helper()
	m, err := anthropicClient(p, "k").Messages.New(ctxTimeout(t, 10*time.Second), anthropicParams("claude-test"))
	if err != nil || messageText(*m) != wantText {
		t.Fatalf("answer: %v", err)
	}
}

// h2FailsOverOnce: the request on s is answered by the next provider after
// s saw it twice (refused, resent) or once (not resent), with class reset.
func h2FailsOverOnce(t *testing.T, s *refusingH2) {
	t.Helper()
	good := newH2Upstream(t, sim.Config{})
	p := startProxy(t, provider("refusing", &upstream{URL: s.URL}, s.trust, "priority 0")+
		provider("good", good.upstream, good.trust, "priority 1")+"hedge off\nretry {\n same_provider 0\n}\n")
	h2Answered(t, p)
	if n := s.streams.Load(); n != s.refuse {
		t.Fatalf("the refusing provider saw %d streams, want %d", n, s.refuse)
	}
	_, _, body := healthAdmin(t, p, "GET", "/llm_hedge/providers")
	for _, v := range healthViews(t, body) {
		if v.Name == "refusing" {
			if v.LastError == nil || v.LastError.Class != "reset" {
				t.Fatalf("refusing provider's last error %+v, want class reset", v.LastError)
			}
			return
		}
	}
	t.Fatalf("no provider refusing in %s", body)
}
