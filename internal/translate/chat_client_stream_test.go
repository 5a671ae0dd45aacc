package translate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	openaidialect "github.com/llmhedge/caddy-llm-hedge/internal/dialect/openai"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// The Chat client's pairs, with the target fixtures their streams are
// read from and, per fixture, the golden of the phase-1 client fed the
// same target stream (its outcome, clean or error, must be ours).
var chatClientPairs = []struct {
	target, dir, phase1 string
}{
	{Anthropic, "anthropic", "responses_from_anthropic_"},
	{Gemini, "gemini", "anthropic_from_gemini_"},
	{Responses, "responses", "anthropic_from_responses_"},
}

// chatStreamRequest is a streamed Chat request asking for usage, as
// opencode sends it.
const chatStreamRequest = `{"model":"m","max_tokens":64,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"x"}]}`

// checkChatStream holds a client stream to Chat Completions' grammar as
// the proxy writes it: data lines only; a first chunk with role
// assistant; tool calls at indices 0, 1, 2... each opened once with its
// id, type and name and filled only while it is the last one; one chunk
// with a finish_reason; then an optional usage chunk (no choices) and
// data: [DONE] last. An error line ends the stream (not clean). Every
// call's arguments parse as a JSON object at the finish.
func checkChatStream(t testing.TB, out []byte) (clean bool, err error) {
	evs := sseEvents(t, out)
	started, finished, usage := false, false, false
	var args [][]byte
	for i, ev := range evs {
		if len(ev.Name) > 0 {
			return false, fmt.Errorf("event %d has a name %q", i, ev.Name)
		}
		last := i == len(evs)-1
		if string(ev.Data) == "[DONE]" {
			if !finished || !last {
				return false, fmt.Errorf("[DONE] out of place")
			}
			return true, nil
		}
		var c struct {
			Object  string
			Error   json.RawMessage
			Choices []struct {
				Index int
				Delta struct {
					Role      string
					Content   *string
					ToolCalls []struct {
						Index    int
						ID       string
						Type     string
						Function struct{ Name, Arguments string }
					} `json:"tool_calls"`
				}
				FinishReason *string `json:"finish_reason"`
			}
			Usage json.RawMessage
		}
		if jerr := json.Unmarshal(ev.Data, &c); jerr != nil {
			return false, fmt.Errorf("event %d is not JSON: %v", i, jerr)
		}
		if len(c.Error) > 0 {
			var e struct{ Message, Type string }
			if json.Unmarshal(c.Error, &e) != nil || e.Message == "" || e.Type == "" || !last {
				return false, fmt.Errorf("error line %s out of place or without message and type", ev.Data)
			}
			return false, nil
		}
		if c.Object != "chat.completion.chunk" {
			return false, fmt.Errorf("event %d: object %q", i, c.Object)
		}
		if usage {
			return false, fmt.Errorf("a chunk after the usage chunk")
		}
		if len(c.Choices) == 0 {
			if !finished || len(c.Usage) == 0 {
				return false, fmt.Errorf("a chunk without choices that is not the usage after the finish")
			}
			usage = true
			continue
		}
		if len(c.Choices) != 1 || c.Choices[0].Index != 0 {
			return false, fmt.Errorf("event %d: choices other than one of index 0", i)
		}
		ch := c.Choices[0]
		if !started {
			if ch.Delta.Role != "assistant" {
				return false, fmt.Errorf("first chunk without role assistant")
			}
			started = true
		}
		if finished {
			return false, fmt.Errorf("a choice after the finish_reason")
		}
		for _, tc := range ch.Delta.ToolCalls {
			switch {
			case tc.Index == len(args):
				if tc.ID == "" || tc.Type != "function" || tc.Function.Name == "" {
					return false, fmt.Errorf("tool call %d opened without id, type or name", tc.Index)
				}
				args = append(args, nil)
			case tc.Index != len(args)-1 || tc.ID != "" || tc.Function.Name != "":
				return false, fmt.Errorf("tool call %d out of order (%d open)", tc.Index, len(args))
			}
			args[tc.Index] = append(args[tc.Index], tc.Function.Arguments...)
		}
		if ch.FinishReason != nil {
			switch *ch.FinishReason {
			case "stop", "length", "tool_calls", "content_filter":
			default:
				return false, fmt.Errorf("finish_reason %q", *ch.FinishReason)
			}
			for n, a := range args {
				if !json.Valid(a) || bytes.TrimSpace(a)[0] != '{' {
					return false, fmt.Errorf("tool call %d arguments %q do not parse as an object", n, a)
				}
			}
			finished = true
		}
	}
	return false, nil
}

// accumulateChat reads a Chat client stream as openai-go does: its chunks
// through the SDK's accumulator; errMsg is an error line's message.
func accumulateChat(t testing.TB, out []byte) (acc openai.ChatCompletionAccumulator, done bool, errMsg string) {
	t.Helper()
	for _, ev := range sseEvents(t, out) {
		if string(ev.Data) == "[DONE]" {
			return acc, true, ""
		}
		var e struct {
			Error *struct{ Message string }
		}
		if json.Unmarshal(ev.Data, &e) == nil && e.Error != nil {
			return acc, false, e.Error.Message
		}
		var chunk openai.ChatCompletionChunk
		if err := json.Unmarshal(ev.Data, &chunk); err != nil {
			t.Fatalf("chunk does not unmarshal into openai.ChatCompletionChunk: %v\n%s", err, ev.Data)
		}
		if !acc.AddChunk(chunk) {
			t.Fatalf("the SDK's accumulator refuses the chunk %s", ev.Data)
		}
	}
	return acc, false, ""
}

// sameCompletion compares what a client of openai-go sees: the text, the
// tool calls (ids, names, arguments), the finish reason and the usage.
func sameCompletion(t *testing.T, got, want openai.ChatCompletion) {
	t.Helper()
	if len(got.Choices) != 1 || len(want.Choices) != 1 {
		t.Fatalf("choices: got %d, want %d", len(got.Choices), len(want.Choices))
	}
	g, w := got.Choices[0], want.Choices[0]
	if g.Message.Content != w.Message.Content || g.FinishReason != w.FinishReason {
		t.Errorf("message: got %q %q, want %q %q", g.Message.Content, g.FinishReason, w.Message.Content, w.FinishReason)
	}
	if len(g.Message.ToolCalls) != len(w.Message.ToolCalls) {
		t.Fatalf("tool calls: got %d, want %d", len(g.Message.ToolCalls), len(w.Message.ToolCalls))
	}
	for i := range g.Message.ToolCalls {
		gc, wc := g.Message.ToolCalls[i], w.Message.ToolCalls[i]
		if gc.ID != wc.ID || gc.Function.Name != wc.Function.Name || !jsonEqual(t, []byte(gc.Function.Arguments), []byte(wc.Function.Arguments)) {
			t.Errorf("tool call %d: got %s %s %s, want %s %s %s", i, gc.ID, gc.Function.Name, gc.Function.Arguments, wc.ID, wc.Function.Name, wc.Function.Arguments)
		}
	}
	if got.Usage.PromptTokens != want.Usage.PromptTokens || got.Usage.CompletionTokens != want.Usage.CompletionTokens ||
		got.Usage.PromptTokensDetails.CachedTokens != want.Usage.PromptTokensDetails.CachedTokens {
		t.Errorf("usage: got %+v, want %+v", got.Usage, want.Usage)
	}
	if got.ID != want.ID || got.Model != want.Model {
		t.Errorf("id, model: got %s %s, want %s %s", got.ID, got.Model, want.ID, want.Model)
	}
}

// Every target fixture, streamed to a Chat client: the golden, Chat's
// grammar, the phase-1 outcome (an error event exactly where the phase-1
// client got one), and for a clean stream the same completion as the
// non-stream answer, as openai-go accumulates it.
func TestChatClientStreams(t *testing.T) {
	for _, c := range chatClientPairs {
		p, _ := For(OpenAI, c.target)
		tr, err := p.Translate([]byte(chatStreamRequest), "target-model")
		if err != nil {
			t.Fatal(err)
		}
		files, _ := filepath.Glob(filepath.Join("testdata", c.dir, "*.sse"))
		for _, f := range files {
			name := strings.TrimSuffix(filepath.Base(f), ".sse")
			t.Run(c.dir+"/"+name, func(t *testing.T) {
				out, serr := runTranslation(tr, readFile(t, f), nil)
				golden(t, "openai_from_"+c.dir+"_"+name+".sse", out)
				clean, gerr := checkChatStream(t, out)
				if gerr != nil {
					t.Fatalf("grammar: %v\n%s", gerr, out)
				}
				phase1 := readFile(t, filepath.Join("testdata", "golden", c.phase1+name+".sse"))
				if phase1Err := bytes.Contains(phase1, []byte("event: error\n")); phase1Err != (serr != nil) || clean == (serr != nil) {
					t.Fatalf("error %v, clean %v; the phase-1 client got an error: %v", serr, clean, phase1Err)
				}
				acc, done, errMsg := accumulateChat(t, out)
				body := filepath.Join("testdata", c.dir, name+".json")
				if serr != nil {
					if done || errMsg == "" {
						t.Fatalf("done %v, error %q: want an error line", done, errMsg)
					}
					if fileExists(body) {
						if _, err := tr.Response(readFile(t, body)); err == nil {
							t.Errorf("the non-stream answer translates")
						}
					}
					return
				}
				if !bytes.Contains(out, []byte(`"choices":[],"usage":{`)) {
					t.Errorf("no usage chunk, asked for")
				}
				if !fileExists(body) {
					return
				}
				whole, err := tr.Response(readFile(t, body))
				if err != nil {
					t.Fatal(err)
				}
				var want openai.ChatCompletion
				if err := json.Unmarshal(whole, &want); err != nil {
					t.Fatalf("answer does not unmarshal into openai.ChatCompletion: %v", err)
				}
				sameCompletion(t, acc.ChatCompletion, want)
			})
		}
	}
}

// Every byte-level re-chunking of each target stream gives a Chat client
// the same bytes and outcome.
func TestChatClientRechunked(t *testing.T) {
	for _, c := range chatClientPairs {
		p, _ := For(OpenAI, c.target)
		t.Run(c.target, func(t *testing.T) { checkRechunked(t, p, c.dir) })
	}
}

// Without stream_options.include_usage there is no usage chunk; [DONE]
// still ends the stream.
func TestChatClientUsageOnlyWhenAsked(t *testing.T) {
	for _, c := range chatClientPairs {
		p, _ := For(OpenAI, c.target)
		body := strings.Replace(chatStreamRequest, `"stream_options":{"include_usage":true},`, "", 1)
		tr, err := p.Translate([]byte(body), "m")
		if err != nil {
			t.Fatal(err)
		}
		out, err := runTranslation(tr, readFile(t, filepath.Join("testdata", c.dir, "text.sse")), nil)
		if err != nil || bytes.Contains(out, []byte(`"usage"`)) || !bytes.HasSuffix(out, []byte("data: [DONE]\n\n")) {
			t.Errorf("%s: %v\n%s", c.target, err, out)
		}
		// Pair.Request cannot give the usage chunk back: a need.
		_, losses, _ := p.Request([]byte(chatStreamRequest), "m")
		if Describe(losses, true) != chatIncludeUsageNeed {
			t.Errorf("%s: Request losses %q", c.target, Describe(losses, true))
		}
	}
}

// A Chat client's translated stream has no resumer (a continuation never
// crosses formats), so the relay reads it without the text. Its content
// deltas repeat one frame around the text, and the stream's memo must read
// them by it, as it reads a native stream's: after the first delta is
// walked, every later one is read by the frame (no miss), with the
// reading the walk gives.
func TestChatClientDeltasReadByFrame(t *testing.T) {
	var d openaidialect.Dialect
	for _, c := range chatClientPairs {
		p, _ := For(OpenAI, c.target)
		tr, err := p.Translate([]byte(chatStreamRequest), "target-model")
		if err != nil {
			t.Fatal(err)
		}
		out, err := runTranslation(tr, readFile(t, filepath.Join("testdata", c.dir, "text.sse")), nil)
		if err != nil {
			t.Fatal(err)
		}
		var cs wire.ChoiceSet
		deltas := 0
		for _, ev := range sseEvents(t, out) {
			got, walked := d.Inspect(ev, false, &cs), d.Inspect(ev, false, nil)
			if got.Class != walked.Class || got.By != walked.By || got.Text != nil || got.Plain {
				t.Fatalf("%s: %q read %+v, the walk %+v", c.target, ev.Data, got, walked)
			}
			if got.By != "content" {
				continue
			}
			if deltas++; deltas > 1 && (cs.Memo == nil || cs.Memo.FrameSplit == 0 || cs.Memo.FrameMisses != 0) {
				t.Fatalf("%s: content delta %d %q not read by the frame (memo %+v)", c.target, deltas, ev.Data, cs.Memo)
			}
		}
		if deltas < 2 {
			t.Fatalf("%s: %d content deltas in\n%s", c.target, deltas, out)
		}
	}
}
