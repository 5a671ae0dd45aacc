package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/openai/openai-go/v3"
	"google.golang.org/genai"

	"github.com/llmhedge/caddy-llm-hedge/internal/dialect/gemini"
	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// resumeGeminiChunk is a chunk as the Gemini API sends it, with the given parts and
// candidate members after them.
func resumeGeminiChunk(parts, after string) string {
	return `{"candidates":[{"content":{"parts":[` + parts + `],"role":"model"}` + after + `,"index":0}],"usageMetadata":{"promptTokenCount":7,"totalTokenCount":7},"modelVersion":"gemini-2.5-flash","responseId":"resp-1"}`
}

var (
	rgHello   = resumeGeminiChunk(`{"text":"Hello"}`, "")
	rgWorld   = resumeGeminiChunk(`{"text":" w\u00f6rld"},{"text":"!\n"}`, "")
	rgStop    = resumeGeminiChunk(`{"text":""}`, `,"finishReason":"STOP"`)
	rgSig     = resumeGeminiChunk(`{"text":" signed","thoughtSignature":"c2ln"}`, "")
	rgNoThink = resumeGeminiChunk(`{"text":" plain","thought":false}`, "")
	rgThought = resumeGeminiChunk(`{"text":"let me think","thought":true}`, "")
	rgCall    = resumeGeminiChunk(`{"functionCall":{"name":"f","args":{}}}`, "")
	rgCode    = resumeGeminiChunk(`{"executableCode":{"language":"PYTHON","code":"1"}}`, "")
	rgInline  = resumeGeminiChunk(`{"inlineData":{"mimeType":"image/png","data":"AA=="}}`, "")
	rgMixed   = resumeGeminiChunk(`{"text":"Hi"},{"functionCall":{"name":"f","args":{}}}`, "")
	rgTwo     = `{"candidates":[{"content":{"parts":[{"text":"a"}],"role":"model"},"index":0},{"content":{"parts":[{"text":"b"}],"role":"model"},"index":1}]}`
	rgIndex1  = `{"candidates":[{"content":{"parts":[{"text":"b"}],"role":"model"},"index":1}]}`
	rgUsage   = `{"usageMetadata":{"promptTokenCount":7,"totalTokenCount":7},"modelVersion":"gemini-2.5-flash"}`
)

// resumeGeminiSSE frames chunks as the Gemini API does: data lines ending in CRLF
// pairs.
func resumeGeminiSSE(chunks ...string) string {
	var b strings.Builder
	for _, c := range chunks {
		b.WriteString("data: " + c + "\r\n\r\n")
	}
	return b.String()
}

func newGeminiResumer(t *testing.T) *gemini.Resumer {
	t.Helper()
	rs, ok := wire.NewResumer(dialectGemini, &wire.Request{Body: []byte(`{"contents":[]}`)}).(*gemini.Resumer)
	if !ok {
		t.Fatal("newResumer is not a geminiResumer")
	}
	return rs
}

func TestGeminiResumerTrack(t *testing.T) {
	tests := []struct {
		name     string
		chunks   []string
		text     string
		bad      bool
		finished bool
	}{
		{"text parts", []string{rgHello, rgWorld, rgUsage}, "Hello wörld!\n", false, false},
		{"finished", []string{rgHello, rgStop}, "Hello", false, true},
		{"signed text", []string{rgHello, rgSig, rgNoThink}, "Hello signed plain", false, false},
		{"thought", []string{rgThought, rgHello}, "", true, false},
		{"functionCall", []string{rgHello, rgCall}, "", true, false},
		{"executableCode", []string{rgCode}, "", true, false},
		{"inlineData", []string{rgInline}, "", true, false},
		{"text then a functionCall in one chunk", []string{rgMixed}, "", true, false},
		{"two candidates", []string{rgTwo}, "", true, false},
		{"candidate 1", []string{rgHello, rgIndex1}, "", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := newGeminiResumer(t)
			resumeTrackAll(t, dialectGemini, rs, resumeGeminiSSE(tt.chunks...))
			if got := rs.Ineligible() != ""; got != tt.bad {
				t.Fatalf("ineligible = %q, want ineligible %v", rs.Ineligible(), tt.bad)
			}
			if rs.Text() != tt.text || rs.Finished() != tt.finished {
				t.Errorf("text %q finished %v, want %q %v", rs.Text(), rs.Finished(), tt.text, tt.finished)
			}
		})
	}
}

func TestGeminiResumerPrefill(t *testing.T) {
	type part struct {
		Text string `json:"text"`
	}
	type content struct {
		Role  string `json:"role"`
		Parts []part `json:"parts"`
	}
	type body struct {
		Contents         []content      `json:"contents"`
		GenerationConfig map[string]any `json:"generationConfig"`
	}
	tests := []struct {
		name, in string
		last     content
		n        int
	}{
		{"appended", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"temperature":0}}`,
			content{"model", []part{{`Hello "wörld"`}}}, 2},
		{"model turn extended", `{"contents":[{"role":"user","parts":[{"text":"hi"}]},{"role":"model","parts":[{"text":"Sure: "}]}],"generationConfig":{"temperature":0}}`,
			content{"model", []part{{"Sure: "}, {`Hello "wörld"`}}}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := newGeminiResumer(t).Prefill([]byte(tt.in), `Hello "wörld"`)
			if err != nil {
				t.Fatal(err)
			}
			var b body
			if err := json.Unmarshal(out, &b); err != nil {
				t.Fatalf("%s: %v", out, err)
			}
			if len(b.Contents) != tt.n || b.GenerationConfig == nil {
				t.Fatalf("prefilled body %s", out)
			}
			if last := b.Contents[len(b.Contents)-1]; !resumeJSONEqual(last, tt.last) {
				t.Errorf("last turn %+v, want %+v", last, tt.last)
			}
		})
	}
	if _, err := newGeminiResumer(t).Prefill([]byte(`{"generationConfig":{}}`), "x"); !errors.Is(err, wire.ErrNoTurns) {
		t.Errorf("no contents: err %v, want errNoTurns", err)
	}
}

func TestGeminiResumerRead(t *testing.T) {
	tests := []struct {
		name, chunk string
		want        wire.ContEvent
	}{
		{"text", rgHello, wire.ContEvent{Kind: wire.ContText, Text: "Hello"}},
		{"text parts", rgWorld, wire.ContEvent{Kind: wire.ContText, Text: " wörld!\n"}},
		{"finish", rgStop, wire.ContEvent{Kind: wire.ContFinish, Finish: "STOP"}},
		{"text and finish", resumeGeminiChunk(`{"text":"end."}`, `,"finishReason":"MAX_TOKENS"`), wire.ContEvent{Kind: wire.ContText, Text: "end.", Finish: "MAX_TOKENS", Ends: true}},
		{"unspecified finish", resumeGeminiChunk(`{"text":"a"}`, `,"finishReason":"FINISH_REASON_UNSPECIFIED"`), wire.ContEvent{Kind: wire.ContText, Text: "a"}},
		{"usage only", rgUsage, wire.ContEvent{Kind: wire.ContSkip}},
		{"thought", rgThought, wire.ContEvent{Kind: wire.ContOther}},
		{"functionCall", rgCall, wire.ContEvent{Kind: wire.ContOther}},
		{"text and a functionCall", rgMixed, wire.ContEvent{Kind: wire.ContOther}},
		{"two candidates", rgTwo, wire.ContEvent{Kind: wire.ContOther}},
		{"error", `{"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}}`, wire.ContEvent{Kind: wire.ContError}},
		{"malformed", `{"candidates": [{"content": {"parts": [{"te`, wire.ContEvent{Kind: wire.ContError}},
	}
	rs := newGeminiResumer(t)
	for _, tt := range tests {
		evs := parseEvents(t, resumeGeminiSSE(tt.chunk))
		if got := rs.Read(evs[0], dialectGemini.Inspect(evs[0], true, nil)); got != tt.want {
			t.Errorf("%s: read = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// The chunks a resumer writes continue the client's stream in its framing:
// genai's type reads the text, the client's responseId and modelVersion,
// the finish and the usage.
func TestGeminiResumerWrite(t *testing.T) {
	for _, sep := range []string{"\r\n\r\n", "\n\n"} {
		rs := newGeminiResumer(t)
		client := strings.ReplaceAll(resumeGeminiSSE(rgHello), "\r\n\r\n", sep)
		resumeTrackAll(t, dialectGemini, rs, client)
		var out bytes.Buffer
		if err := rs.WriteText(&out, ` "wörld"`); err != nil {
			t.Fatal(err)
		}
		if err := rs.WriteEnd(&out, wire.ContEnd{Finish: "MAX_TOKENS", Input: 7, Output: 20}); err != nil {
			t.Fatal(err)
		}
		if got := strings.Count(out.String(), sep); got != 2 || !strings.HasSuffix(out.String(), sep) {
			t.Errorf("framing %q: %q", sep, out.String())
		}
		var text strings.Builder
		var last genai.GenerateContentResponse
		for _, ev := range parseEvents(t, client+out.String()) {
			var r genai.GenerateContentResponse
			if err := json.Unmarshal(ev.Data, &r); err != nil {
				t.Fatalf("%s: %v", ev.Data, err)
			}
			if r.ResponseID != "resp-1" || r.ModelVersion != "gemini-2.5-flash" {
				t.Errorf("chunk %s: not in the client's ids", ev.Data)
			}
			text.WriteString(r.Text())
			last = r
		}
		if text.String() != `Hello "wörld"` || rs.Text() != `Hello "wörld"` {
			t.Errorf("text %q, resumer text %q", text.String(), rs.Text())
		}
		if len(last.Candidates) != 1 || last.Candidates[0].FinishReason != genai.FinishReasonMaxTokens {
			t.Errorf("last chunk %+v: want finish MAX_TOKENS", last.Candidates)
		}
		if u := last.UsageMetadata; u == nil || u.PromptTokenCount != 7 || u.CandidatesTokenCount != 20 || u.TotalTokenCount != 27 {
			t.Errorf("usage = %+v", u)
		}
	}
}

// A client that has the finish gets nothing more: the body's end ends it.
func TestGeminiResumerWriteEndFinished(t *testing.T) {
	rs := newGeminiResumer(t)
	resumeTrackAll(t, dialectGemini, rs, resumeGeminiSSE(rgHello, rgStop))
	var out bytes.Buffer
	if err := rs.WriteEnd(&out, wire.ContEnd{}); err != nil || out.Len() != 0 || !rs.Finished() {
		t.Errorf("writeEnd = %q, %v (finished %v); want nothing", out.String(), err, rs.Finished())
	}
}

// resumeWire is one dialect's side of TestResumeSpliceChatGeminiProperty.
type resumeWire struct {
	d   wire.Dialect
	rs  func() wire.Resumer
	evt func(id, text, finish string) string // one chunk (finish "" for none)
	// open and close frame a stream: its first chunk(s) and what follows
	// the finish.
	open, close func(id string) string
	read        func(t *testing.T, stream []byte) resumeClientView
}

// resumeClientView is what an SDK client reads from a stream.
type resumeClientView struct {
	text            string
	ids             map[string]bool
	finishes, errs  int
	ends, afterEnds int
}

var resumeWires = map[string]resumeWire{
	"chat": {
		d:  dialectOpenAI,
		rs: func() wire.Resumer { return wire.NewResumer(dialectOpenAI, &wire.Request{Body: []byte(`{}`)}) },
		evt: func(id, text, finish string) string {
			f := "null"
			if finish != "" {
				f = strconv.Quote(finish)
			}
			content := ""
			if text != "" {
				content = `"content":` + strconv.Quote(text)
			}
			return `data: {"id":"` + id + `","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{` + content + `},"finish_reason":` + f + "}]}\n\n"
		},
		open: func(id string) string {
			return `data: {"id":"` + id + `","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n"
		},
		close: func(id string) string {
			return `data: {"id":"` + id + `","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":9,"total_tokens":14}}` + "\n\ndata: [DONE]\n\n"
		},
		read: func(t *testing.T, stream []byte) resumeClientView {
			v := resumeClientView{ids: map[string]bool{}}
			var acc openai.ChatCompletionAccumulator
			for _, ev := range parseEvents(t, string(stream)) {
				if v.ends+v.errs > 0 {
					v.afterEnds++
				}
				if string(ev.Data) == "[DONE]" {
					v.ends++
					continue
				}
				if _, isErr := jsonscan.Lookup(ev.Data, "error"); isErr {
					v.errs++
					continue
				}
				var ch openai.ChatCompletionChunk
				if err := json.Unmarshal(ev.Data, &ch); err != nil {
					t.Fatalf("client got %q: %v", ev.Data, err)
				}
				v.ids[ch.ID] = true
				if !acc.AddChunk(ch) {
					t.Fatalf("accumulator refused %s", ev.Data)
				}
				for _, c := range ch.Choices {
					v.text += c.Delta.Content
					if c.FinishReason != "" {
						v.finishes++
					}
				}
			}
			return v
		},
	},
	"gemini": {
		d:  dialectGemini,
		rs: func() wire.Resumer { return wire.NewResumer(dialectGemini, &wire.Request{Body: []byte(`{}`)}) },
		evt: func(id, text, finish string) string {
			f := ""
			if finish != "" {
				f = `"finishReason":` + strconv.Quote(finish) + `,`
			}
			return `data: {"candidates":[{"content":{"parts":[{"text":` + strconv.Quote(text) + `}],"role":"model"},` + f + `"index":0}],"responseId":"` + id + "\"}\r\n\r\n"
		},
		open:  func(string) string { return "" },
		close: func(string) string { return "" },
		read: func(t *testing.T, stream []byte) resumeClientView {
			v := resumeClientView{ids: map[string]bool{}}
			for _, ev := range parseEvents(t, string(stream)) {
				if v.finishes+v.errs > 0 {
					v.afterEnds++
				}
				if _, isErr := jsonscan.Lookup(ev.Data, "error"); isErr {
					v.errs++
					continue
				}
				var r genai.GenerateContentResponse
				if err := json.Unmarshal(ev.Data, &r); err != nil {
					t.Fatalf("client got %q: %v", ev.Data, err)
				}
				v.ids[r.ResponseID] = true
				v.text += r.Text()
				if len(r.Candidates) > 0 && r.Candidates[0].FinishReason != "" {
					v.finishes++
					v.ends++
				}
			}
			return v
		},
	},
}

// For random answers, cut points and chunkings, a continued Chat or Gemini
// stream reads through the SDK's types as one answer under the client's
// id whose text begins with what the client had (the whole answer when
// the continuation agrees), with one finish and one end, or ends in one
// error event with a prefix of the answer. The continuation's last text
// comes with its finish in the same chunk half of the time. A prefill
// target that answers from the start is never spliced.
func TestResumeSpliceChatGeminiProperty(t *testing.T) {
	for name, rw := range resumeWires {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, 4))
			for trial := range 1000 {
				var b strings.Builder
				for range 1 + rng.IntN(30) {
					b.WriteString(propertyWords[rng.IntN(len(propertyWords))])
				}
				answer := b.String()
				parts := chunk(rng, answer)
				if len(parts) < 2 {
					continue
				}
				k := 1 + rng.IntN(len(parts)-1)
				delivered := strings.Join(parts[:k], "")
				mode := rng.IntN(5)
				var cont string
				prefill := false
				switch mode {
				case 0:
					cont = answer
				case 1:
					w := chunk(rng, answer)
					w[rng.IntN(len(w))] = "other "
					cont = strings.Join(w, "")
				case 2:
					cont = answer[:rng.IntN(len(answer)+1)]
					for !utf8.ValidString(cont) {
						cont = cont[:len(cont)-1]
					}
				case 3:
					prefill = true
					pre, _ := wire.TrimPrefill(delivered)
					cont = answer[len(pre):]
				case 4: // a prefill target that answers from the start
					cont = answer
					pre, _ := wire.TrimPrefill(delivered)
					prefill = pre != "" // an all-whitespace text is not prefilled (continueStream)
				}
				v := rw.read(t, resumeSpliceOnce(t, rw, parts[:k], chunk(rng, cont), prefill, rng.IntN(2) == 0))
				ok := v.afterEnds == 0 && v.ends+v.errs == 1 && len(v.ids) == 1 && v.ids["client"]
				switch {
				case !ok:
				case mode == 4 && prefill:
					ok = v.errs == 1 && v.finishes == 0 && v.text == delivered
				case v.errs == 1:
					ok = v.finishes == 0 && strings.HasPrefix(answer, v.text) && strings.HasPrefix(v.text, delivered)
				case mode == 3 || mode == 0 || mode == 4:
					ok = v.finishes == 1 && v.text == answer
				default:
					ok = v.finishes == 1 && strings.HasPrefix(v.text, delivered) && v.text == cont
				}
				if !ok {
					t.Fatalf("trial %d mode %d: answer %q delivered %q continuation %q: client read %+v", trial, mode, answer, delivered, cont, v)
				}
			}
		})
	}
}

// resumeSpliceOnce plays a committed stream that delivered the chunks of
// delivered and then broke, and a continuation whose text comes in cont;
// it returns the client's whole stream (the error event is the relay's
// held one).
func resumeSpliceOnce(t *testing.T, rw resumeWire, delivered, cont []string, prefill, finishWithText bool) []byte {
	var client bytes.Buffer
	rs := rw.rs()
	feed := func(raw string) {
		client.WriteString(raw)
		for _, ev := range parseEvents(t, raw) {
			rs.Track(ev, rw.d.Inspect(ev, true, nil))
		}
	}
	feed(rw.open("client"))
	for _, d := range delivered {
		feed(rw.evt("client", d, ""))
	}
	text := rs.Text()
	sp := wire.ReplaySplicer(text)
	if prefill {
		sp = wire.PrefillSplicer(text)
	}
	run := &spliceRun{d: rw.d, rs: rs, sp: &sp, w: &client, flush: func() error { return nil }}
	var stream strings.Builder
	stream.WriteString(rw.open("cont"))
	for i, c := range cont {
		if finishWithText && i == len(cont)-1 {
			stream.WriteString(rw.evt("cont", c, "STOP"))
			break
		}
		stream.WriteString(rw.evt("cont", c, ""))
	}
	if !finishWithText || len(cont) == 0 {
		stream.WriteString(rw.evt("cont", "", "STOP"))
	}
	stream.WriteString(rw.close("cont"))
	for _, ev := range parseEvents(t, stream.String()) {
		if run.handle(ev) {
			break
		}
	}
	if !run.finishing() || !run.end(&wire.Usage{Input: 5, Output: 9}) {
		client.Write(wire.ErrorEvent(rw.d, 502, "the upstream ended the stream before it was complete"))
	}
	return client.Bytes()
}
