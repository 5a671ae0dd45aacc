package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/stream"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// FuzzParseCompletion feeds arbitrary bodies and model names to the request
// body scan and the model rewrite: they never panic; a body accepted is
// valid JSON whose model and stream are what encoding/json reads into a
// struct (keys matched case-insensitively, as a Go provider reads them); a
// body refused is invalid, has no model, is ambiguous or names a bad model;
// the rewritten body is valid JSON whose model is the new name and whose
// every other top-level member is unchanged byte for byte.
func FuzzParseCompletion(f *testing.F) {
	for _, s := range []string{
		`{"model":"claude-sonnet-4-5","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hello"}]}`,
		`{"messages":[{"role":"user","content":"say \"model\": \"x\""}],"model":"gpt-4o"}`,
		` { "model" : "a\u00e9\"b" , "stream" : false } `,
		`{"model":"a","model":"b"}`,
		`{"model":"a","model":1}`,
		`{"mod\u0065l":"escaped-key","stream":true}`,
		`{"model":"","x":1}`,
		`{"model":null}`,
		`{"metadata":{"model":"inner"},"model":"outer"}`,
		`{"model":"x",}`,
		`{"model":"x"} trailing`,
		`["model","x"]`,
		`{"model":"\ud83d\ude00","a":[1,2,{"b":"}"}],"c":"\\"}`,
		"{\"model\":\"x\"\n,\"t\":\"\t\"}",
	} {
		f.Add([]byte(s), "claude-haiku-4-5")
	}
	f.Add([]byte(`{"model":"x","stream":true}`), "we\"ird\\model\x00\u2028<>&")
	f.Fuzz(func(t *testing.T, body []byte, newModel string) {
		req, err := wire.ParseCompletion(dialectAnthropic, "", "", body)
		var top map[string]json.RawMessage
		var ref refBody // keys matched as encoding/json matches them to fields
		var want string
		jsonErr := json.Unmarshal(body, &top)
		if jsonErr == nil {
			// A field of another type (a "stream" that is not a boolean) is
			// a type error; encoding/json still reads the other fields.
			var te *json.UnmarshalTypeError
			if err := json.Unmarshal(body, &ref); err != nil && !errors.As(err, &te) {
				jsonErr = err
			}
			want = ref.Model
		}
		keys, _ := refTopKeys(body)
		if err != nil {
			// An ambiguous body or a bad model name is refused (SPEC 15).
			refusable := refCount(keys, "model") > 1 || refCount(keys, "stream") > 1 ||
				len(want) > wire.MaxModelLen || strings.ContainsRune(want, utf8.RuneError) || strings.IndexFunc(want, unicode.IsControl) >= 0
			if jsonErr == nil && want != "" && !refusable {
				t.Fatalf("rejected a body with model %q: %v", want, err)
			}
			return
		}
		if jsonErr != nil || want == "" {
			t.Fatalf("accepted model %q, encoding/json reads %s (%v)", req.Model, top["model"], jsonErr)
		}
		if req.Model != want {
			t.Fatalf("model %q, encoding/json reads %q", req.Model, want)
		}
		if req.Stream != ref.Stream {
			t.Fatalf("stream %v, encoding/json reads %v", req.Stream, ref.Stream)
		}
		if same := req.BodyFor(req.Model); !bytes.Equal(same, body) {
			t.Fatalf("unchanged model rewrote the body:\n%s\n%s", body, same)
		}
		if newModel == "" || !utf8.ValidString(newModel) {
			return
		}
		out := req.BodyFor(newModel)
		var got map[string]json.RawMessage
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("rewritten body is not valid JSON: %v\n%s", err, out)
		}
		var gotRef refBody
		_ = json.Unmarshal(out, &gotRef) // valid JSON: at most a type error on stream
		if gotRef.Model != newModel {
			t.Fatalf("rewritten model %q, want %q", gotRef.Model, newModel)
		}
		if len(got) != len(top) {
			t.Fatalf("rewrite changed the keys: %d -> %d", len(top), len(got))
		}
		for k, v := range top {
			if !strings.EqualFold(k, "model") && !bytes.Equal(got[k], v) {
				t.Fatalf("rewrite changed %q: %s -> %s", k, v, got[k])
			}
		}
	})
}

// bigCompletionBody is a realistic 1 MiB request: a long conversation
// with escapes, nested content blocks and tools, the model last.
func bigCompletionBody(size int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"max_tokens":1024,"stream":true,"system":"You are terse.","tools":[{"name":"get","input_schema":{"type":"object","properties":{"q":{"type":"string"}}}}],"messages":[`)
	turn := `{"role":"user","content":[{"type":"text","text":"` + strings.Repeat(`Lorem ipsum dolor sit amet, \"consectetur\" adipiscing elit.\n`, 40) + `"}]},` +
		`{"role":"assistant","content":"` + strings.Repeat(`Sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. `, 30) + `"},`
	for b.Len() < size-200 {
		b.WriteString(turn)
	}
	b.WriteString(`{"role":"user","content":"and the model field comes last"}],"metadata":{"user_id":"u-123"},"model":"claude-sonnet-4-5"}`)
	return b.Bytes()
}

// BenchmarkProxyBodyRewrite measures what a 1 MiB request body costs the
// proxy: reading it (one buffer of its size), the validating scan for
// model and stream (no copy, one pass), and the model rewrite of one
// attempt (one copy, the rest of the JSON spliced unchanged). B/op of
// "read" and of "parse+rewrite" must each stay at about one body size;
// json.Valid is the reference cost of a single validation pass.
func BenchmarkProxyBodyRewrite(b *testing.B) {
	body := bigCompletionBody(1 << 20)
	b.Run("read", func(b *testing.B) { // the request's one copy: from the connection into its buffer
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		r := httptest.NewRequest(http.MethodPost, "/v1/messages", nil)
		rd := bytes.NewReader(body)
		for b.Loop() {
			rd.Reset(body)
			r.Body, r.ContentLength = io.NopCloser(rd), int64(len(body))
			if got, err := readBody(r, 32<<20); err != nil || len(got) != len(body) {
				b.Fatal(err)
			}
		}
	})
	b.Run("parse", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := wire.ParseCompletion(dialectAnthropic, "", "", body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parse+rewrite", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			req, err := wire.ParseCompletion(dialectAnthropic, "", "", body)
			if err != nil {
				b.Fatal(err)
			}
			if out := req.BodyFor("claude-haiku-4-5"); len(out) < len(body)-8 {
				b.Fatal("short body")
			}
		}
	})
	b.Run("json.Valid", func(b *testing.B) { // the reference cost of one validation pass
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if !json.Valid(body) {
				b.Fatal("invalid")
			}
		}
	})
}

// faultFlushCounter is a client that counts writes and flushes.
type faultFlushCounter struct {
	bytes.Buffer
	writes, flushes int
	flushed         int // bytes written before the last flush
}

func (c *faultFlushCounter) Write(b []byte) (int, error) { c.writes++; return c.Buffer.Write(b) }
func (c *faultFlushCounter) flush() error                { c.flushes++; c.flushed = c.Len(); return nil }

// A coalescing relay hands the client exactly the upstream's bytes with
// one write and one flush per read of the upstream, not one of each per
// event (here ~4 events per read of a 145 KB stream, one event of 40 KiB).
func TestFaultRelayCoalescedBurst(t *testing.T) {
	var in strings.Builder
	for i := range 200 {
		pad := 400
		if i == 100 {
			pad = 40 << 10 // one event over what a burst holds back
		}
		fmt.Fprintf(&in, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"%04d %s\"}}\n\n", i, strings.Repeat("x", pad))
	}
	in.WriteString("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	for _, coalesce := range []bool{false, true} {
		c := &faultFlushCounter{}
		rd := sse.NewReader(strings.NewReader(in.String()), 1<<20)
		res := stream.Relay(context.Background(), c, c.flush, rd, dialectAnthropic, nil, stream.RelayOptions{Idle: time.Minute, Coalesce: coalesce}, nil)
		if !res.Complete || res.Events != 201 {
			t.Fatalf("coalesce=%v: %+v", coalesce, res)
		}
		if c.String() != in.String() {
			t.Fatalf("coalesce=%v: the client got other bytes than the upstream sent", coalesce)
		}
		// One flush per read of the upstream (each at least sseMinRead
		// bytes), at most one write more per 32 KiB held back.
		if coalesce && (c.flushes > 1+in.Len()/sse.MinRead || c.writes > c.flushes+in.Len()/stream.CoalesceMax+1) {
			t.Fatalf("coalesced: %d writes, %d flushes for %d bytes", c.writes, c.flushes, in.Len())
		}
		if !coalesce && (c.writes != 201 || c.flushes != 201) {
			t.Fatalf("per event: %d writes, %d flushes, want 201 each", c.writes, c.flushes)
		}
	}
}

// faultReads hands out one chunk per Read and calls check before each.
type faultReads struct {
	chunks []string
	check  func(read int)
	n      int
}

func (r *faultReads) Read(p []byte) (int, error) {
	r.check(r.n)
	if r.n == len(r.chunks) {
		return 0, io.EOF
	}
	r.n++
	return copy(p, r.chunks[r.n-1]), nil
}

// The committing events the caller wrote without a flush (Unflushed) go
// out with the relay's first flush, together with the events read with
// them, and always before the relay waits on the upstream again.
func TestFaultRelayUnflushedCommit(t *testing.T) {
	delta := func(s string) string {
		return "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"" + s + "\"}}\n\n"
	}
	committed := delta("one")
	stop := "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	for _, after := range []string{"", delta(" two") + delta(" three")} {
		chunks := []string{committed + after, delta(" four"), stop}
		c := &faultFlushCounter{}
		rd := sse.NewReader(&faultReads{chunks: chunks, check: func(read int) {
			// Before each wait on the upstream, all it sent is flushed to the client.
			if want := strings.Join(chunks[:read], ""); read > 0 && c.String()[:c.flushed] != want {
				t.Errorf("before read %d: the client has %q flushed, want %q", read, c.String()[:c.flushed], want)
			}
		}}, 1<<20)
		ev, err := rd.Next() // the gate's committing event; the events after it stay in the reader
		if err != nil {
			t.Fatal(err)
		}
		c.WriteString(string(ev.Raw)) // commit writes it, unflushed
		res := stream.Relay(context.Background(), c, c.flush, rd, dialectAnthropic, nil,
			stream.RelayOptions{Idle: time.Minute, Coalesce: true, Unflushed: true}, nil)
		if !res.Complete {
			t.Fatalf("%+v", res)
		}
		if want := strings.Join(chunks, ""); c.String() != want {
			t.Fatalf("the client got %q, want %q", c.String(), want)
		}
		if c.flushes != 3 { // the committed events with those read with them, four, the stop
			t.Errorf("events after the commit %q: %d flushes, want 3", after, c.flushes)
		}
	}
}
