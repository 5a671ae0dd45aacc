package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/llmhedge/caddy-llm-hedge/internal/sse/ssetest"
)

// wantEvent is an expected event; nil Name/Data mean absent.
type wantEvent struct {
	Raw, Name, Data  string
	HasName, HasData bool
}

func wantEv(raw string) wantEvent { return wantEvent{Raw: raw} }

func (w wantEvent) name(n string) wantEvent { w.Name, w.HasName = n, true; return w }
func (w wantEvent) data(d string) wantEvent { w.Data, w.HasData = d, true; return w }

// readAll collects every event of r (copying, since events alias the
// reader's buffer) and the error that ended the stream.
func readEvents(rd *Reader) ([]wantEvent, error) {
	var out []wantEvent
	for {
		e, err := rd.Next()
		if err != nil {
			return out, err
		}
		out = append(out, wantEvent{
			Raw: string(e.Raw), Name: string(e.Name), Data: string(e.Data),
			HasName: e.Name != nil, HasData: e.Data != nil,
		})
	}
}

func TestSSEReader(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		maxEvent int
		want     []wantEvent
		err      error
	}{
		{
			name: "anthropic events",
			in:   "event: message_start\ndata: {\"type\":\"message_start\"}\n\nevent: ping\ndata: {\"type\": \"ping\"}\n\n",
			want: []wantEvent{
				wantEv("event: message_start\ndata: {\"type\":\"message_start\"}\n\n").name("message_start").data(`{"type":"message_start"}`),
				wantEv("event: ping\ndata: {\"type\": \"ping\"}\n\n").name("ping").data(`{"type": "ping"}`),
			},
			err: io.EOF,
		},
		{
			name: "CRLF",
			in:   "event: a\r\ndata: 1\r\n\r\ndata: 2\r\n\r\n",
			want: []wantEvent{
				wantEv("event: a\r\ndata: 1\r\n\r\n").name("a").data("1"),
				wantEv("data: 2\r\n\r\n").data("2"),
			},
			err: io.EOF,
		},
		{
			name: "CR only",
			in:   "event: a\rdata: 1\r\rdata: 2\r\r",
			want: []wantEvent{
				wantEv("event: a\rdata: 1\r\r").name("a").data("1"),
				wantEv("data: 2\r\r").data("2"),
			},
			err: io.EOF,
		},
		{
			name: "mixed line ends",
			in:   "data: a\r\ndata: b\rdata: c\n\r\n",
			want: []wantEvent{wantEv("data: a\r\ndata: b\rdata: c\n\r\n").data("a\nb\nc")},
			err:  io.EOF,
		},
		{
			name: "multi-line data",
			in:   "data: first\ndata: second\ndata:\ndata: fourth\n\n",
			want: []wantEvent{wantEv("data: first\ndata: second\ndata:\ndata: fourth\n\n").data("first\nsecond\n\nfourth")},
			err:  io.EOF,
		},
		{
			name: "comment only event",
			in:   ": keepalive\n\ndata: x\n\n",
			want: []wantEvent{
				wantEv(": keepalive\n\n"),
				wantEv("data: x\n\n").data("x"),
			},
			err: io.EOF,
		},
		{
			name: "comment inside event",
			in:   "event: e\n: note\ndata: x\n\n",
			want: []wantEvent{wantEv("event: e\n: note\ndata: x\n\n").name("e").data("x")},
			err:  io.EOF,
		},
		{
			name: "data without space strips nothing",
			in:   "data:x\n\ndata:  two spaces\n\n",
			want: []wantEvent{
				wantEv("data:x\n\n").data("x"),
				wantEv("data:  two spaces\n\n").data(" two spaces"),
			},
			err: io.EOF,
		},
		{
			name: "empty data",
			in:   "data:\n\ndata\n\n",
			want: []wantEvent{wantEv("data:\n\n").data(""), wantEv("data\n\n").data("")},
			err:  io.EOF,
		},
		{
			name: "empty event name",
			in:   "event:\ndata: x\n\n",
			want: []wantEvent{wantEv("event:\ndata: x\n\n").name("").data("x")},
			err:  io.EOF,
		},
		{
			name: "last event name wins, unknown fields ignored",
			in:   "event: a\nid: 7\nretry: 100\nevent: b\nfoo\ndata: x\n\n",
			want: []wantEvent{wantEv("event: a\nid: 7\nretry: 100\nevent: b\nfoo\ndata: x\n\n").name("b").data("x")},
			err:  io.EOF,
		},
		{
			name: "field without colon",
			in:   "event\ndata\n\n",
			want: []wantEvent{wantEv("event\ndata\n\n").name("").data("")},
			err:  io.EOF,
		},
		{
			name: "field names are case-sensitive",
			in:   "Data: x\nEVENT: y\n\n",
			want: []wantEvent{wantEv("Data: x\nEVENT: y\n\n")},
			err:  io.EOF,
		},
		{
			name: "value keeps later colons",
			in:   "data: a: b\n\n",
			want: []wantEvent{wantEv("data: a: b\n\n").data("a: b")},
			err:  io.EOF,
		},
		{
			name: "stray blank lines join the next event",
			in:   "\n\r\n\ndata: x\n\n\n\n",
			want: []wantEvent{wantEv("\n\r\n\ndata: x\n\n").data("x")},
			err:  io.EOF,
		},
		{
			name: "trailing whitespace is a clean end",
			in:   "data: x\n\n \t\r\n",
			want: []wantEvent{wantEv("data: x\n\n").data("x")},
			err:  io.EOF,
		},
		{
			name: "empty stream",
			in:   "",
			err:  io.EOF,
		},
		{
			name: "final event without blank line",
			in:   "data: x\n\ndata: [DONE]\n",
			want: []wantEvent{wantEv("data: x\n\n").data("x")},
			err:  io.ErrUnexpectedEOF,
		},
		{
			name: "cut mid-line",
			in:   "data: x\n\nevent: content_block_delta\ndata: {\"ty",
			want: []wantEvent{wantEv("data: x\n\n").data("x")},
			err:  io.ErrUnexpectedEOF,
		},
		{
			name:     "too large",
			in:       "data: small\n\ndata: " + strings.Repeat("x", 100) + "\n\ndata: after\n\n",
			maxEvent: 64,
			want:     []wantEvent{wantEv("data: small\n\n").data("small")},
			err:      ErrEventTooLarge,
		},
		{
			name:     "too large without an end",
			in:       "data: " + strings.Repeat("x", 100),
			maxEvent: 64,
			err:      ErrEventTooLarge,
		},
		{
			name:     "exactly max",
			in:       "data: 12345\n\n",
			maxEvent: len("data: 12345\n\n"),
			want:     []wantEvent{wantEv("data: 12345\n\n").data("12345")},
			err:      io.EOF,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			maxEvent := tt.maxEvent
			if maxEvent == 0 {
				maxEvent = 1 << 20
			}
			readers := map[string]func() io.Reader{
				"whole":    func() io.Reader { return strings.NewReader(tt.in) },
				"one byte": func() io.Reader { return iotest.OneByteReader(strings.NewReader(tt.in)) },
			}
			for rname, mk := range readers {
				got, err := readEvents(NewReader(mk(), maxEvent))
				if !errors.Is(err, tt.err) {
					t.Errorf("%s: error = %v, want %v", rname, err, tt.err)
				}
				if rname == "whole" || !strings.Contains(tt.in, "\r") {
					assertEvents(t, rname, got, tt.want)
				} else {
					assertSameStream(t, rname, got, tt.want)
				}
			}
		})
	}
}

func assertEvents(t *testing.T, label string, got, want []wantEvent) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d events %+v, want %d %+v", label, len(got), got, len(want), want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("%s: event %d = %+v, want %+v", label, i, got[i], want[i])
		}
	}
}

// assertSameStream compares events where a "\r\n" may be split across
// reads: when the '\r' of an event's final blank line ends a read, the
// reader does not wait for the '\n', which then opens the next event's
// Raw. Names and data are identical and the Raws still concatenate to
// the same bytes.
func assertSameStream(t *testing.T, label string, got, want []wantEvent) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d events %+v, want %d %+v", label, len(got), got, len(want), want)
	}
	var gotRaw, wantRaw strings.Builder
	for i := range got {
		g, w := got[i], want[i]
		gotRaw.WriteString(g.Raw)
		wantRaw.WriteString(w.Raw)
		g.Raw, w.Raw = "", ""
		if g != w {
			t.Errorf("%s: event %d = %+v, want %+v", label, i, got[i], want[i])
		}
	}
	if g, w := gotRaw.String(), wantRaw.String(); !strings.HasPrefix(w, g) || len(w)-len(g) > 1 {
		t.Errorf("%s: raw stream %q, want %q", label, g, w)
	}
}

// A realistic stream mixing every line ending, split at every offset and
// read one byte at a time, gives the same events.
func TestSSEReaderSplitAnywhere(t *testing.T) {
	stream := "event: message_start\r\n" +
		"data: {\"type\":\"message_start\",\"message\":{\"model\":\"m\"}}\r\n\r\n" +
		": keepalive\n\n" +
		"event: ping\rdata: {\"type\":\"ping\"}\r\r" +
		"event: content_block_delta\n" +
		"data: {\"type\":\"content_block_delta\",\n" +
		"data: \"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n" +
		"\n" +
		"data:[DONE]\n\n"
	want, wantErr := readEvents(NewReader(strings.NewReader(stream), 1<<20))
	if wantErr != io.EOF || len(want) != 5 {
		t.Fatalf("baseline: %d events, %v", len(want), wantErr)
	}
	for _, lf := range []bool{false, true} {
		s := stream
		if lf { // without '\r' the Raws must match exactly at every split
			s = strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(stream)
		}
		base, _ := readEvents(NewReader(strings.NewReader(s), 1<<20))
		for cut := 0; cut <= len(s); cut++ {
			got, err := readEvents(NewReader(&ssetest.SplitReader{Data: []byte(s), Cuts: []int{cut}}, 1<<20))
			if err != io.EOF {
				t.Fatalf("cut %d: %v", cut, err)
			}
			label := fmt.Sprintf("cut %d (lf only %v)", cut, lf)
			if lf {
				assertEvents(t, label, got, base)
			} else {
				assertSameStream(t, label, got, base)
			}
		}
		got, err := readEvents(NewReader(iotest.OneByteReader(strings.NewReader(s)), 1<<20))
		if err != io.EOF {
			t.Fatalf("one byte: %v", err)
		}
		if lf {
			assertEvents(t, "one byte", got, base)
		} else {
			assertSameStream(t, "one byte", got, base)
		}
	}
}

func TestSSEReaderReadError(t *testing.T) {
	boom := errors.New("connection reset")
	rd := NewReader(io.MultiReader(strings.NewReader("data: a\n\ndata: b"), iotest.ErrReader(boom)), 1<<20)
	got, err := readEvents(rd)
	if len(got) != 1 || got[0].Data != "a" {
		t.Errorf("events before the error = %+v", got)
	}
	if !errors.Is(err, boom) || err == boom {
		t.Errorf("error = %v, want it wrapping %v", err, boom)
	}
	if _, again := rd.Next(); !errors.Is(again, boom) {
		t.Errorf("second Next = %v, want the same error", again)
	}
}

func TestSSEReaderReset(t *testing.T) {
	rd := NewReader(strings.NewReader("data: a\n\ndata: cut"), 1<<20)
	if _, err := readEvents(rd); err != io.ErrUnexpectedEOF {
		t.Fatalf("first stream: %v", err)
	}
	rd.Reset(strings.NewReader("event: x\ndata: b\ndata: c\n\n"))
	got, err := readEvents(rd)
	assertEvents(t, "after reset", got, []wantEvent{wantEv("event: x\ndata: b\ndata: c\n\n").name("x").data("b\nc")})
	if err != io.EOF {
		t.Errorf("after reset: %v", err)
	}
}

// A long line arriving in small reads is searched once, and events larger
// than the initial buffer are read whole.
func TestSSEReaderLargeEvent(t *testing.T) {
	big := strings.Repeat("y", 3*sseInitialBuffer)
	in := "data: " + big + "\n\ndata: z\n\n"
	r := &ssetest.SplitReader{Data: []byte(in)}
	for c := 100; c < len(in); c += 100 {
		r.Cuts = append(r.Cuts, c)
	}
	got, err := readEvents(NewReader(r, 1<<20))
	if err != io.EOF || len(got) != 2 || got[0].Data != big || got[1].Data != "z" {
		t.Fatalf("got %d events, %v", len(got), err)
	}
}

// refSplit is a deliberately naive SSE splitter over the whole input: the
// reference the incremental reader must agree with.
func refSplit(in []byte, maxEvent int) ([]wantEvent, error) {
	var out []wantEvent
	start, pos := 0, 0
	var cur wantEvent
	var data []string
	fields := false
	for {
		e := pos
		for e < len(in) && in[e] != '\n' && in[e] != '\r' {
			e++
		}
		if e == len(in) {
			break
		}
		next := e + 1
		if in[e] == '\r' && next < len(in) && in[next] == '\n' {
			next++
		}
		line := string(in[pos:e])
		pos = next
		if line == "" {
			if !fields {
				continue
			}
			if next-start > maxEvent {
				return out, ErrEventTooLarge
			}
			cur.Raw = string(in[start:next])
			if data != nil {
				cur.Data, cur.HasData = strings.Join(data, "\n"), true
			}
			out = append(out, cur)
			start, cur, data, fields = next, wantEvent{}, nil, false
			continue
		}
		fields = true
		if line[0] == ':' {
			continue
		}
		field, value, found := strings.Cut(line, ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		switch field {
		case "data":
			data = append(data, value)
		case "event":
			cur.Name, cur.HasName = value, true
		}
	}
	rest := in[start:]
	if len(rest) > maxEvent {
		return out, ErrEventTooLarge
	}
	if len(bytes.Trim(rest, " \t\r\n")) == 0 {
		return out, io.EOF
	}
	return out, io.ErrUnexpectedEOF
}

func FuzzSSEReader(f *testing.F) {
	f.Add([]byte("event: message_start\ndata: {\"type\":\"message_start\"}\n\n"), uint8(0), uint16(1000))
	f.Add([]byte("data: a\r\ndata: b\r\n\r\n: c\r\rdata\n\n"), uint8(1), uint16(10))
	f.Add([]byte("\r\n\r\nevent: x\rdata: y\r\r\n"), uint8(2), uint16(8))
	f.Add([]byte("data: [DONE]\n"), uint8(3), uint16(100))
	// The whole-event shape (whole.go) and what breaks it.
	f.Add([]byte("event: a\ndata: b\n\ndata: c\r\n\r\nevent: d\r\ndata: e\n\r\n"), uint8(4), uint16(100))
	f.Add([]byte("data: a\rb\n\nevent: x\ry\ndata: z\n\ndata: q\r\n\r"), uint8(5), uint16(100))
	f.Add([]byte("event: x\ndata: y\n\rdata: z\n\nevent:x\ndata:y\n\n"), uint8(6), uint16(100))
	f.Fuzz(func(t *testing.T, in []byte, chunk uint8, maxEv uint16) {
		// Exact: the whole input in one read (it fits the initial buffer).
		if len(in) < sseInitialBuffer {
			maxEvent := int(maxEv) + 1
			want, wantErr := refSplit(in, maxEvent)
			got, err := readEvents(NewReader(bytes.NewReader(in), maxEvent))
			if err != wantErr {
				t.Fatalf("error = %v, want %v", err, wantErr)
			}
			assertEvents(t, "whole", got, want)
		}
		// Chunked: the same events whatever the read boundaries.
		size := int(chunk)%17 + 1
		r := &ssetest.SplitReader{Data: in}
		for c := size; c < len(in); c += size {
			r.Cuts = append(r.Cuts, c)
		}
		want, wantErr := refSplit(in, len(in)+1)
		got, err := readEvents(NewReader(r, len(in)+1))
		if err != wantErr {
			t.Fatalf("chunked %d: error = %v, want %v", size, err, wantErr)
		}
		assertSameStream(t, fmt.Sprintf("chunked %d", size), got, want)
	})
}

func BenchmarkSSEReader(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(ssetest.AnthropicDelta)))
	rd := NewReader(&ssetest.RepeatReader{Event: []byte(ssetest.AnthropicDelta), N: b.N}, 1<<20)
	b.ResetTimer()
	for range b.N {
		if _, err := rd.Next(); err != nil {
			b.Fatal(err)
		}
	}
}
