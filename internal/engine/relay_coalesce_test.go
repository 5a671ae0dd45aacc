package engine

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse/ssetest"
	"github.com/llmhedge/caddy-llm-hedge/internal/stream"
	"github.com/llmhedge/caddy-llm-hedge/internal/translate"
)

// splitReads hands out a stream in reads of the given sizes (cycled).
type splitReads struct {
	data  []byte
	sizes []byte
	n     int
}

func (r *splitReads) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, fmt.Errorf("upstream cut") // never reached: the stream ends in message_stop
	}
	n := 1 + int(r.sizes[r.n%len(r.sizes)])*37
	r.n++
	n = copy(p, r.data[:min(n, len(r.data))])
	r.data = r.data[n:]
	return n, nil
}

// A coalescing relay writes a burst of events from where the reader read
// them, and copies only around an event it drops: whatever the reads'
// sizes and wherever malformed events fall, the client gets exactly the
// events a relay flushing each one gets, in order, byte for byte, and
// nothing of a dropped event.
func FuzzRelayCoalescedInPlace(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3}, []byte{5})
	f.Add([]byte{9, 9, 0, 0, 9, 200, 1}, []byte{1, 2, 200})
	f.Add(bytes.Repeat([]byte{3}, 300), []byte{0, 255, 17})
	f.Add([]byte("C1"), []byte{0}) // a ping cut inside its "\r\n", then a dropped event
	f.Fuzz(func(t *testing.T, shape, sizes []byte) {
		if len(sizes) == 0 || len(shape) > 2000 {
			return
		}
		var in, want bytes.Buffer
		for i, c := range shape {
			var ev string
			switch {
			case c%7 == 0: // malformed: dropped
				ev = fmt.Sprintf("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",%d\n\n", i)
			case c%11 == 1: // stray blank lines and a comment before it: part of its Raw
				ev = "\n\n: keep-alive\nevent: ping\ndata: {\"type\":\"ping\"}\r\n\r\n"
				if i+1 < len(shape) && shape[i+1]%7 == 0 {
					// A "\r\n" cut after its '\r' gives the '\n' to the next
					// event's Raw: one dropped takes it along.
					ev = ev[:len(ev)-4] + "\n\n"
				}
			default:
				ev = fmt.Sprintf("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"%d %s\"}}\n\n", i, bytes.Repeat([]byte{'x'}, int(c)*int(c)/8))
			}
			in.WriteString(ev)
			if c%7 != 0 {
				want.WriteString(ev)
			}
		}
		const stop = "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
		in.WriteString(stop)
		want.WriteString(stop)
		for _, coalesce := range []bool{false, true} {
			c := &faultFlushCounter{}
			rd := sse.NewReader(&splitReads{data: bytes.Clone(in.Bytes()), sizes: sizes}, 1<<20)
			res := stream.Relay(context.Background(), c, c.flush, rd, dialectAnthropic, nil,
				stream.RelayOptions{Idle: time.Minute, Coalesce: coalesce, DropMalformed: true}, nil)
			if !res.Complete {
				t.Fatalf("coalesce=%v: %+v", coalesce, res)
			}
			if !bytes.Equal(c.Bytes(), want.Bytes()) {
				t.Fatalf("coalesce=%v: the client got other bytes than the events kept:\n got %q\nwant %q", coalesce, c.Bytes(), want.Bytes())
			}
			if c.flushed != c.Len() {
				t.Fatalf("coalesce=%v: %d bytes never flushed", coalesce, c.Len()-c.flushed)
			}
			sse.Put(rd)
		}
	})
}

// burstThenWait hands out its burst as fast as it is read, then, at the
// read that would wait for the upstream, calls atWait before the tail.
type burstThenWait struct {
	burst, tail []byte
	atWait      func()
	waited      bool
}

func (r *burstThenWait) Read(p []byte) (int, error) {
	if len(r.burst) > 0 {
		n := copy(p, r.burst)
		r.burst = r.burst[n:]
		return n, nil
	}
	if !r.waited {
		r.waited = true
		r.atWait()
	}
	if len(r.tail) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.tail)
	r.tail = r.tail[n:]
	return n, nil
}

// A burst longer than the reader's first read after it ran dry (an event
// cut at the end of that read) still reaches the client in one write and
// one flush, before the relay waits for the upstream again; and a read
// that ends inside an event without filling its room (the upstream sent
// part of an event) flushes what came before it first: a complete event
// never waits on the next one.
func TestRelayBurstPastTheFirstRead(t *testing.T) {
	ev := func(i int) string {
		return fmt.Sprintf("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"%03d %s\"}}\n\n", i, strings.Repeat("x", 230))
	}
	const stop = "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	var burst strings.Builder
	for i := range 8 {
		burst.WriteString(ev(i))
	}
	half := ev(9)[:len(ev(9))/2]
	var long strings.Builder // longer than the reader's 4 KiB buffer
	for i := range 24 {
		long.WriteString(ev(100 + i))
	}
	blank := ev(8) + strings.Repeat("\n", 512-len(ev(8))) // fills the first read: an event, then blank lines
	for _, tc := range []struct {
		name, burst, tail, wantAtWait string
	}{
		{"a burst of 8 events", burst.String(), stop, burst.String()},
		{"a burst of 24 events", long.String(), stop, long.String()},
		{"an event, then part of one", ev(8) + half, ev(9)[len(half):] + stop, ev(8)},
		{"an event, then blank lines to the end of the read", blank, stop, ev(8)},
	} {
		c := &faultFlushCounter{}
		up := &burstThenWait{burst: []byte(tc.burst), tail: []byte(tc.tail)}
		up.atWait = func() {
			if c.flushes != 1 || c.String() != tc.wantAtWait || c.flushed != c.Len() {
				t.Errorf("%s: when the relay waits for the upstream, the client has had %d flushes of %d bytes (%d flushed), want 1 of %d",
					tc.name, c.flushes, c.Len(), c.flushed, len(tc.wantAtWait))
			}
		}
		rd := sse.NewReader(up, 1<<20)
		res := stream.Relay(context.Background(), c, c.flush, rd, dialectAnthropic, nil, stream.RelayOptions{Idle: time.Minute, Coalesce: true}, nil)
		if !res.Complete || !up.waited || c.String() != tc.burst+tc.tail {
			t.Fatalf("%s: %+v; the client got other bytes than the upstream sent", tc.name, res)
		}
		if c.writes != 2 || c.flushes != 2 {
			t.Errorf("%s: %d writes and %d flushes, want 2 of each (the burst, then the rest)", tc.name, c.writes, c.flushes)
		}
	}
}

// The same for a translated stream: an OpenAI burst cut by the reader's
// first read is translated whole before the relay sees it, and reaches
// the Anthropic client in one write and one flush.
func TestTranslatedBurstPastTheFirstRead(t *testing.T) {
	pair := anthropicFromChat(t)
	chunk := chatChunk
	burst := chunk(`{"role":"assistant","content":""}`, "null")
	for i := range 7 {
		burst += chunk(fmt.Sprintf(`{"content":"%03d %s"}`, i, strings.Repeat("x", 230)), "null")
	}
	tail := chunk(`{}`, `"stop"`) + "data: [DONE]\n\n"
	c := &faultFlushCounter{}
	up := &burstThenWait{burst: []byte(burst), tail: []byte(tail)}
	var atWait string
	up.atWait = func() {
		if c.flushes != 1 || c.flushed != c.Len() {
			t.Errorf("when the relay waits for the upstream, the client has had %d flushes (%d of %d bytes flushed), want 1 of all", c.flushes, c.flushed, c.Len())
		}
		atWait = c.String()
	}
	x := &xlBody{rd: sse.NewReader(up, 0), s: pair.NewStream(), body: io.NopCloser(nil), readOn: true} // no Waiter: the relay keeps its shortcut, and so does the translation
	res := stream.Relay(context.Background(), c, c.flush, sse.NewReader(x, 1<<20), dialectAnthropic, nil, stream.RelayOptions{Idle: time.Minute, Coalesce: true}, nil)
	if !res.Complete || !up.waited {
		t.Fatalf("%+v", res)
	}
	if n := strings.Count(atWait, "text_delta"); n != 7 {
		t.Errorf("the burst's first flush carried %d text deltas, want 7:\n%s", n, atWait)
	}
	if !strings.HasSuffix(c.String(), "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n") || c.flushes != 2 {
		t.Errorf("%d flushes; the stream ends:\n%s", c.flushes, c.String()[max(0, c.Len()-300):])
	}
}

// A backlog of a translated stream (a slow client) is handed to the relay
// in parts, each bounded, not translated whole in one Read.
func TestTranslatedBacklogInParts(t *testing.T) {
	pair, _ := translate.For(translate.Anthropic, translate.OpenAI)
	var backlog strings.Builder
	backlog.WriteString(`data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n")
	for i := range 2000 {
		fmt.Fprintf(&backlog, `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"%04d %s"},"finish_reason":null}]}`+"\n\n", i, strings.Repeat("y", 90))
	}
	x := &xlBody{rd: sse.NewReader(strings.NewReader(backlog.String()), 0), s: pair.NewStream(), body: io.NopCloser(nil)}
	p := make([]byte, 1<<20)
	n, err := x.Read(p)
	if err != nil || n == 0 {
		t.Fatalf("read %d bytes: %v", n, err)
	}
	if n > stream.CoalesceMax+4<<10 {
		t.Fatalf("one Read of a %d-byte backlog translated %d bytes, want at most about %d", backlog.Len(), n, stream.CoalesceMax)
	}
}

// eventPerRead hands out its burst one event per read, as net/http's
// chunked reader does over a small transport buffer; then the read that
// would wait tells the Waiter set, as the connection does
// (internal/upconn), and calls atWait before the tail.
type eventPerRead struct {
	burst  []string
	tail   string
	atWait func()
	waited bool
	waiterSlot
}

// anthropicFromChat is the translation of an Anthropic client's stream
// from a Chat Completions provider's.
func anthropicFromChat(t *testing.T) translate.Pair {
	t.Helper()
	pair, ok := translate.For(translate.Anthropic, translate.OpenAI)
	if !ok {
		t.Fatal("no anthropic → openai translation")
	}
	return pair
}

// chatChunk is one Chat Completions stream chunk of choice 0.
func chatChunk(delta, finish string) string {
	return fmt.Sprintf("data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1733000000,\"model\":\"gpt-5\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]}\n\n", delta, finish)
}

// waiterSlot makes a test upstream a stream.Upstream: it keeps the Waiter
// the relay sets, for the upstream's read that waits to tell.
type waiterSlot struct{ beforeWait stream.Waiter }

func (s *waiterSlot) BeforeWait(w stream.Waiter) { s.beforeWait = w }

func (s *waiterSlot) StopWaiting(w stream.Waiter) {
	if s.beforeWait == w {
		s.beforeWait = nil
	}
}

func (r *eventPerRead) Read(p []byte) (int, error) {
	if len(r.burst) > 0 {
		n := copy(p, r.burst[0])
		if r.burst[0] = r.burst[0][n:]; r.burst[0] == "" {
			r.burst = r.burst[1:]
		}
		return n, nil
	}
	if !r.waited {
		r.waited = true
		if r.beforeWait != nil {
			r.beforeWait.Waiting()
		}
		r.atWait()
	}
	n := copy(p, r.tail)
	if r.tail = r.tail[n:]; n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// A burst the upstream connection delivers one event per read is still
// one write and one flush when the connection tells the relay that a read
// is about to wait (RelayOptions.Upstream, internal/upconn): the relay
// reads on, and flushes there. Without it, every read is flushed.
func TestRelayBurstWhileUpstreamReady(t *testing.T) {
	var burst []string
	for i := range 12 {
		burst = append(burst, fmt.Sprintf("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"%03d\"}}\n\n", i))
	}
	const stop = "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	for _, told := range []bool{true, false} {
		c := &faultFlushCounter{}
		up := &eventPerRead{burst: slices.Clone(burst), tail: stop}
		flushesAtWait := -1
		up.atWait = func() {
			flushesAtWait = c.flushes
			if c.String() != strings.Join(burst, "") || c.flushed != c.Len() {
				t.Errorf("told=%v: when the relay waits for the upstream, %d of the burst's bytes are flushed, want all %d", told, c.flushed, len(strings.Join(burst, "")))
			}
		}
		opts := stream.RelayOptions{Idle: time.Minute, Coalesce: true}
		if told {
			opts.Upstream = up
		}
		rd := sse.NewReader(up, 1<<20)
		res := stream.Relay(context.Background(), c, c.flush, rd, dialectAnthropic, nil, opts, nil)
		if !res.Complete || c.String() != strings.Join(burst, "")+stop {
			t.Fatalf("told=%v: %+v; the client got other bytes than the upstream sent", told, res)
		}
		switch {
		case told && (flushesAtWait != 1 || c.writes != 2 || c.flushes != 2):
			t.Errorf("told: %d flushes before the wait, %d writes and %d flushes in all, want 1, then 2 of each", flushesAtWait, c.writes, c.flushes)
		case !told && flushesAtWait != len(burst):
			t.Errorf("not told: %d flushes before the wait, want one per read (%d)", flushesAtWait, len(burst))
		}
	}
}

// With EndUnflushed the terminal event is written, after the burst's
// flush at the wait, but not flushed: the caller's flush, or the
// server's when the handler returns, carries it with the end of the
// response, in one write to the client instead of two.
func TestRelayEndUnflushed(t *testing.T) {
	var burst []string
	for i := range 3 {
		burst = append(burst, fmt.Sprintf("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"%03d\"}}\n\n", i))
	}
	const stop = "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	all := strings.Join(burst, "")
	c := &faultFlushCounter{}
	up := &eventPerRead{burst: slices.Clone(burst), tail: stop, atWait: func() {}}
	opts := stream.RelayOptions{Idle: time.Minute, Coalesce: true, EndUnflushed: true, Upstream: up}
	res := stream.Relay(context.Background(), c, c.flush, sse.NewReader(up, 1<<20), dialectAnthropic, nil, opts, nil)
	if !res.Complete || c.String() != all+stop {
		t.Fatalf("%+v; the client got other bytes than the upstream sent:\n%s", res, c.String())
	}
	if c.flushes != 1 || c.flushed != len(all) || c.writes != 2 {
		t.Errorf("%d writes, %d flushes of %d bytes, want 2 writes and 1 flush of the burst's %d (the terminal event written, left to the caller)", c.writes, c.flushes, c.flushed, len(all))
	}
}

// armCounter is a connection that counts the Waiters set on it; they
// go to its waiterSlot (the test upstream's, which tells them when it waits).
type armCounter struct {
	*waiterSlot
	armed int
}

func (a *armCounter) BeforeWait(w stream.Waiter) { a.armed++; a.waiterSlot.BeforeWait(w) }

// The relay sets its Waiter on the connection at its first read of the
// body, not before: a body the gate already read to its end is never read
// again, and its connection may by then wait for another request's
// answer, whose waits the relay must not be told of. A body still open is
// armed once, not once per read.
func TestRelayArmsAtItsFirstRead(t *testing.T) {
	var burst []string
	for i := range 4 {
		burst = append(burst, fmt.Sprintf("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"%03d\"}}\n\n", i))
	}
	const stop = "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	// The whole body, its end included, was read before the relay (in
	// one read: under the reader's first 512 bytes).
	rd := sse.NewReader(iotest.DataErrReader(strings.NewReader(strings.Join(burst[:2], "")+stop)), 1<<20)
	if _, err := rd.Next(); err != nil { // the gate's event
		t.Fatal(err)
	}
	up := &armCounter{waiterSlot: &waiterSlot{}}
	c := &faultFlushCounter{}
	res := stream.Relay(context.Background(), c, c.flush, rd, dialectAnthropic, nil,
		stream.RelayOptions{Idle: time.Minute, Coalesce: true, Upstream: up}, nil)
	if !res.Complete || up.armed != 0 {
		t.Fatalf("%+v; a body already ended: the Waiter was set %d times, want none", res, up.armed)
	}
	// An open body, one event per read: one Waiter for the relay.
	ep := &eventPerRead{burst: slices.Clone(burst), tail: stop, atWait: func() {}}
	up = &armCounter{waiterSlot: &ep.waiterSlot}
	res = stream.Relay(context.Background(), c, c.flush, sse.NewReader(ep, 1<<20), dialectAnthropic, nil,
		stream.RelayOptions{Idle: time.Minute, Coalesce: true, Upstream: up}, nil)
	if !res.Complete || up.armed != 1 {
		t.Fatalf("%+v; an open body read %d times: the Waiter was set %d times, want once", res, len(burst)+1, up.armed)
	}
}

// A Gemini answer ends with its body, not with an event: with
// EndUnflushed the burst that reached the body's end (the finishReason
// chunk) is written but not flushed, to go with the response's end in
// one write; a burst flushed at a wait before it is unchanged. Without
// EndUnflushed the last burst is flushed by the relay.
func TestRelayEndUnflushedGemini(t *testing.T) {
	burst := []string{"data: " + gThought + "\r\n\r\n", "data: " + gText1 + "\r\n\r\n"}
	last := "data: " + gText2 + "\r\n\r\n" // finishReason STOP, then the body ends
	all := strings.Join(burst, "")
	for _, endUnflushed := range []bool{true, false} {
		c := &faultFlushCounter{}
		up := &eventPerRead{burst: slices.Clone(burst), tail: last, atWait: func() {}}
		opts := stream.RelayOptions{Idle: time.Minute, Coalesce: true, EndUnflushed: endUnflushed, Upstream: up}
		res := stream.Relay(context.Background(), c, c.flush, sse.NewReader(up, 1<<20), dialectGemini, nil, opts, nil)
		if !res.Complete || c.String() != all+last || res.Events != 3 {
			t.Fatalf("end unflushed %v: %+v; the client got other bytes than the upstream sent:\n%s", endUnflushed, res, c.String())
		}
		wantFlushed := map[bool]int{true: len(all), false: len(all + last)}[endUnflushed]
		if c.writes != 2 || c.flushed != wantFlushed || c.flushes != map[bool]int{true: 1, false: 2}[endUnflushed] {
			t.Errorf("end unflushed %v: %d writes, %d flushes of %d bytes, want 2 writes and %d bytes flushed", endUnflushed, c.writes, c.flushes, c.flushed, wantFlushed)
		}
	}
}

// A read that ended inside an event because it filled the reader's room
// is followed by one that takes the event's rest, and the relay keeps the
// burst for one write after it; but an HTTP/1.x chunked body's reader
// goes on into the next chunk whose size line it holds and waits for its
// data (RelayOptions.ReadsAhead): there, without the connection's word,
// the burst so far is flushed before that read.
func TestRelayReadsAheadFlushesFirst(t *testing.T) {
	ev := func(i int) string {
		return fmt.Sprintf("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"%03d %s\"}}\n\n", i, strings.Repeat("x", 100))
	}
	const stop = "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	two := ev(1) + ev(2)
	burst := two + ev(3)[:512-len(two)] // fills the reader's first read, inside the third event
	for _, readsAhead := range []bool{true, false} {
		c := &faultFlushCounter{}
		up := &burstThenWait{burst: []byte(burst), tail: []byte(ev(3)[512-len(two):] + stop)}
		atWait := "unset"
		up.atWait = func() { atWait = c.String()[:c.flushed] }
		rd := sse.NewReader(up, 1<<20)
		res := stream.Relay(context.Background(), c, c.flush, rd, dialectAnthropic, nil,
			stream.RelayOptions{Idle: time.Minute, Coalesce: true, ReadsAhead: readsAhead}, nil)
		if !res.Complete || c.String() != two+ev(3)+stop {
			t.Fatalf("reads ahead %v: %+v; the client got other bytes than the upstream sent", readsAhead, res)
		}
		if want := map[bool]string{true: two, false: ""}[readsAhead]; atWait != want {
			t.Errorf("reads ahead %v: flushed when the relay read the rest: %d bytes, want %d", readsAhead, len(atWait), len(want))
		}
	}
}

// A read that ends between the terminal event's last CR and its LF (CRLF
// lines, as Gemini frames its events) leaves the LF to an event that never
// comes: the relay writes it, so a client that splits at "\r\n\r\n" gets
// the last event whole, coalescing or not.
func TestRelayTerminalCRLFCutBeforeLF(t *testing.T) {
	in := "event: content_block_delta\r\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\r\n\r\n" +
		"event: message_stop\r\ndata: {\"type\":\"message_stop\"}\r\n\r\n"
	for _, coalesce := range []bool{true, false} {
		c := &faultFlushCounter{}
		up := &ssetest.SplitReader{Data: []byte(in), Cuts: []int{len(in) - 1}}
		res := stream.Relay(context.Background(), c, c.flush, sse.NewReader(up, 1<<20), dialectAnthropic, nil,
			stream.RelayOptions{Idle: time.Minute, Coalesce: coalesce}, nil)
		if !res.Complete || c.String() != in || c.flushed != len(in) || res.Bytes != int64(len(in)) {
			t.Fatalf("coalesce %v: %+v; the client got %q (%d flushed)", coalesce, res, c.String(), c.flushed)
		}
	}
	// CR-only lines end in "\r\r": nothing was cut, nothing is added.
	cr := strings.ReplaceAll(in, "\r\n", "\r")
	c := &faultFlushCounter{}
	res := stream.Relay(context.Background(), c, c.flush, sse.NewReader(strings.NewReader(cr), 1<<20), dialectAnthropic, nil,
		stream.RelayOptions{Idle: time.Minute, Coalesce: true}, nil)
	if !res.Complete || c.String() != cr {
		t.Fatalf("CR-only lines: %+v; the client got %q", res, c.String())
	}
}
