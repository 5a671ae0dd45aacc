package engine

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/stream"
	"github.com/llmhedge/caddy-llm-hedge/internal/upconn"
)

// fillingReads hands out its stream filling each read's room exactly, so
// an event is cut at the end of almost every read; after fills reads,
// the next one tells the Waiter set that it waits (as internal/upconn
// does) and calls atWait with the bytes handed out so far.
type fillingReads struct {
	data       []byte
	pos, fills int
	atWait     func(pos int)
	waited     bool
	waiterSlot
}

func (r *fillingReads) Read(p []byte) (int, error) {
	if r.fills == 0 && !r.waited {
		r.waited = true
		if r.beforeWait != nil {
			r.beforeWait.Waiting()
		}
		r.atWait(r.pos)
	}
	if r.pos == len(r.data) {
		return 0, io.EOF
	}
	n := copy(p, r.data[r.pos:])
	r.pos += n
	r.fills--
	return n, nil
}

// A translated stream over a connection that tells the relay where it
// waits: an event cut at the end of a read that filled the reader's room
// is not read on inside the relay's read while the translated events
// before it are held. At the wait, the client has had every event the
// upstream completed before it.
func TestTranslatedCutEventNotHeldAtTheWait(t *testing.T) {
	pair := anthropicFromChat(t)
	chunk := chatChunk
	var in strings.Builder
	in.WriteString(chunk(`{"role":"assistant","content":""}`, "null"))
	for i := range 60 {
		in.WriteString(chunk(fmt.Sprintf(`{"content":"%03d %s"}`, i, strings.Repeat("x", 70+i%13)), "null"))
	}
	in.WriteString(chunk(`{}`, `"stop"`) + "data: [DONE]\n\n")
	for fills := 1; fills <= 4; fills++ {
		c := &faultFlushCounter{}
		up := &fillingReads{data: []byte(in.String()), fills: fills}
		up.atWait = func(pos int) {
			sent := up.data[:pos]
			complete := sent[:bytes.LastIndex(sent, []byte("\n\n"))+2]
			want := bytes.Count(complete, []byte(`{"content":"`)) // the role chunk's "" adds no delta
			flushed := c.Bytes()[:c.flushed]
			if got := bytes.Count(flushed, []byte(`"text_delta"`)); got != want {
				t.Errorf("fills %d: at the wait the client has had %d text deltas flushed, want the %d the upstream completed", fills, got, want)
			}
		}
		x := &xlBody{rd: sse.NewReader(up, 0), s: pair.NewStream(), body: io.NopCloser(nil)}
		res := stream.Relay(context.Background(), c, c.flush, sse.NewReader(x, 1<<20), dialectAnthropic, nil,
			stream.RelayOptions{Idle: time.Minute, Coalesce: true, Upstream: up}, nil)
		if !res.Complete || !up.waited {
			t.Fatalf("fills %d: %+v, waited %v", fills, res, up.waited)
		}
		if n := strings.Count(c.String(), `"text_delta"`); n != 60 {
			t.Fatalf("fills %d: the client got %d text deltas, want 60", fills, n)
		}
	}
}

// xlBody reads on only where the relay keeps its own shortcut: not over
// a cleartext connection that tells the relay at the wait, nor for an
// HTTP/1.x chunked body.
func TestTranslationReadsOn(t *testing.T) {
	for _, tc := range []struct {
		name    string
		conn    bool
		major   int
		chunked bool
		want    bool
	}{
		{"cleartext HTTP/1.1, chunked", true, 1, true, false},
		{"cleartext HTTP/1.1, Content-Length", true, 1, false, false},
		{"TLS HTTP/1.1, chunked", false, 1, true, false},
		{"TLS HTTP/1.1, Content-Length", false, 1, false, true},
		{"HTTP/2", false, 2, false, true},
	} {
		a := &attempt{resp: &http.Response{ProtoMajor: tc.major, Body: io.NopCloser(nil)}}
		if tc.chunked {
			a.resp.TransferEncoding = []string{"chunked"}
		}
		if tc.conn {
			a.upConn.c = &upconn.Conn{}
		}
		if got := a.translationReadsOn(); got != tc.want {
			t.Errorf("%s: reads on %v, want %v", tc.name, got, tc.want)
		}
	}
}
