package upconn

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// pair returns a wrapped client connection and the server's end of it,
// over loopback TCP.
func pair(t *testing.T) (*Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	srv := <-accepted
	if srv == nil {
		t.Fatal("accept failed")
	}
	w := Wrap(c)
	uc, ok := w.(*Conn)
	if !ok {
		t.Skip("reads are not pooled on this platform")
	}
	t.Cleanup(func() { uc.Close(); srv.Close() })
	return uc, srv
}

// Bytes come out as they went in, whatever the reads' sizes; a burst is
// held only until it is read, and the connection then holds no buffer.
func TestReadsWhatWasSent(t *testing.T) {
	c, srv := pair(t)
	want := make([]byte, 3*ReadSize+123)
	for i := range want {
		want[i] = byte(i * 7)
	}
	go func() {
		srv.Write(want[:100])
		time.Sleep(10 * time.Millisecond)
		srv.Write(want[100:])
	}()
	var got []byte
	sizes := []int{1, 17, 512, 4096, 9000, 3}
	for i := 0; len(got) < len(want); i++ {
		p := make([]byte, sizes[i%len(sizes)])
		n, err := c.Read(p)
		if err != nil {
			t.Fatalf("after %d bytes: %v", len(got), err)
		}
		got = append(got, p[:n]...)
		if c.buf != nil && c.r >= c.w {
			t.Fatalf("a drained buffer is held [%d:%d]", c.r, c.w)
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the bytes read differ from the bytes sent")
	}
	if c.buf != nil {
		t.Fatal("all bytes read, yet the connection holds a buffer")
	}
	if n, err := c.Read(nil); n != 0 || err != nil {
		t.Fatalf("an empty read: %d, %v", n, err)
	}
}

// The peer closing is io.EOF itself, after the bytes it sent, as from
// net.Conn.
func TestEOF(t *testing.T) {
	c, srv := pair(t)
	srv.Write([]byte("last words"))
	srv.Close()
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "last words" {
		t.Fatalf("got %q, %v", got, err)
	}
	if _, err := c.Read(make([]byte, 8)); err != io.EOF {
		t.Fatalf("after the end: %v, want io.EOF", err)
	}
}

// A read waiting for bytes ends when the connection is closed (what the
// transport does when a request is cancelled) or its deadline passes,
// with net.Conn's errors.
func TestWaitEnds(t *testing.T) {
	t.Run("close", func(t *testing.T) {
		c, _ := pair(t)
		done := make(chan error, 1)
		go func() {
			_, err := c.Read(make([]byte, 64))
			done <- err
		}()
		time.Sleep(20 * time.Millisecond)
		c.Close()
		select {
		case err := <-done:
			var oe *net.OpError
			if !errors.Is(err, net.ErrClosed) || !errors.As(err, &oe) || oe.Op != "read" {
				t.Fatalf("read after close: %v, want a read OpError wrapping net.ErrClosed", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a pending read did not end when the connection closed")
		}
	})
	t.Run("deadline", func(t *testing.T) {
		c, _ := pair(t)
		c.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
		_, err := c.Read(make([]byte, 64))
		var ne net.Error
		if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("read past the deadline: %v", err)
		}
	})
	t.Run("reset", func(t *testing.T) {
		c, srv := pair(t)
		srv.(*net.TCPConn).SetLinger(0)
		srv.Close()
		_, err := c.Read(make([]byte, 64))
		var oe *net.OpError
		if err == nil || err == io.EOF || !errors.As(err, &oe) || oe.Op != "read" {
			t.Fatalf("read after a reset: %v, want a read OpError", err)
		}
	})
}

// Only a TCP connection is wrapped.
func TestWrapOnlyTCP(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if Wrap(a) != a {
		t.Fatal("a pipe was wrapped")
	}
}

// In steady state a read allocates nothing: the buffer comes back to the
// pool once its bytes are read.
func TestReadAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop buffers")
	}
	c, srv := pair(t)
	msg := bytes.Repeat([]byte("data: x\n\n"), 100)
	p := make([]byte, 512)
	allocs := testing.AllocsPerRun(200, func() {
		srv.Write(msg)
		for got := 0; got < len(msg); {
			n, err := c.Read(p)
			if err != nil {
				t.Fatal(err)
			}
			got += n
		}
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per burst read, want 0", allocs)
	}
}

// A request body written through the connection (as net/http's transport
// writes one: ReadFrom, behind an io.LimitedReader) arrives whole and
// takes no buffer of its own.
func TestReadFromWritesThroughPool(t *testing.T) {
	c, srv := pair(t)
	body := make([]byte, 3*WriteSize+1234)
	for i := range body {
		body[i] = byte(i * 7)
	}
	got := make(chan []byte, 1)
	go func() {
		b := make([]byte, len(body))
		_, err := io.ReadFull(srv, b)
		if err != nil {
			b = nil
		}
		got <- b
	}()
	n, err := c.ReadFrom(io.LimitReader(bytes.NewReader(body), int64(len(body))))
	if err != nil || n != int64(len(body)) {
		t.Fatalf("ReadFrom = %d, %v; want %d", n, err, len(body))
	}
	if b := <-got; !bytes.Equal(b, body) {
		t.Fatal("the server read other bytes than were written")
	}
	if raceEnabled {
		return // the race detector makes sync.Pool drop buffers
	}
	drained := make(chan struct{})
	go func() { io.Copy(io.Discard, srv); close(drained) }()
	small := body[:WriteSize/2]
	var rd bytes.Reader
	var lr io.LimitedReader
	allocs := testing.AllocsPerRun(50, func() {
		rd.Reset(small)
		lr = io.LimitedReader{R: &rd, N: int64(len(small))}
		if _, err := c.ReadFrom(&lr); err != nil {
			t.Fatal(err)
		}
	})
	c.Close()
	<-drained
	if allocs != 0 {
		t.Fatalf("%.1f allocations per body written, want 0", allocs)
	}
}

// net/http's transport, with its read buffer at TransportBuffer, reads
// a chunked stream of many events, a header line longer than its buffer
// and a second response on the same connection: what a provider sends.
func TestTransportOverWrappedConn(t *testing.T) {
	long := strings.Repeat("v", 3*TransportBuffer)
	var events strings.Builder
	for i := range 300 {
		fmt.Fprintf(&events, "event: content_block_delta\ndata: {\"i\":%d}\n\n", i)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Long", long)
		w.Header().Set("Content-Type", "text/event-stream")
		for i, ev := range strings.SplitAfter(events.String(), "\n\n") {
			io.WriteString(w, ev)
			if i%7 == 0 {
				w.(http.Flusher).Flush()
			}
		}
	})}
	go srv.Serve(ln)
	defer srv.Close()
	dials := 0
	tr := &http.Transport{
		ReadBufferSize: TransportBuffer,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials++
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return Wrap(c), nil
		},
	}
	defer tr.CloseIdleConnections()
	for range 2 {
		resp, err := (&http.Client{Transport: tr}).Get("http://" + ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		var got strings.Builder
		br := bufio.NewReaderSize(resp.Body, 64)
		if _, err := io.Copy(&got, br); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.Header.Get("X-Long") != long || got.String() != events.String() {
			t.Fatalf("the response differs: header %d bytes, body %d of %d bytes", len(resp.Header.Get("X-Long")), got.Len(), events.Len())
		}
	}
	if dials != 1 {
		t.Fatalf("%d connections dialed for two requests, want 1 (kept alive)", dials)
	}
}

// waitFunc is a Waiter that calls f.
type waitFunc struct{ f func() }

func (w *waitFunc) Waiting() { w.f() }

// The Waiter set is told when a read finds the socket empty, before it
// waits, and not for a read that has bytes to return; StopWaiting clears
// only its own and waits for a Waiting in progress; Idle clears any.
func TestBeforeWait(t *testing.T) {
	c, srv := pair(t)
	var waits atomic.Int32
	waited := make(chan struct{}, 1) // the counter was told: the read waits now
	counter := &waitFunc{func() {
		waits.Add(1)
		waited <- struct{}{}
	}}
	c.BeforeWait(counter)
	srv.Write([]byte("burst"))
	waitQueued(t, c, len("burst")) // the bytes are on the socket
	p := make([]byte, 2)
	for range 3 { // one system call for the burst, then bytes held
		if _, err := c.Read(p); err != nil {
			t.Fatal(err)
		}
	}
	if n := waits.Load(); n != 0 {
		t.Fatalf("told %d times for reads that had bytes", n)
	}
	// later reads s, written once the read waits: when a Waiter is set,
	// once it was told (then the read surely waited); without one, after
	// a pause (the verdict, not told, holds whether the read waited or not).
	later := func(s string, told bool) {
		go func() {
			if told {
				<-waited
			} else {
				time.Sleep(20 * time.Millisecond)
			}
			srv.Write([]byte(s))
		}()
		if _, err := io.ReadFull(c, make([]byte, len(s))); err != nil {
			t.Fatal(err)
		}
	}
	later("later", true)
	if n := waits.Load(); n != 1 {
		t.Fatalf("told %d times for one read that waited, want 1", n)
	}
	c.StopWaiting(&waitFunc{func() {}}) // another reader's: not the one set
	later("again", true)
	if n := waits.Load(); n != 2 {
		t.Fatalf("told %d times after another's StopWaiting, want 2", n)
	}
	c.Idle()
	later("idle", false)
	if n := waits.Load(); n != 2 {
		t.Fatalf("told after Idle (%d times)", n)
	}
	// A Waiting in progress holds StopWaiting until it is done.
	running, release := make(chan struct{}), make(chan struct{})
	var finished atomic.Bool
	slow := &waitFunc{func() {
		close(running)
		<-release
		finished.Store(true)
	}}
	c.BeforeWait(slow)
	read := make(chan error, 1)
	go func() {
		_, err := io.ReadFull(c, make([]byte, 3))
		read <- err
	}()
	<-running
	cleared := make(chan struct{})
	go func() {
		c.StopWaiting(slow)
		close(cleared)
	}()
	select {
	case <-cleared:
		t.Fatal("StopWaiting returned while Waiting ran")
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	<-cleared
	if !finished.Load() {
		t.Fatal("StopWaiting returned before Waiting finished")
	}
	srv.Write([]byte("end"))
	if err := <-read; err != nil {
		t.Fatal(err)
	}
}

// A body that writes itself (BodyWriter) is handed the connection and the
// transport's limit, and what it wrote is counted off that limit.
func TestReadFromBodyWriter(t *testing.T) {
	c, srv := pair(t)
	body := bytes.Repeat([]byte("z"), 2*WriteSize)
	got := make(chan []byte, 1)
	go func() {
		b := make([]byte, WriteSize+7)
		if _, err := io.ReadFull(srv, b); err != nil {
			b = nil
		}
		got <- b
	}()
	bw := &sliceBody{b: body}
	lr := &io.LimitedReader{R: bw, N: WriteSize + 7}
	n, err := c.ReadFrom(lr)
	if err != nil || n != WriteSize+7 || lr.N != 0 || bw.max != WriteSize+7 {
		t.Fatalf("ReadFrom = %d, %v (limit left %d, WriteBody's max %d)", n, err, lr.N, bw.max)
	}
	if b := <-got; !bytes.Equal(b, body[:WriteSize+7]) {
		t.Fatal("the server read other bytes than were written")
	}
}

type sliceBody struct {
	b   []byte
	max int64
}

func (s *sliceBody) Read([]byte) (int, error) { return 0, errors.New("read: WriteBody was not used") }

func (s *sliceBody) WriteBody(w io.Writer, max int64) (int64, error) {
	s.max = max
	n, err := w.Write(s.b[:min(int64(len(s.b)), max)])
	return int64(n), err
}
