package engine

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/stream"
	"github.com/llmhedge/caddy-llm-hedge/internal/upconn"
)

// releaseCounter is the client side of TestRelayBurstBeforePause: each
// time the flushed bytes start with the next of want, it lets the
// provider go on (release) and notes the flushes so far.
type releaseCounter struct {
	mu      sync.Mutex
	b       strings.Builder
	flushes int
	want    []string
	release chan int // the flushes when the client had want[i]
}

func (c *releaseCounter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.b.Write(p)
}

func (c *releaseCounter) flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.flushes++
	if len(c.want) > 0 && strings.HasPrefix(c.b.String(), c.want[0]) {
		c.want = c.want[1:]
		c.release <- c.flushes
	}
	return nil
}

// roundTripPooled sends a request to the provider at addr through the
// transport the proxy builds for a cleartext provider, with an attempt's
// trace: the transport's PutIdleConn, before its own next read, clears
// the relay's Waiter (connIdle). It returns the answer and its wrapped
// connection; the body is closed and the transport's connections dropped
// when the test ends.
func roundTripPooled(t *testing.T, ctx context.Context, addr string) (*http.Response, *upconn.Conn) {
	t.Helper()
	tr, err := newTransport(time.Second, "", true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.CloseIdleConnections)
	var uc *upconn.Conn
	a := &attempt{}
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn:     func(i httptrace.GotConnInfo) { uc, _ = i.Conn.(*upconn.Conn); a.upConn.c = uc },
		PutIdleConn: a.connIdle,
	})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v1/messages", strings.NewReader("{}"))
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if uc == nil {
		if !upconn.Wraps {
			t.Skip("reads are not pooled on this platform")
		}
		t.Fatal("the provider connection is not wrapped")
	}
	return resp, uc
}

func httpChunk(s string) string { return fmt.Sprintf("%x\r\n%s\r\n", len(s), s) }

// eventsBefore splits events (CRLF lines) after the last one that ends in
// their first n bytes.
func eventsBefore(events string, n int) (string, string) {
	i := strings.LastIndex(events[:n], "\r\n\r\n") + 4
	return events[:i], events[i:]
}

// A cleartext provider sends a first event, and once the client has it,
// a burst in one write; it pauses until the client has every complete
// event of the burst (at most 5 s), then ends the stream. Through the
// transport the proxy builds for it (pooled reads, the 512 B transport
// buffer) and the relay told by the connection, the complete events of
// the burst reach the client before the provider goes on, whatever the
// burst's shape (a read never waits with an event held back); and a
// burst that arrived whole is one flush, not one per chunk.
func TestRelayBurstBeforePause(t *testing.T) {
	ev := func(i, pad int) string {
		return fmt.Sprintf("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"%03d %s\"}}\n\n", i, strings.Repeat("x", pad))
	}
	const stop = "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	var many, chunked, partial, partialWant strings.Builder
	for i := range 20 {
		many.WriteString(ev(i, 60))
		chunked.WriteString(httpChunk(ev(i, 60)))
	}
	for i := range 5 {
		partial.WriteString(httpChunk(ev(i, 60)))
		partialWant.WriteString(ev(i, 60))
	}
	var large, largeWant strings.Builder // a chunk's data past the transport's buffer is read straight from the connection
	for i := range 3 {                   // 6 KB: within one pooled read
		large.WriteString(httpChunk(ev(i, 2000)))
		largeWant.WriteString(ev(i, 2000))
	}
	var varied, variedWant strings.Builder // size lines wherever the transport's 512 B buffer ends
	for i := range 30 {
		varied.WriteString(httpChunk(ev(i, i*7%60)))
		variedWant.WriteString(ev(i, i*7%60))
	}
	// A chunk of 511 bytes: a transport buffer's fill ends on the next size
	// line's first byte (left for the next read); then a whole chunk, and
	// a third's size line with part of its data. net/http's chunked reader
	// reads on into the third and waits for it.
	pad0 := 504 - len(ev(0, 0))
	c0, c1, c2 := httpChunk(ev(0, pad0)), httpChunk(ev(1, 10)), httpChunk(ev(2, 200))
	if len(c0) != 511 {
		t.Fatalf("the first chunk is %d bytes, want 511", len(c0))
	}
	sixth := httpChunk(ev(5, 600))
	split := ev(1, 900)
	// A first event past the reader's 4 KiB grows its buffer, so its reads
	// end inside chunks; then a 12 KB chunk of small events (CRLF lines)
	// arrives in two parts. Read there, the connection's bytes start inside
	// a chunk's data (where "..}}\r\n\r\n" may look like a chunk's end).
	// net/http's chunked reader waits for the rest of the chunk inside a
	// read, holding the events that read took (under 1 KiB here; 8.9 KB
	// when the relay read on, told the held bytes were whole chunks).
	crlf := func(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }
	var small strings.Builder
	small.WriteString(": " + strings.Repeat("p", 196) + "\r\n\r\n")
	for i := 0; small.Len() < 12000; i++ {
		small.WriteString(crlf(ev(i, 40)))
	}
	big, smallChunk := crlf(ev(998, 6000)), httpChunk(small.String())
	const part = 9006
	bigWant, bigAfter := eventsBefore(small.String(), part-len(fmt.Sprintf("%x\r\n", small.Len()))-1024)
	// A read that fills the reader's small buffer inside the third event
	// of a chunk, and a fourth chunk with part of its data: the read for
	// the rest of the third goes on into the fourth and waits there.
	three := ev(1, 100) + ev(2, 100) + ev(3, 100)
	fourth := httpChunk(ev(4, 100))
	for _, tc := range []struct {
		name, burst, rest, want string
		after                   string // the events that complete after the pause, before the end
		whole                   bool   // arrived whole: at most two flushes before the pause
		first                   string // the event before the burst; ev(999, 0) if empty
	}{
		{"twenty events in one chunk", httpChunk(many.String()), "", many.String(), "", true, ""},
		{"one 20 KB event", httpChunk(ev(0, 20000)), "", ev(0, 20000), "", true, ""},
		{"twenty events, a chunk each", chunked.String(), "", many.String(), "", true, ""},
		{"three 2 KB events, a chunk each", large.String(), "", largeWant.String(), "", true, ""},
		{"thirty events of other sizes, a chunk each", varied.String(), "", variedWant.String(), "", true, ""},
		{"an event split over two chunks", httpChunk(ev(0, 60)) + httpChunk(split[:300]) + httpChunk(split[300:]), "", ev(0, 60) + split, "", true, ""},
		// (A chunk cut inside its data is waited for by net/http's chunked
		// reader itself, inside the read that returns the chunks before
		// it, with or without pooled reads: the network, not the
		// provider, cuts a chunk, and its rest follows at once.)
		{"five chunks and the sixth's size line cut", partial.String() + sixth[:2], sixth[2:], partialWant.String(), ev(5, 600), false, ""},
		{"a chunk at the buffer's end, a whole one, and part of a third", c0 + c1 + c2[:60], c2[60:], ev(0, pad0), ev(1, 10) + ev(2, 200), false, ""},
		{"a chunk and its size line cut", httpChunk(ev(0, 60)) + httpChunk(ev(1, 900))[:2], httpChunk(ev(1, 900))[2:], ev(0, 60), ev(1, 900), false, ""},
		{"a large first event, then a chunk in two parts", smallChunk[:part], smallChunk[part:], bigWant, bigAfter, false, big},
		{"the rest of an event read on into a cut chunk", httpChunk(three) + fourth[:20], fourth[20:], ev(1, 100) + ev(2, 100), ev(3, 100) + ev(4, 100), false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			first := tc.first
			if first == "" {
				first = ev(999, 0)
			}
			c := &releaseCounter{want: []string{first, first + tc.want}, release: make(chan int, 2)}
			served := make(chan error, 1)
			var atFirst, atBurst int
			go func() {
				conn, err := ln.Accept()
				if err != nil {
					served <- err
					return
				}
				defer conn.Close()
				req, err := http.ReadRequest(bufio.NewReader(conn))
				if err != nil {
					served <- err
					return
				}
				req.Body.Close()
				fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n%s", httpChunk(first))
				for i, next := range []string{tc.burst, tc.rest + httpChunk(stop) + "0\r\n\r\n"} {
					select {
					case n := <-c.release:
						if i == 0 {
							atFirst = n
						} else {
							atBurst = n
						}
					case <-time.After(5 * time.Second):
						served <- fmt.Errorf("stage %d: the client did not have the events sent after 5 s", i)
						io.WriteString(conn, next)
						return
					}
					io.WriteString(conn, next)
				}
				served <- nil
			}()
			resp, uc := roundTripPooled(t, context.Background(), ln.Addr().String())
			rd := sse.NewReader(resp.Body, 1<<20)
			res := stream.Relay(context.Background(), c, c.flush, rd, dialectAnthropic, nil,
				stream.RelayOptions{Idle: time.Minute, Coalesce: true, Upstream: uc}, nil)
			if err := <-served; err != nil {
				t.Fatalf("%v (flushed %d bytes in %d flushes)", err, len(c.b.String()), c.flushes)
			}
			if !res.Complete || c.b.String() != first+tc.want+tc.after+stop {
				t.Fatalf("%+v; the client got other bytes than the provider sent", res)
			}
			if tc.whole && atBurst-atFirst != 1 {
				t.Errorf("the burst took %d flushes, want 1", atBurst-atFirst)
			}
		})
	}
}

// The relay is told by the cleartext connection its reads wait on,
// whatever decodes between them (a translation, a cloud's decoder): none
// without one.
func TestDirectConnWhenCleartext(t *testing.T) {
	body := io.NopCloser(strings.NewReader(""))
	uc := &upconn.Conn{}
	a := &attempt{upConn: answerConn{c: uc}, resp: &http.Response{Body: body}}
	if a.directConn() == nil {
		t.Fatal("the transport's own body: not told")
	}
	a.resp.Body = &xlBody{body: body}
	if a.directConn() == nil {
		t.Fatal("a translated body: not told")
	}
	a.upConn.c = nil
	if a.directConn() != nil {
		t.Fatal("no cleartext connection: told")
	}
}

// Over a pooled cleartext connection the relay's wait clock starts where
// the connection says a read waits, not at every read: a provider that
// goes silent, or trickles bytes without completing an event, still meets
// the idle limit, counted from the first wait for the event; one whose
// events come within the limit never does.
func TestRelayIdleOverPooledConn(t *testing.T) {
	const idle = 300 * time.Millisecond
	ev := func(i int) string {
		return fmt.Sprintf("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"%03d\"}}\n\n", i)
	}
	const stop = "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	for _, tc := range []struct {
		name   string
		serve  func(c net.Conn) // after the first event
		reason string
	}{
		// Silent until the relay gives up and the connection closes (or
		// 30 s, the bound for a relay that never does).
		{"silent", func(c net.Conn) {
			c.SetReadDeadline(time.Now().Add(30 * time.Second))
			io.Copy(io.Discard, c)
		}, "idle_timeout"},
		// A byte every idle/5, never a whole event, for as long as the
		// connection takes them: a relay whose clock started anew at each
		// byte would still be reading when the bytes ran out, seconds
		// later, and end on the cut body, not on its idle limit.
		{"trickling", func(c net.Conn) {
			part := ev(1)
			for i := range len(part) - 1 {
				time.Sleep(idle / 5)
				if _, err := io.WriteString(c, httpChunk(part[i:i+1])); err != nil {
					return
				}
			}
		}, "idle_timeout"},
		{"events within the limit", func(w net.Conn) {
			for i := range 6 {
				time.Sleep(idle / 3)
				io.WriteString(w, httpChunk(ev(i+1)))
			}
			io.WriteString(w, httpChunk(stop)+"0\r\n\r\n")
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			served := make(chan struct{})
			go func() {
				defer close(served)
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				defer conn.Close()
				req, err := http.ReadRequest(bufio.NewReader(conn))
				if err != nil {
					return
				}
				req.Body.Close()
				fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n%s", httpChunk(ev(0)))
				tc.serve(conn)
			}()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			resp, uc := roundTripPooled(t, ctx, ln.Addr().String())
			c := &faultFlushCounter{}
			start := time.Now()
			res := stream.Relay(context.Background(), c, c.flush, sse.NewReader(resp.Body, 1<<20), dialectAnthropic, nil,
				stream.RelayOptions{Idle: idle, Coalesce: true, Upstream: uc}, cancel)
			took := time.Since(start)
			cancel()
			<-served
			if res.Reason != tc.reason {
				t.Fatalf("the stream ended %q (%v) after %v, want %q", res.Reason, res.Err, took, tc.reason)
			}
			if tc.reason == "idle_timeout" && took < idle {
				t.Errorf("the idle limit of %v ended the stream after %v", idle, took)
			}
			if !strings.HasPrefix(c.String(), ev(0)) {
				t.Errorf("the client got %q, want the first event first", c.String())
			}
		})
	}
}

// signalWaiter tells told each time a connection tells it a read waits.
type signalWaiter struct{ told chan struct{} }

func (w *signalWaiter) Waiting() {
	select {
	case w.told <- struct{}{}:
	default:
	}
}

// Once the transport takes the connection back (httptrace's PutIdleConn,
// after the body's end), the relay's Waiter is cleared, and one set from
// then on is refused: the transport's own read for the next answer, on
// its own goroutine, must not flush the last client's stream. The relay's
// first read can come after the body's end, when a translation or a
// cloud's decoder read the body to its end for the gate. While the body
// is open the Waiter is set.
func TestConnIdleClearsTheRelaysWaiter(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(peer)
			return
		}
		peer <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	uc, ok := upconn.Wrap(c).(*upconn.Conn)
	if !ok {
		t.Skip("reads are not pooled on this platform")
	}
	defer uc.Close()
	pc := <-peer
	if pc == nil {
		t.Fatal("accept failed")
	}
	defer pc.Close()

	a := &attempt{upConn: answerConn{c: uc}, resp: &http.Response{}}
	up := a.directConn()
	// The body is open: the relay's Waiter is told where a read waits.
	open := &signalWaiter{told: make(chan struct{}, 1)}
	up.BeforeWait(open)
	go func() {
		<-open.told
		pc.Write([]byte("x"))
	}()
	if _, err := uc.Read(make([]byte, 1)); err != nil {
		t.Fatal(err)
	}

	// The body ends (the transport's PutIdleConn) with the relay's Waiter
	// set; then a relay's first read sets one.
	set := &signalWaiter{told: make(chan struct{}, 1)}
	up.BeforeWait(set)
	a.connIdle(nil)
	late := &signalWaiter{told: make(chan struct{}, 1)}
	up.BeforeWait(late)
	defer up.StopWaiting(late)
	// The transport's own read for the next answer waits; its deadline
	// ends it (no byte comes).
	uc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := uc.Read(make([]byte, 1)); err == nil {
		t.Fatal("read a byte nobody sent")
	}
	for what, w := range map[string]*signalWaiter{"set before": set, "set after": late} {
		select {
		case <-w.told:
			t.Fatalf("the relay's Waiter %s the body's end was told of the transport's read", what)
		default:
		}
	}
	(&attempt{}).connIdle(nil) // no cleartext connection: nothing to clear
}
