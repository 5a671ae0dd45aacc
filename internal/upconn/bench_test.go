package upconn

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkTransport is one request and its whole answer through
// net/http's transport over loopback, its connection plain (net/http's 4
// KiB read buffer) or pooled (Wrap, and TransportBuffer): a 1 KiB JSON
// answer, and a 60-event SSE stream written in bursts of 6 events. The
// server runs in the same process, so the figures compare the two, not
// a proxy.
func BenchmarkTransport(b *testing.B) {
	var events strings.Builder
	for i := range 60 {
		fmt.Fprintf(&events, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"token %d\"}}\n\n", i)
	}
	parts := strings.SplitAfter(events.String(), "\n\n")
	json := `{"id":"msg","content":[{"type":"text","text":"` + strings.Repeat("x", 950) + `"}]}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/json" {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, json)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for i, ev := range parts {
			io.WriteString(w, ev)
			if i%6 == 5 {
				w.(http.Flusher).Flush()
			}
		}
	}))
	defer srv.Close()
	for _, pooled := range []bool{false, true} {
		tr := &http.Transport{MaxIdleConnsPerHost: 4}
		name := "plain"
		if pooled {
			name = "pooled"
			tr.ReadBufferSize = TransportBuffer
			tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return Wrap(c), nil
			}
		}
		client := &http.Client{Transport: tr}
		for _, path := range []string{"/json", "/sse"} {
			b.Run(name+path, func(b *testing.B) {
				b.ReportAllocs()
				buf := make([]byte, 4096)
				for b.Loop() {
					resp, err := client.Get(srv.URL + path)
					if err != nil {
						b.Fatal(err)
					}
					for {
						if _, err := resp.Body.Read(buf); err == io.EOF {
							break
						} else if err != nil {
							b.Fatal(err)
						}
					}
					resp.Body.Close()
				}
			})
		}
		tr.CloseIdleConnections()
	}
}
