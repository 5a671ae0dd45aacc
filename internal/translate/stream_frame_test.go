package translate

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
)

// framedDecoders are the target decoders that read text deltas through a
// textFrame; walkOnly is the same decoder with its frame off (every event
// walked), which the framed one must match byte for byte.
var framedDecoders = []struct {
	dir   string // testdata seeds
	text  *regexp.Regexp
	fresh func(walkOnly bool) Stream
}{
	{"responses", regexp.MustCompile(`"delta":\s*("(?:[^"\\]|\\.)*")`), func(walkOnly bool) Stream {
		s := newResponsesToAnthropicStream()
		if walkOnly {
			s.frame.misses = frameMisses
		}
		return s
	}},
	{"chat", regexp.MustCompile(`"(?:content|refusal)":\s*("(?:[^"\\]|\\.)*")`), func(walkOnly bool) Stream {
		s := newChatToAnthropicStream()
		if walkOnly {
			s.frame.misses = frameMisses
		}
		return s
	}},
	{"gemini", regexp.MustCompile(`"text":\s*("(?:[^"\\]|\\.)*")`), func(walkOnly bool) Stream {
		s := newGeminiToAnthropicStream()
		if walkOnly {
			s.frame.misses = frameMisses
		}
		return s
	}},
	{"anthropic", regexp.MustCompile(`"(?:text|partial_json)":\s*("(?:[^"\\]|\\.)*")`), func(walkOnly bool) Stream {
		s := newAnthropicToResponsesStream(nil)
		if walkOnly {
			s.frame.misses = frameMisses
		}
		return s
	}},
}

// Values put where a text, a sequence number or an obfuscation string
// stands: of the hole's kind or not, valid or not.
var (
	frameTexts  = []string{`"x"`, `""`, `" the quick brown fox"`, `"\n\"esc\" \u00e9 \ud83d\ude00"`, `"\x"`, `"abc`, `null`, `5`, `{}`, `"日本語"`, `"a\\"`}
	frameSeqs   = []string{`5`, `0`, `07`, `-1`, `5.0`, `5e1`, `123456789012345678901234567890`, `"5"`, `null`, ` 6`, `6 `}
	frameObfs   = []string{`"abc"`, `""`, `"Zx9\u0041"`, `null`, `7`, `"`, `"a" `}
	seqMember   = regexp.MustCompile(`"sequence_number":\s*([^,}]*)`)
	obfMember   = regexp.MustCompile(`"obfuscation":\s*([^,}]*)`)
	usageMember = regexp.MustCompile(`"usage(?:Metadata)?":\s*\{[^{}]*(?:\{[^{}]*\}[^{}]*)*\}`)
	frameOther  = []string{
		`,"finish_reason":"stop"`, `,"usage":{"prompt_tokens":3,"completion_tokens":4}`, `,"output_index":1`, `,"delta":"dup"`,
		`,"finishReason":"STOP"`, `,"usageMetadata":{"promptTokenCount":4,"candidatesTokenCount":2}`, `,"type":"response.refusal.delta"`,
		`,"error":{"message":"boom"}`, `,"text":"again"`, ` `, `,"content":"twice"`,
	}
)

// frameHoles rewrites the values in one event's data where a frame's
// holes would stand: its text, sequence number and obfuscation, from the
// lists (valid ones of the hole's kind only, when valid).
func frameHoles(r *rand.Rand, text *regexp.Regexp, data string, valid bool) string {
	pick := func(vals []string) string {
		if valid {
			return vals[r.IntN(3)] // the first three are of the hole's kind
		}
		return vals[r.IntN(len(vals))]
	}
	if m := text.FindAllStringSubmatchIndex(data, -1); len(m) > 0 && r.IntN(4) > 0 {
		k := m[r.IntN(len(m))]
		data = data[:k[2]] + pick(frameTexts) + data[k[3]:]
	}
	if m := seqMember.FindStringSubmatchIndex(data); m != nil && r.IntN(3) > 0 {
		data = data[:m[2]] + pick(frameSeqs) + data[m[3]:]
	}
	if m := obfMember.FindStringSubmatchIndex(data); m != nil && r.IntN(3) > 0 {
		data = data[:m[2]] + pick(frameObfs) + data[m[3]:]
	}
	return data
}

// frameVariant rewrites one event's data: the values in its holes, and
// now and then another member, no usage, a flipped byte or a cut.
func frameVariant(r *rand.Rand, text *regexp.Regexp, data string) string {
	data = frameHoles(r, text, data, r.IntN(8) > 0)
	end := strings.LastIndexByte(data, '}')
	if end < 0 {
		return data
	}
	switch r.IntN(40) {
	case 0, 5, 6, 7, 8, 9:
		data = data[:end] + `,"obfuscation":` + frameObfs[r.IntN(len(frameObfs))] + data[end:]
	case 1, 10, 11, 12, 13, 14, 15, 16:
		data = data[:end] + frameOther[r.IntN(len(frameOther))] + data[end:]
	case 2:
		b := []byte(data)
		b[r.IntN(len(b))] = `{}[]",: 0a\`[r.IntN(11)]
		data = string(b)
	case 3:
		data = data[:r.IntN(len(data))]
	case 4, 17, 18, 19, 20:
		data = usageMember.ReplaceAllString(data, `"usage":null`)
	}
	return data
}

// frameStream builds a target stream from a seed's events, each but the
// ones with text now and then without its usage: each event that holds a
// text is followed by variants of it, and by events that differ from the
// last variant only where a frame's holes would stand (which its frame,
// when kept, meets).
func frameStream(t *testing.T, r *rand.Rand, text *regexp.Regexp, seed []byte) []byte {
	rd := sse.NewReader(bytes.NewReader(seed), 0)
	var out bytes.Buffer
	emit := func(name []byte, data string) {
		if len(name) > 0 {
			fmt.Fprintf(&out, "event: %s\n", name)
		}
		fmt.Fprintf(&out, "data: %s\n\n", strings.ReplaceAll(data, "\n", "\ndata: "))
	}
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return out.Bytes()
		}
		if err != nil {
			t.Fatal(err)
		}
		data := string(ev.Data)
		if !text.MatchString(data) {
			if r.IntN(3) == 0 {
				data = usageMember.ReplaceAllString(data, `"usage":null`)
			}
			emit(ev.Name, data)
			continue
		}
		emit(ev.Name, data)
		for range r.IntN(12) {
			switch r.IntN(20) {
			default:
				emit(ev.Name, frameHoles(r, text, data, true))
			case 0:
				emit(ev.Name, frameHoles(r, text, data, false))
			case 1, 2, 3, 4, 5:
				data = frameVariant(r, text, data)
				emit(ev.Name, data)
			}
		}
	}
}

// TestTextFramesMatchTheWalk: a decoder reading text deltas through its
// frame writes what it writes walking every event, and fails alike, on
// the seed streams and thousands of variants of their text events (texts,
// sequence numbers and obfuscation strings of every kind in the holes,
// other members, broken bytes and cuts around them).
func TestTextFramesMatchTheWalk(t *testing.T) {
	r := rand.New(rand.NewPCG(59, 1))
	hits := 0
	for _, d := range framedDecoders {
		seeds, _ := filepath.Glob(filepath.Join("testdata", d.dir, "*.sse"))
		if len(seeds) == 0 {
			t.Fatalf("no seeds for %s", d.dir)
		}
		for _, seed := range seeds {
			raw, err := os.ReadFile(seed)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 300 {
				target := raw
				if i > 0 {
					target = frameStream(t, r, d.text, raw)
				}
				framed := d.fresh(false)
				frameOf(framed).misses = -1 << 20 // keeps every frame the walk reads
				want, wantErr := runStreamOf(d.fresh(true), target)
				got, gotErr := runStreamOf(framed, target)
				if !bytes.Equal(got, want) || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
					t.Fatalf("%s: framed decoder differs from the walk\ntarget:\n%s\nwalk (%v):\n%s\nframed (%v):\n%s", seed, target, wantErr, want, gotErr, got)
				}
				if frameOf(framed).n > 0 {
					hits++
				}
			}
		}
	}
	if hits == 0 {
		t.Fatal("no stream kept a frame: the test compares nothing")
	}
}

func frameOf(s Stream) *textFrame {
	switch s := s.(type) {
	case *responsesToAnthropicStream:
		return &s.frame
	case *chatToAnthropicStream:
		return &s.frame
	case *geminiToAnthropicStream:
		return &s.frame
	case *anthropicToResponsesStream:
		return &s.frame
	}
	return nil
}

// A stream of text deltas is read through the frame: after the first,
// each matches it, sequence number and obfuscation aside.
func TestTextFrameMet(t *testing.T) {
	events := []struct {
		d     int
		head  string
		delta func(i int) string
	}{
		{0, responsesHead, func(i int) string {
			return fmt.Sprintf("event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":%d,\"item_id\":\"msg_T1\",\"output_index\":0,\"content_index\":0,\"delta\":\"w%d\",\"logprobs\":[],\"obfuscation\":\"o%d\"}\n\n", i+2, i, i*7)
		}},
		{1, chatHead, func(i int) string {
			return fmt.Sprintf(`data: {"id":"chatcmpl-A1","object":"chat.completion.chunk","created":1733000000,"model":"gpt-5","choices":[{"index":0,"delta":{"content":"w%d"},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"%x"}`+"\n\n", i, i*i)
		}},
		{2, geminiHead, func(i int) string { return strings.Replace(geminiDelta, "over", fmt.Sprint("over", i), 1) }},
	}
	for _, e := range events {
		d := framedDecoders[e.d]
		s := d.fresh(false)
		out := feedHead(t, s, nil, e.head)
		var err error
		for i := range 20 {
			f := frameOf(s)
			met := f.n > 0
			if out, err = s.Event(out[:0], firstEvent(t, e.delta(i))); err != nil {
				t.Fatalf("%s: %v", d.dir, err)
			}
			if i > 1 && (!met || f.misses != 0) {
				t.Fatalf("%s: delta %d not read through the frame (frame %v, misses %d)", d.dir, i, met, f.misses)
			}
			if !bytes.Contains(out, fmt.Appendf(nil, `"w%d"`, i)) && !bytes.Contains(out, fmt.Appendf(nil, "over%d", i)) {
				t.Fatalf("%s: delta %d wrote %s", d.dir, i, out)
			}
		}
	}
}

// The state a frame's event leaves, or the walk checks, is the walk's
// when another event comes between the frame and the event it meets:
// usage a chunk set since (the frame's is set again), an item or a finish
// since (the walk's error), a refusal's text after the empty one of the
// frame (a refusal's stop). A chunk with usage is no frame: the frame
// holds the usage of a chunk the walk read nothing else in.
func TestTextFrameState(t *testing.T) {
	chat := func(delta, rest string) string {
		return `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-5","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]` + rest + "}\n\n"
	}
	gemini := func(part, usage string) string {
		return `data: {"candidates":[{"content":{"parts":[` + part + `],"role":"model"},"index":0}]` + usage + `,"modelVersion":"g"}` + "\n\n"
	}
	responses := func(typ, rest string) string {
		return "event: " + typ + "\ndata: {\"type\":\"" + typ + "\"," + rest + "}\n\n"
	}
	const (
		u1 = `,"usage":{"prompt_tokens":3,"completion_tokens":4}`
		u2 = `,"usage":{"prompt_tokens":30,"completion_tokens":40}`
		g1 = `,"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":4}`
		g2 = `,"usageMetadata":{"promptTokenCount":30,"candidatesTokenCount":40}`
	)
	textItem := `"output_index":0,"item":{"id":"m1","type":"message","role":"assistant","content":[]}`
	callItem := `"output_index":0,"item":{"id":"f1","type":"function_call","call_id":"c1","name":"f","arguments":""}`
	type frameCase struct {
		d      int
		stream string
		met    bool // the last text the stream read, it read through a frame
	}
	cases := []frameCase{
		{1, chat(`{"role":"assistant","content":""}`, "") + chat(`{"content":"a"}`, u1) + chat(`{}`, u2) + chat(`{"content":"b"}`, u1) +
			`data: {"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n", false},
		{1, chat(`{"content":"a"}`, "") + chat(`{"content":"b"}`, "") + `data: {"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
			chat(`{"content":"c"}`, ""), true},
		{1, chat(`{"content":"a"}`, "") + chat(`{"refusal":""}`, "") + chat(`{"refusal":"no!"}`, "") + chat(`{"content":"b"}`, "") +
			`data: {"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n", false},
		{2, gemini(`{"text":"a"}`, g1) + gemini(`{"text":"b"}`, g1) + gemini(`{"text":"hm","thought":true}`, g2) + gemini(`{"text":"c"}`, g1) +
			`data: {"candidates":[{"content":{"parts":[{"text":""}]},"finishReason":"STOP","index":0}]}` + "\n\n", true},
		{2, gemini(`{"text":"a"}`, "") + gemini(`{"text":"b"}`, "") + gemini(`{"text":"b2"}`, "") + `data: {"candidates":[{"content":{"parts":[{"text":"c"}]},"finishReason":"STOP","index":0}]}` + "\n\n" +
			gemini(`{"text":"d"}`, ""), true},
		{0, responses("response.created", `"response":{"id":"resp_1","model":"gpt-5"}`) + responses("response.output_item.added", textItem) +
			responses("response.output_text.delta", `"output_index":0,"delta":"a","sequence_number":3`) +
			responses("response.output_text.delta", `"output_index":0,"delta":"b","sequence_number":4`) +
			responses("response.output_item.done", `"output_index":0`) + responses("response.output_item.added", callItem) +
			responses("response.output_text.delta", `"output_index":0,"delta":"c","sequence_number":7`), true},
		{0, responses("response.created", `"response":{"id":"resp_1","model":"gpt-5"}`) + responses("response.output_item.added", textItem) +
			responses("response.refusal.delta", `"output_index":0,"delta":"no","sequence_number":3`) +
			responses("response.output_text.delta", `"output_index":0,"delta":"b","sequence_number":4`) +
			responses("response.refusal.delta", `"output_index":0,"delta":"no!","sequence_number":5`) +
			responses("response.output_item.done", `"output_index":0`) +
			responses("response.completed", `"response":{"status":"completed","usage":{"input_tokens":1,"output_tokens":2}}`), false},
	}
	// Chunks of a text and something else: each is walked.
	toolCall := `,"tool_calls":[{"index":0,"id":"call_1","function":{"name":"f","arguments":"{}"}}]}`
	for _, c := range []string{`{"content":"b","refusal":"r"}`, `{"content":"b"` + toolCall} {
		stream := chat(`{"content":"a"}`, "") + chat(c, "") + chat(strings.Replace(c, `"b"`, `"c"`, 1), "")
		cases = append(cases, frameCase{1, stream + `data: {"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n", false})
	}
	twoChoices := chat(`{"content":"a"}`, "") + `data: {"id":"c1","choices":[{"index":0,"delta":{"content":"b"}},{"index":0,"delta":{"content":"c"}}]}` + "\n\n"
	call := `,{"functionCall":{"name":"f","args":{}}}`
	cases = append(cases, frameCase{1, twoChoices + twoChoices[len(chat(`{"content":"a"}`, "")):], false},
		frameCase{2, gemini(`{"text":"a"}`, "") + gemini(`{"text":"b"}`+call, "") + gemini(`{"text":"c"}`+call, "") +
			`data: {"candidates":[{"content":{"parts":[{"text":""}]},"finishReason":"STOP","index":0}]}` + "\n\n", false})
	// Responses: arguments met after an empty fragment (argsSeen: the
	// done event's arguments are not sent again); an arguments frame met
	// in a message item at the same output_index (the walk's error).
	argsDelta := func(d string) string {
		return responses("response.function_call_arguments.delta", `"output_index":0,"delta":`+d+`,"sequence_number":9`)
	}
	created := responses("response.created", `"response":{"id":"resp_1","model":"gpt-5"}`)
	calls := created + responses("response.output_item.added", callItem) + argsDelta(`""`) + argsDelta(`"{}"`)
	cases = append(cases, frameCase{0, calls + responses("response.function_call_arguments.done", `"output_index":0,"arguments":"{}"`) +
		responses("response.output_item.done", `"output_index":0`) +
		responses("response.completed", `"response":{"status":"completed","usage":{"input_tokens":1,"output_tokens":2}}`), true},
		frameCase{0, calls + responses("response.output_item.done", `"output_index":0`) + responses("response.output_item.added", textItem) +
			argsDelta(`"{}"`), true})
	// Anthropic: a text frame met after its block stopped, and after the
	// next block opened (the walk's errors); a
	// tool's arguments met after an empty fragment (argsSeen: no "{}" of
	// an empty input is added at the stop).
	anthropic := func(typ, rest string) string {
		return "event: " + typ + "\ndata: {\"type\":\"" + typ + "\"" + rest + "}\n\n"
	}
	head := anthropic("message_start", `,"message":{"id":"msg_1","model":"claude","usage":{"input_tokens":3}}`) +
		anthropic("content_block_start", `,"index":0,"content_block":{"type":"text","text":""}`)
	text := func(i int, t string) string {
		return anthropic("content_block_delta", fmt.Sprintf(`,"index":%d,"delta":{"type":"text_delta","text":%q}`, i, t))
	}
	args := func(t string) string {
		return anthropic("content_block_delta", fmt.Sprintf(`,"index":1,"delta":{"type":"input_json_delta","partial_json":%q}`, t))
	}
	tool := anthropic("content_block_stop", `,"index":0`) +
		anthropic("content_block_start", `,"index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"f","input":{}}`)
	end := anthropic("content_block_stop", `,"index":1`) + anthropic("message_delta", `,"delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":5}`) +
		anthropic("message_stop", "")
	cases = append(cases, frameCase{3, head + text(0, "a") + text(0, "b") + tool + text(0, "c"), true},
		frameCase{3, head + text(0, "a") + text(0, "b") + anthropic("content_block_stop", `,"index":0`) + text(0, "c"), true},
		frameCase{3, head + text(0, "a") + tool + args("") + args("{}") + end, true})
	for i, c := range cases {
		d := framedDecoders[c.d]
		framed := d.fresh(false)
		want, wantErr := runStreamOf(d.fresh(true), []byte(c.stream))
		got, gotErr := runStreamOf(framed, []byte(c.stream))
		if !bytes.Equal(got, want) || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			t.Errorf("case %d (%s): framed decoder differs from the walk\nwalk (%v):\n%s\nframed (%v):\n%s", i, d.dir, wantErr, want, gotErr, got)
		}
		if met := frameOf(framed).n > 0 && frameOf(framed).misses == 0; met != c.met {
			t.Errorf("case %d (%s): frame met last %v", i, d.dir, met)
		}
	}
}

// appendUnescaped decodes as the scanner does, and a writer's deltas with
// escapes allocate nothing once its quoted buffer has grown.
func TestAppendUnescaped(t *testing.T) {
	var quoted []byte
	for _, s := range []string{`plain`, `a\nb\"c\\`, `\u00e9\ud83d\ude00`, `\ud800x`, `tab\there`, ``} {
		got := appendUnescaped([]byte("x"), []byte(s), &quoted)
		want := jsonscan.AppendString([]byte("x"), []byte(`"`+s+`"`))
		if !bytes.Equal(got, want) {
			t.Errorf("%q: %q, want %q", s, got, want)
		}
	}
	dst, escaped := make([]byte, 0, 64), []byte(`line\nnext \"quoted\"`)
	if n := testing.AllocsPerRun(100, func() { dst = appendUnescaped(dst[:0], escaped, &quoted) }); n != 0 {
		t.Errorf("%v allocations per escaped delta", n)
	}
}

// FuzzTextFrames: on any target bytes, each framed decoder writes what
// its walk-only twin writes, and fails alike.
func FuzzTextFrames(f *testing.F) {
	for _, d := range framedDecoders {
		seeds, _ := filepath.Glob(filepath.Join("testdata", d.dir, "*.sse"))
		for _, s := range seeds {
			b, _ := os.ReadFile(s)
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, target []byte) {
		for _, d := range framedDecoders {
			framed := d.fresh(false)
			frameOf(framed).misses = -1 << 20
			want, wantErr := runStreamOf(d.fresh(true), target)
			got, gotErr := runStreamOf(framed, target)
			if !bytes.Equal(got, want) || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
				t.Fatalf("%s: framed decoder differs from the walk\nwalk (%v):\n%s\nframed (%v):\n%s", d.dir, wantErr, want, gotErr, got)
			}
		}
	})
}
