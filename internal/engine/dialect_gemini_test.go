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
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"
	"unicode/utf8"

	"google.golang.org/genai"

	"github.com/llmhedge/caddy-llm-hedge/internal/dialect/gemini"
	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/limit"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse/ssetest"
	"github.com/llmhedge/caddy-llm-hedge/internal/stream"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// Gemini API chunks as generativelanguage.googleapis.com sends them
// (members and spacing as on the wire, one GenerateContentResponse each).
const (
	gText1    = `{"candidates": [{"content": {"parts": [{"text": "Hi"}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 5,"candidatesTokenCount": 1,"totalTokenCount": 30,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 5}],"thoughtsTokenCount": 24},"modelVersion": "gemini-2.5-flash","responseId": "mKqAaMzXFoWe1MkP5rW4yQo"}`
	gText2    = `{"candidates": [{"content": {"parts": [{"text": " there! How can I help you today?"}],"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": {"promptTokenCount": 5,"candidatesTokenCount": 10,"totalTokenCount": 39,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 5}],"thoughtsTokenCount": 24},"modelVersion": "gemini-2.5-flash","responseId": "mKqAaMzXFoWe1MkP5rW4yQo"}`
	gThought  = `{"candidates": [{"content": {"parts": [{"text": "**Greeting the user**\n\nThe user said hi.","thought": true}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 5,"totalTokenCount": 29,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 5}],"thoughtsTokenCount": 24},"modelVersion": "gemini-2.5-flash","responseId": "nKqAaMzXFoWe1MkP5rW4yQo"}`
	gSigOnly  = `{"candidates": [{"content": {"parts": [{"text": "","thoughtSignature": "CiQB0e2Kb7mvkqR7rkCNn0hTqBE="}],"role": "model"},"index": 0}],"modelVersion": "gemini-2.5-flash","responseId": "nKqAaMzXFoWe1MkP5rW4yQo"}`
	gFnCall   = `{"candidates": [{"content": {"parts": [{"functionCall": {"name": "get_weather","args": {"location": "Paris"}},"thoughtSignature": "CiQB0e2Kb7mvkqR7rkCNn0hTqBE="}],"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": {"promptTokenCount": 61,"candidatesTokenCount": 16,"totalTokenCount": 140,"thoughtsTokenCount": 63},"modelVersion": "gemini-2.5-flash","responseId": "oKqAaMzXFoWe1MkP5rW4yQo"}`
	gFnCall2  = `{"candidates": [{"content": {"parts": [{"functionCall": {"name": "get_weather","args": {"location": "Paris"}}}],"role": "model"},"index": 0}],"modelVersion": "gemini-2.5-flash","responseId": "oKqAaMzXFoWe1MkP5rW4yQo"}`
	gImage    = `{"candidates": [{"content": {"parts": [{"inlineData": {"mimeType": "image/png","data": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="}}],"role": "model"},"index": 0}],"modelVersion": "gemini-2.5-flash-image","responseId": "pKqAaMzXFoWe1MkP5rW4yQo"}`
	gCode     = `{"candidates": [{"content": {"parts": [{"executableCode": {"language": "PYTHON","code": "print(2+2)\n"}}],"role": "model"},"index": 0}],"modelVersion": "gemini-2.5-flash","responseId": "qKqAaMzXFoWe1MkP5rW4yQo"}`
	gSafety   = `{"candidates": [{"finishReason": "SAFETY","index": 0,"safetyRatings": [{"category": "HARM_CATEGORY_SEXUALLY_EXPLICIT","probability": "NEGLIGIBLE"},{"category": "HARM_CATEGORY_HATE_SPEECH","probability": "HIGH","blocked": true}]}],"usageMetadata": {"promptTokenCount": 9,"totalTokenCount": 9},"modelVersion": "gemini-2.5-flash","responseId": "rKqAaMzXFoWe1MkP5rW4yQo"}`
	gBlocked  = `{"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},"usageMetadata": {"promptTokenCount": 8,"totalTokenCount": 8,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 8}]},"modelVersion": "gemini-2.5-flash","responseId": "sKqAaMzXFoWe1MkP5rW4yQo"}`
	gFeedback = `{"candidates": [{"content": {"parts": [{"text": "Sure"}],"role": "model"},"index": 0}],"promptFeedback": {"safetyRatings": [{"category": "HARM_CATEGORY_HARASSMENT","probability": "NEGLIGIBLE"}]},"modelVersion": "gemini-2.0-flash"}`
	gUsage    = `{"candidates": [{"content": {"parts": [{"text": ""}],"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": {"promptTokenCount": 1200,"candidatesTokenCount": 40,"totalTokenCount": 1290,"cachedContentTokenCount": 1024,"thoughtsTokenCount": 50,"cacheTokensDetails": [{"modality": "TEXT","tokenCount": 1024}]},"modelVersion": "gemini-2.5-pro","responseId": "tKqAaMzXFoWe1MkP5rW4yQo"}`
	gEmpty    = `{"candidates": [{"content": {"role": "model"},"index": 0}],"modelVersion": "gemini-2.5-flash","responseId": "uKqAaMzXFoWe1MkP5rW4yQo"}`
	gTwoA     = `{"candidates": [{"content": {"parts": [{"text": "A"}],"role": "model"},"index": 0},{"content": {"parts": [{"text": "B"}],"role": "model"},"index": 1}],"modelVersion": "gemini-2.5-flash"}`
	gTwoHalf  = `{"candidates": [{"content": {"parts": [{"text": "!"}],"role": "model"},"finishReason": "STOP","index": 0},{"content": {"parts": [{"text": "b"}],"role": "model"},"index": 1}],"modelVersion": "gemini-2.5-flash"}`
	gTwoEnd   = `{"candidates": [{"content": {"parts": [{"text": "!"}],"role": "model"},"finishReason": "STOP","index": 1}],"modelVersion": "gemini-2.5-flash"}`
	gMaxTok   = `{"candidates": [{"content": {"parts": [{"text": "The"}],"role": "model"},"finishReason": "MAX_TOKENS","index": 0}],"usageMetadata": {"promptTokenCount": 4,"candidatesTokenCount": 1,"totalTokenCount": 5},"modelVersion": "gemini-2.5-flash"}`
	gUnspec   = `{"candidates": [{"content": {"parts": [{"text": ""}],"role": "model"},"finishReason": "FINISH_REASON_UNSPECIFIED","index": 0}],"modelVersion": "gemini-2.5-flash"}`
	gErr503   = `{"error": {"code": 503,"message": "The model is overloaded. Please try again later.","status": "UNAVAILABLE"}}`
	gErr500   = `{"error": {"code": 500,"message": "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting","status": "INTERNAL"}}`
)

// geminiSSE renders chunks as Google does: data lines, CRLF.
func geminiSSE(datas ...string) string {
	var b strings.Builder
	for _, d := range datas {
		b.WriteString("data: ")
		b.WriteString(d)
		b.WriteString("\r\n\r\n")
	}
	return b.String()
}

// The test chunks are the shapes the SDK decodes.
func TestGeminiChunkShapes(t *testing.T) {
	for _, data := range []string{gText1, gText2, gThought, gSigOnly, gFnCall, gFnCall2, gImage, gCode, gSafety, gBlocked, gFeedback, gUsage, gEmpty, gTwoA, gTwoHalf, gTwoEnd, gMaxTok, gUnspec} {
		var r genai.GenerateContentResponse
		if err := json.Unmarshal([]byte(data), &r); err != nil {
			t.Fatalf("%.60s: %v", data, err)
		}
		if len(r.Candidates) == 0 && r.PromptFeedback == nil {
			t.Errorf("%.60s: decodes to nothing", data)
		}
	}
	var r genai.GenerateContentResponse
	_ = json.Unmarshal([]byte(gBlocked), &r)
	if r.PromptFeedback.BlockReason != genai.BlockedReasonProhibitedContent || len(r.Candidates) != 0 {
		t.Errorf("blocked: %+v", r.PromptFeedback)
	}
	_ = json.Unmarshal([]byte(gUsage), &r)
	if u := r.UsageMetadata; u.PromptTokenCount != 1200 || u.CandidatesTokenCount != 40 || u.CachedContentTokenCount != 1024 || u.ThoughtsTokenCount != 50 ||
		r.Candidates[0].FinishReason != genai.FinishReasonStop || r.ModelVersion != "gemini-2.5-pro" {
		t.Errorf("usage: %+v", r.UsageMetadata)
	}
	_ = json.Unmarshal([]byte(gThought), &r)
	if p := r.Candidates[0].Content.Parts[0]; !p.Thought || p.Text == "" {
		t.Errorf("thought part %+v", p)
	}
	_ = json.Unmarshal([]byte(gFnCall), &r)
	if p := r.Candidates[0].Content.Parts[0]; p.FunctionCall == nil || p.FunctionCall.Name != "get_weather" || len(p.ThoughtSignature) == 0 {
		t.Errorf("function call part %+v", p)
	}
	var e struct{ Error genai.APIError }
	if err := json.Unmarshal([]byte(gErr503), &e); err != nil || e.Error.Code != 503 || e.Error.Status != "UNAVAILABLE" {
		t.Errorf("error chunk: %+v %v", e, err)
	}
}

func TestGeminiChunkClass(t *testing.T) {
	tests := []struct {
		name   string
		data   string
		want   wire.EventClass
		by     string
		text   string // raw JSON string taken for the reject check
		errHas string
		done   bool // a fresh geminiStream is done after this chunk
	}{
		{name: "text", data: gText1, want: wire.EvOutput, by: "text", text: `"Hi"`},
		{name: "text with STOP", data: gText2, want: wire.EvFinish, by: "text", text: `" there! How can I help you today?"`, done: true},
		{name: "thought text", data: gThought, want: wire.EvOutput, by: "thought"},
		{name: "thought signature, empty text", data: gSigOnly, want: wire.EvPrelude},
		{name: "function call with STOP", data: gFnCall, want: wire.EvFinish, by: "functionCall", done: true},
		{name: "function call", data: gFnCall2, want: wire.EvOutput, by: "functionCall"},
		{name: "image", data: gImage, want: wire.EvOutput, by: "inlineData"},
		{name: "executable code", data: gCode, want: wire.EvOutput, by: "executableCode"},
		{name: "code result", data: `{"candidates":[{"content":{"parts":[{"codeExecutionResult":{"outcome":"OUTCOME_OK","output":"4\n"}}]}}]}`, want: wire.EvOutput, by: "codeExecutionResult"},
		{name: "SAFETY finish without content", data: gSafety, want: wire.EvFinish, by: "finishReason", done: true},
		{name: "MAX_TOKENS", data: gMaxTok, want: wire.EvFinish, by: "text", text: `"The"`, done: true},
		{name: "blocked prompt", data: gBlocked, want: wire.EvFinish, by: "prompt_feedback", done: true},
		{name: "blocked, empty candidates", data: `{"candidates":[],"promptFeedback":{"blockReason":"SAFETY"}}`, want: wire.EvFinish, by: "prompt_feedback", done: true},
		{name: "unspecified block reason", data: `{"promptFeedback":{"blockReason":"BLOCKED_REASON_UNSPECIFIED"}}`, want: wire.EvPrelude},
		{name: "feedback without a block, with text", data: gFeedback, want: wire.EvOutput, by: "text", text: `"Sure"`},
		{name: "empty text with STOP", data: gUsage, want: wire.EvFinish, by: "finishReason", done: true},
		{name: "unspecified finish is a checkpoint", data: gUnspec, want: wire.EvPrelude},
		{name: "no parts", data: gEmpty, want: wire.EvPrelude},
		{name: "usage only", data: `{"usageMetadata": {"promptTokenCount": 5,"totalTokenCount": 5},"modelVersion": "gemini-2.5-flash"}`, want: wire.EvPrelude},
		{name: "two candidates", data: gTwoA, want: wire.EvOutput, by: "text", text: `"A"`},
		{name: "one of two finished", data: gTwoHalf, want: wire.EvOutput, by: "text", text: `"!"`},
		{name: "text after a thought", data: `{"candidates":[{"content":{"parts":[{"text":"hmm","thought":true},{"text":"Hello"}]}}]}`, want: wire.EvOutput, by: "thought", text: `"Hello"`},
		{name: "thought false is text", data: `{"candidates":[{"content":{"parts":[{"text":"x","thought":false}]}}]}`, want: wire.EvOutput, by: "text", text: `"x"`},
		{name: "escaped keys", data: `{"c\u0061ndidates":[{"content":{"p\u0061rts":[{"t\u0065xt":"x"}]},"finishR\u0065ason":"ST\u004fP"}]}`, want: wire.EvFinish, by: "text", text: `"x"`, done: true},
		{name: "duplicate text, the last counts", data: `{"candidates":[{"content":{"parts":[{"text":"x","text":""}]}}]}`, want: wire.EvPrelude},
		{name: "duplicate candidates, the last counts", data: `{"candidates":[{"content":{"parts":[{"text":"x"}]}}],"candidates":[]}`, want: wire.EvPrelude},
		{name: "error chunk", data: gErr503, want: wire.EvError, errHas: "The model is overloaded"},
		{name: "error with candidates", data: `{"candidates":[{"content":{"parts":[{"text":"x"}]}}],"error":{"code":500,"message":"boom","status":"INTERNAL"}}`, want: wire.EvError, errHas: "boom"},
		{name: "string error", data: `{"error":"quota"}`, want: wire.EvError, errHas: "quota"},
		{name: "null error", data: `{"error":null,"candidates":[{"content":{"parts":[{"text":"x"}]}}]}`, want: wire.EvOutput, by: "text", text: `"x"`},
		{name: "not JSON", data: `<html>502 Bad Gateway</html>`, want: wire.EvMalformed},
		{name: "truncated", data: gText1[:50], want: wire.EvMalformed},
		{name: "array", data: `[` + gText1 + `]`, want: wire.EvMalformed},
		{name: "candidates not an array", data: `{"candidates":{"content":{}}}`, want: wire.EvMalformed},
		{name: "trailing garbage", data: gText1 + ` x`, want: wire.EvMalformed},
		{name: "null candidates", data: `{"candidates":null}`, want: wire.EvPrelude},
		{name: "empty object", data: `{}`, want: wire.EvPrelude},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs := parseEvents(t, geminiSSE(tt.data))
			if len(evs) != 1 {
				t.Fatalf("%d events", len(evs))
			}
			var st gemini.Stream
			info := gemini.InspectGeminiStream(evs[0], true, &st)
			if info.Class != tt.want || info.By != tt.by || string(info.Text) != tt.text {
				t.Errorf("inspectGemini = %v by %q text %s, want %v by %q text %s", info.Class, info.By, info.Text, tt.want, tt.by, tt.text)
			}
			if without := gemini.InspectGemini(evs[0], false); without.Class != info.Class || without.By != info.By || without.Text != nil {
				t.Errorf("without text: %v %q text %s", without.Class, without.By, without.Text)
			}
			if st.Done() != tt.done {
				t.Errorf("done %v, want %v", st.Done(), tt.done)
			}
			if info.Class != wire.EvError && info.ErrVal != nil {
				t.Errorf("errVal %s on a %v chunk", info.ErrVal, info.Class)
			}
			if msg := wire.UpstreamErrorMessage(info.ErrVal, evs[0].Data); !strings.Contains(msg, tt.errHas) {
				t.Errorf("error message %q, want it to contain %q", msg, tt.errHas)
			}
		})
	}
	// A comment or an empty data line is nothing to a client.
	for _, ev := range parseEvents(t, ": keepalive\r\n\r\ndata:\r\n\r\n") {
		if info := gemini.InspectGemini(ev, true); info.Class != wire.EvPrelude {
			t.Errorf("%q: %v", ev.Raw, info.Class)
		}
	}
}

// geminiOutcome is what the gate and the relay learn from a stream.
type geminiOutcome struct {
	classes  string // one letter per chunk
	decided  int    // index of the first chunk that is not prelude, -1 if none
	class    wire.EventClass
	by, text string
	done     bool // every candidate finished (or the prompt was blocked) by the end
	u        wire.Usage
	err      error
}

func geminiRead(r io.Reader) geminiOutcome {
	out := geminiOutcome{decided: -1}
	rd := sse.NewReader(r, 1<<20)
	var st gemini.Stream
	for i := 0; ; i++ {
		ev, err := rd.Next()
		if err != nil {
			if err != io.EOF {
				out.err = err
			}
			out.done = st.Done()
			return out
		}
		info := gemini.InspectGeminiStream(ev, true, &st)
		out.classes += info.Class.String()[:1]
		if out.decided < 0 && info.Class != wire.EvPrelude {
			out.decided, out.class, out.by = i, info.Class, info.By
			out.text = string(jsonscan.AppendString(nil, info.Text))
		}
		gemini.ObserveGeminiEvent(&out.u, ev)
	}
}

// gThoughtN is gThought with another thought's text.
func gThoughtN(n int) string {
	return strings.Replace(gThought, "The user said hi.", fmt.Sprintf("Thought %d of the plan.", n), 1)
}

// Every stream, cut into two reads at every byte offset and read one byte
// at a time, gives the same classes, gate decision, end state and usage as
// read whole, and those are the expected ones.
func TestGeminiGateEverySplit(t *testing.T) {
	tests := []struct {
		name    string
		stream  string
		classes string
		decided int
		class   wire.EventClass
		by      string
		text    string
		done    bool
		u       wire.Usage
	}{
		{
			name:    "text answer",
			stream:  geminiSSE(gText1, gText2),
			classes: "of", decided: 0, class: wire.EvOutput, by: "text", text: "Hi", done: true,
			u: wire.Usage{Input: 5, Output: 34, Model: "gemini-2.5-flash"},
		},
		{
			name:    "thinking first, LF line ends, a comment",
			stream:  sseStream("data: "+gSigOnly, ": ping", "data: "+gThought, "data: "+gText1, "data: "+gText2),
			classes: "ppoof", decided: 2, class: wire.EvOutput, by: "thought", done: true,
			u: wire.Usage{Input: 5, Output: 34, Model: "gemini-2.5-flash"},
		},
		{
			// a run of thoughts is read by the frame the first leaves
			name:    "thoughts in a run, then the answer",
			stream:  geminiSSE(gThought, gThoughtN(2), gThoughtN(3), gText1, gText2),
			classes: "oooof", decided: 0, class: wire.EvOutput, by: "thought", done: true,
			u: wire.Usage{Input: 5, Output: 34, Model: "gemini-2.5-flash"},
		},
		{
			name:    "cut in the thoughts",
			stream:  geminiSSE(gThought, gThoughtN(2), gThoughtN(3)),
			classes: "ooo", decided: 0, class: wire.EvOutput, by: "thought",
			u: wire.Usage{Input: 5, Output: 24, Model: "gemini-2.5-flash"},
		},
		{
			name:    "tool call",
			stream:  geminiSSE(gFnCall),
			classes: "f", decided: 0, class: wire.EvFinish, by: "functionCall", done: true,
			u: wire.Usage{Input: 61, Output: 79, Model: "gemini-2.5-flash"},
		},
		{
			name:    "blocked prompt",
			stream:  geminiSSE(gBlocked),
			classes: "f", decided: 0, class: wire.EvFinish, by: "prompt_feedback", done: true,
			u: wire.Usage{Input: 8, Model: "gemini-2.5-flash"},
		},
		{
			name:    "cut before finishReason",
			stream:  geminiSSE(gText1),
			classes: "o", decided: 0, class: wire.EvOutput, by: "text", text: "Hi",
			u: wire.Usage{Input: 5, Output: 25, Model: "gemini-2.5-flash"},
		},
		{
			name:    "two candidates finishing in turn",
			stream:  geminiSSE(gTwoA, gTwoHalf, gTwoEnd),
			classes: "oof", decided: 0, class: wire.EvOutput, by: "text", text: "A", done: true,
			u: wire.Usage{Model: "gemini-2.5-flash"},
		},
		{
			name:    "two candidates, one unfinished at the end",
			stream:  geminiSSE(gTwoA, gTwoHalf),
			classes: "oo", decided: 0, class: wire.EvOutput, by: "text", text: "A",
			u: wire.Usage{Model: "gemini-2.5-flash"},
		},
		{
			name:    "a checkpoint finish is not the end",
			stream:  geminiSSE(gText1, gUnspec),
			classes: "op", decided: 0, class: wire.EvOutput, by: "text", text: "Hi",
			u: wire.Usage{Input: 5, Output: 25, Model: "gemini-2.5-flash"},
		},
		{
			name:    "usage after the finish",
			stream:  geminiSSE(gMaxTok, `{"usageMetadata": {"promptTokenCount": 4,"candidatesTokenCount": 2,"totalTokenCount": 6},"modelVersion": "gemini-2.5-flash"}`),
			classes: "fp", decided: 0, class: wire.EvFinish, by: "text", text: "The", done: true,
			u: wire.Usage{Input: 4, Output: 2, Model: "gemini-2.5-flash"},
		},
		{
			name:    "error before output",
			stream:  geminiSSE(gSigOnly, gErr503),
			classes: "pe", decided: 1, class: wire.EvError,
			u: wire.Usage{Model: "gemini-2.5-flash"},
		},
		{
			name:    "HTML for a first chunk",
			stream:  "data: <html>502</html>\r\n\r\n" + geminiSSE(gText1),
			classes: "mo", decided: 0, class: wire.EvMalformed,
			u: wire.Usage{Input: 5, Output: 25, Model: "gemini-2.5-flash"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := geminiOutcome{classes: tt.classes, decided: tt.decided, class: tt.class, by: tt.by, text: tt.text, done: tt.done, u: tt.u}
			if got := geminiRead(strings.NewReader(tt.stream)); got != want {
				t.Fatalf("whole stream:\n got %+v\nwant %+v", got, want)
			}
			for cut := 0; cut <= len(tt.stream); cut++ {
				if got := geminiRead(&ssetest.SplitReader{Data: []byte(tt.stream), Cuts: []int{cut}}); got != want {
					t.Fatalf("cut at %d:\n got %+v\nwant %+v", cut, got, want)
				}
			}
			if got := geminiRead(iotest.OneByteReader(strings.NewReader(tt.stream))); got != want {
				t.Fatalf("one byte at a time:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

// The gate commits a Gemini stream at its first output, holds the
// prelude, and fails it on an error chunk: the gate's own rules applied
// to inspectGemini's classes (it cannot run the gate itself until the
// dialect is wired in, so this mirrors gate.feed's switch).
func TestGeminiGateDecisions(t *testing.T) {
	tests := []struct {
		name   string
		stream string
		want   stream.GateDecision
		at     int
	}{
		{"text commits", geminiSSE(gSigOnly, gText1, gText2), stream.GateCommit, 1},
		{"blocked prompt commits", geminiSSE(gBlocked), stream.GateCommit, 0},
		{"safety finish commits", geminiSSE(gSafety), stream.GateCommit, 0},
		{"error chunk fails", geminiSSE(gSigOnly, gErr500), stream.GateFail, 1},
		{"malformed fails", "data: {\"candidates\": [\r\n\r\n", stream.GateFail, 0},
		{"usage only holds", geminiSSE(`{"usageMetadata":{"promptTokenCount":3}}`), stream.GateHold, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, at := stream.GateHold, 0
			for i, ev := range parseEvents(t, tt.stream) {
				switch gemini.InspectGemini(ev, true).Class {
				case wire.EvError, wire.EvMalformed, wire.EvTerminal:
					got = stream.GateFail
				case wire.EvOutput, wire.EvFinish:
					got = stream.GateCommit
				}
				if at = i; got != stream.GateHold {
					break
				}
			}
			if got != tt.want || at != tt.at {
				t.Errorf("%v at chunk %d, want %v at %d", got, at, tt.want, tt.at)
			}
		})
	}
}

func TestGeminiUsage(t *testing.T) {
	tests := []struct {
		name   string
		chunks []string
		want   wire.Usage
	}{
		{"running totals, the last counts; thoughts are output", []string{gThought, gText1, gText2}, wire.Usage{Input: 5, Output: 34, Model: "gemini-2.5-flash"}},
		{"cached content", []string{gUsage}, wire.Usage{Input: 1200, Output: 90, CacheRead: 1024, Model: "gemini-2.5-pro"}},
		{"tool use prompt is input", []string{`{"usageMetadata":{"promptTokenCount":10,"toolUsePromptTokenCount":90,"candidatesTokenCount":3},"modelVersion":"gemini-2.5-flash"}`}, wire.Usage{Input: 100, Output: 3, Model: "gemini-2.5-flash"}},
		{"a chunk with only the prompt keeps the output", []string{gText2, `{"usageMetadata":{"promptTokenCount":7}}`}, wire.Usage{Input: 7, Output: 34, Model: "gemini-2.5-flash"}},
		{"the first model stays", []string{gText1, `{"modelVersion":"other","usageMetadata":{"promptTokenCount":5}}`}, wire.Usage{Input: 5, Output: 25, Model: "gemini-2.5-flash"}},
		{"usage words in text are not usage", []string{`{"candidates":[{"content":{"parts":[{"text":"\"usageMetadata\": {\"promptTokenCount\": 999}, \"modelVersion\": \"x\""}]}}]}`, gText2}, wire.Usage{Input: 5, Output: 34, Model: "gemini-2.5-flash"}},
		{"usageMetadata not an object", []string{`{"usageMetadata":[1,2],"modelVersion":"m"}`}, wire.Usage{Model: "m"}},
		{"none", []string{gEmpty}, wire.Usage{Model: "gemini-2.5-flash"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var u wire.Usage
			for _, e := range parseEvents(t, geminiSSE(tt.chunks...)) {
				gemini.ObserveGeminiEvent(&u, e)
			}
			if u != tt.want {
				t.Errorf("stream usage %+v, want %+v", u, tt.want)
			}
			// The same chunks as the JSON array of a non-SSE stream.
			var ub wire.Usage
			gemini.ObserveGeminiBody(&ub, []byte("["+strings.Join(tt.chunks, ",\r\n")+"]"))
			if ub != tt.want {
				t.Errorf("array body usage %+v, want %+v", ub, tt.want)
			}
		})
	}
	var u wire.Usage
	gemini.ObserveGeminiBody(&u, []byte(gUsage))
	if want := (wire.Usage{Input: 1200, Output: 90, CacheRead: 1024, Model: "gemini-2.5-pro"}); u != want {
		t.Errorf("object body usage %+v, want %+v", u, want)
	}
	long := `{"modelVersion":"` + strings.Repeat("m", 2*wire.MaxModelLen) + `"}`
	u = wire.Usage{}
	gemini.ObserveGeminiBody(&u, []byte(long))
	if len(u.Model) != wire.MaxModelLen {
		t.Errorf("model of %d bytes", len(u.Model))
	}
	var nilU *wire.Usage
	gemini.ObserveGeminiBody(nilU, []byte(gUsage))
	gemini.ObserveGeminiEvent(nilU, parseEvents(t, geminiSSE(gUsage))[0])
}

func TestGeminiCheckBody(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		reason string
		errHas string
	}{
		{"answer", gText2, "", ""},
		{"tool call", gFnCall, "", ""},
		{"safety finish, no content", gSafety, "", ""},
		{"blocked prompt is the truth", gBlocked, "", ""},
		{"array", "[" + gText1 + ",\r\n" + gText2 + "]", "", ""},
		{"array of a blocked prompt", "[" + gBlocked + "]", "", ""},
		{"array with a usage-only element", "[" + gText1 + `,{"usageMetadata":{"promptTokenCount":1}}]`, "", ""},
		{"error", gErr503, "error_body", "The model is overloaded"},
		{"error in an array", "[" + gText1 + "," + gErr500 + "]", "error_body", "An internal error"},
		{"no candidates, no feedback", `{"usageMetadata":{"promptTokenCount":5},"modelVersion":"gemini-2.5-flash"}`, "empty_output", "no candidates"},
		{"empty candidates", `{"candidates":[]}`, "empty_output", "no candidates"},
		{"empty array", `[]`, "empty_output", "no candidates"},
		{"array of usage only", `[{"usageMetadata":{}}]`, "empty_output", "no candidates"},
		{"not JSON", `<html>oops</html>`, "malformed_body", "not a JSON object"},
		{"truncated", gText2[:60], "malformed_body", "not valid JSON"},
		{"truncated array", "[" + gText1, "malformed_body", "not valid JSON"},
		{"array of strings", `["x"]`, "malformed_body", "not a JSON object"},
		{"trailing garbage", gText2 + "x", "malformed_body", "not valid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reason, err := gemini.CheckGeminiBody([]byte(tt.body))
			if reason != tt.reason || (err != nil) != (tt.reason != "") || err != nil && !strings.Contains(err.Error(), tt.errHas) {
				t.Errorf("checkGeminiBody = %q, %v; want %q containing %q", reason, err, tt.reason, tt.errHas)
			}
		})
	}
}

func TestGeminiBodyReject(t *testing.T) {
	reject := [][]byte{[]byte("I CANNOT help")}
	tests := []struct {
		name string
		body string
		fail bool
	}{
		{"text", `{"candidates":[{"content":{"parts":[{"text":"Sorry, I cannot\u0020help."}]}}]}`, true},
		{"split over parts", `{"candidates":[{"content":{"parts":[{"text":"I can"},{"text":"not help"}]}}]}`, true},
		{"split over array chunks", `[{"candidates":[{"content":{"parts":[{"text":"I can"}]}}]},{"candidates":[{"content":{"parts":[{"text":"not help"}]}}]}]`, true},
		{"second candidate", `{"candidates":[{"content":{"parts":[{"text":"ok"}]}},{"content":{"parts":[{"text":"i cannot help"}]}}]}`, true},
		{"not across candidates", `{"candidates":[{"content":{"parts":[{"text":"I can"}]}},{"content":{"parts":[{"text":"not help"}]}}]}`, false},
		{"clean", gText2, false},
		{"thought text", `{"candidates":[{"content":{"parts":[{"text":"I cannot help","thought":true},{"text":"Sure"}]}}]}`, false},
		{"phrase only in a key", `{"I cannot help":1,"candidates":[]}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := gemini.CheckGeminiBodyReject([]byte(tt.body), reject); (err != nil) != tt.fail {
				t.Errorf("checkGeminiBodyReject = %v, want failure %v", err, tt.fail)
			}
		})
	}
	if err := gemini.CheckGeminiBodyReject([]byte(tests[0].body), nil); err != nil {
		t.Errorf("no phrases: %v", err)
	}
}

func TestGeminiPath(t *testing.T) {
	tests := []struct {
		path, model, method string
	}{
		{"/v1beta/models/gemini-2.5-flash:generateContent", "gemini-2.5-flash", "generateContent"},
		{"/v1beta/models/gemini-2.5-pro:streamGenerateContent", "gemini-2.5-pro", "streamGenerateContent"},
		{"/v1/models/gemini-2.0-flash-001:countTokens", "gemini-2.0-flash-001", "countTokens"},
		{"/v1beta/models/gemini-2.5-flash-preview-05-20:generateContent", "gemini-2.5-flash-preview-05-20", "generateContent"},
		{"/v1beta/models/learnlm_2.0@001:generateContent", "learnlm_2.0@001", "generateContent"},
		// Refused: not a model call, or a model that is not one path segment.
		{"/v1beta/models/gemini-2.5-flash", "", ""},
		{"/v1beta/models/gemini-2.5-flash:embedContent", "", ""},
		{"/v1beta/models/gemini-2.5-flash:generateContent/", "", ""},
		{"/v1beta/models/:generateContent", "", ""},
		{"/v1beta/models/a/b:generateContent", "", ""},
		{"/v1beta/models/..:generateContent", "", ""},
		{"/v1beta/models/.:generateContent", "", ""},
		{"/v1beta/models/.hidden:generateContent", "", ""},
		{"/v1beta/models/a%2Fb:generateContent", "", ""},
		{"/v1beta/models/a%2fb:generateContent", "", ""},
		{"/v1beta/models/%2E%2E:generateContent", "", ""},
		{"/v1beta/models/a?b:generateContent", "", ""},
		{"/v1beta/models/a#b:generateContent", "", ""},
		{"/v1beta/models/a\\b:generateContent", "", ""},
		{"/v1beta/models/a b:generateContent", "", ""},
		{"/v1beta/models/a\x00b:generateContent", "", ""},
		{"/v1beta/models/a:b:generateContent", "", ""},
		{"/v1beta/models/gémini:generateContent", "", ""},
		{"/v1beta/models/" + strings.Repeat("m", wire.MaxModelLen+1) + ":generateContent", "", ""},
		{"/v1beta/tunedModels/x:generateContent", "", ""},
		{"/v2/models/x:generateContent", "", ""},
		{"/x/v1beta/models/gemini:generateContent", "", ""},
		{"v1beta/models/gemini:generateContent", "", ""},
		{"/v1beta/models/gemini:GENERATECONTENT", "", ""},
	}
	for _, tt := range tests {
		model, method, ok := gemini.Path(tt.path)
		if model != tt.model || method != tt.method || ok != (tt.model != "") {
			t.Errorf("geminiPath(%q) = %q, %q, %v; want %q, %q", tt.path, model, method, ok, tt.model, tt.method)
		}
	}
	if !gemini.IsStream("streamGenerateContent") || gemini.IsStream("generateContent") {
		t.Error("geminiIsStream")
	}
	rewrites := []struct{ path, model, want string }{
		{"/v1beta/models/gemini-2.5-flash:streamGenerateContent", "gemini-2.5-pro", "/v1beta/models/gemini-2.5-pro:streamGenerateContent"},
		{"/v1/models/a:countTokens", "b", "/v1/models/b:countTokens"},
		{"/v1beta/models/a:generateContent", "../admin", "/v1beta/models/a:generateContent"},
		{"/v1beta/models/a:generateContent", "x/y", "/v1beta/models/a:generateContent"},
		{"/v1beta/models/a:generateContent", "x%2Fy", "/v1beta/models/a:generateContent"},
		{"/v1beta/models/a:generateContent", "", "/v1beta/models/a:generateContent"},
		{"/v1/messages", "b", "/v1/messages"},
	}
	for _, tt := range rewrites {
		if got := gemini.RewritePath(tt.path, tt.model); got != tt.want {
			t.Errorf("geminiRewritePath(%q, %q) = %q, want %q", tt.path, tt.model, got, tt.want)
		}
	}
}

func TestGeminiQuery(t *testing.T) {
	sse := map[string]bool{
		"alt=sse":               true,
		"key=k&alt=sse":         true,
		"alt=SSE":               true,
		"%61lt=sse":             true,
		"alt=%73se":             true,
		"alt=json":              false,
		"":                      false,
		"salt=sse":              false,
		"alt=sse2":              false,
		"alt=json&alt=sse":      false,
		"alt=sse&alt=json":      true,
		"alt=%zz&alt=sse":       false,
		"x=alt%3Dsse":           false,
		"alt":                   false,
		"$alt=sse&x=1":          false,
		"key=alt=sse":           false,
		"prettyPrint=0&alt=sse": true,
	}
	for q, want := range sse {
		if got := gemini.IsSSE(q); got != want {
			t.Errorf("geminiIsSSE(%q) = %v, want %v", q, got, want)
		}
	}
	strip := []struct{ q, want string }{
		{"alt=sse&key=AIzaSyA", "alt=sse"},
		{"key=AIzaSyA&alt=sse", "alt=sse"},
		{"a=1&key=x&b=2&key=y&c=3", "a=1&b=2&c=3"},
		{"k%65y=x&alt=sse", "alt=sse"},
		{"key=x", ""},
		{"key", ""},
		{"alt=sse", "alt=sse"},
		{"", ""},
		{"monkey=1&keys=2&key_=3&Key=4", "monkey=1&keys=2&key_=3&Key=4"},
		{"a=%2F%3f&key=k&b=x+y", "a=%2F%3f&b=x+y"},
		{"a=1&&key=k&b=2", "a=1&&b=2"},
		{"&a=1", "&a=1"},
		{"a=key", "a=key"},
		{"%zz=1&key=2", "%zz=1"},
	}
	for _, tt := range strip {
		if got := wire.StripKeyParam(tt.q); got != tt.want {
			t.Errorf("StripKeyParam(%q) = %q, want %q", tt.q, got, tt.want)
		}
	}
	h := http.Header{}
	if got := gemini.ClientKey(h, "alt=sse&key=AIza%2Bq"); got != "AIza+q" {
		t.Errorf("query key %q", got)
	}
	if got := gemini.ClientKey(h, "key=&key=second"); got != "second" {
		t.Errorf("second query key %q", got)
	}
	if got := gemini.ClientKey(h, "alt=sse"); got != "" {
		t.Errorf("no key: %q", got)
	}
	h.Set("X-Goog-Api-Key", " AIzaHeader ")
	if got := gemini.ClientKey(h, "key=AIzaQuery"); got != "AIzaHeader" {
		t.Errorf("header key %q", got)
	}
}

func TestGeminiCachedContent(t *testing.T) {
	for body, want := range map[string]string{
		`{"contents":[],"cachedContent":"cachedContents/abc123"}`:                                "cachedContents/abc123",
		`{"cachedContent":"cachedContents/a","cachedContent":"cachedContents/b"}`:                "cachedContents/b",
		`{"cachedC\u006fntent":"cachedContents/esc"}`:                                            "cachedContents/esc",
		`{"cachedContent":null}`:                                                                 "",
		`{"cachedContent":""}`:                                                                   "",
		`{"cachedContent":"a b"}`:                                                                "",
		`{"cachedContent":"a\nb"}`:                                                               "",
		`{"cachedContent":1}`:                                                                    "",
		`{"cachedContent":"` + strings.Repeat("c", gemini.MaxCachedContentLen+1) + `"}`:          "",
		`{"contents":[{"parts":[{"text":"cachedContent"}]}],"config":{"cachedContent":"inner"}}`: "",
		`{"cachedContent":"cachedContents/x"`:                                                    "",
	} {
		if got := gemini.CachedContent([]byte(body), nil); got != want {
			t.Errorf("geminiCachedContent(%.60s) = %q, want %q", body, got, want)
		}
	}
}

const (
	gErr429 = `{
  "error": {
    "code": 429,
    "message": "You exceeded your current quota, please check your plan and billing details.",
    "status": "RESOURCE_EXHAUSTED",
    "details": [
      {
        "@type": "type.googleapis.com/google.rpc.QuotaFailure",
        "violations": [{"quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier","quotaDimensions": {"location": "global","model": "gemini-2.0-flash"},"quotaValue": "15"}]
      },
      {
        "@type": "type.googleapis.com/google.rpc.Help",
        "links": [{"description": "Learn more about Gemini API quotas","url": "https://ai.google.dev/gemini-api/docs/rate-limits"}]
      },
      {
        "@type": "type.googleapis.com/google.rpc.RetryInfo",
        "retryDelay": "43s"
      }
    ]
  }
}`
	gErr404     = `{"error": {"code": 404,"message": "models/gemini-9.0-pro is not found for API version v1beta, or is not supported for generateContent. Call ListModels to see the list of available models and their supported methods.","status": "NOT_FOUND"}}`
	gErrVertex  = `{"error": {"code": 404,"message": "Publisher Model ` + "`projects/p/locations/us-central1/publishers/google/models/gemini-9`" + ` was not found or your project does not have access to it.","status": "NOT_FOUND"}}`
	gErrKey     = `{"error": {"code": 400,"message": "API key not valid. Please pass a valid API key.","status": "INVALID_ARGUMENT","details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo","reason": "API_KEY_INVALID","domain": "googleapis.com","metadata": {"service": "generativelanguage.googleapis.com"}},{"@type": "type.googleapis.com/google.rpc.LocalizedMessage","locale": "en-US","message": "API key not valid. Please pass a valid API key."}]}}`
	gErrArg     = `{"error": {"code": 400,"message": "* GenerateContentRequest.contents: contents is not specified\n","status": "INVALID_ARGUMENT"}}`
	gErrLong    = `{"error": {"code": 400,"message": "The input token count (1196265) exceeds the maximum number of tokens allowed (1048575).","status": "INVALID_ARGUMENT"}}`
	gErrPre     = `{"error": {"code": 400,"message": "User location is not supported for the API use.","status": "FAILED_PRECONDITION"}}`
	gErr504     = `{"error": {"code": 504,"message": "The request timed out. Please try again.","status": "DEADLINE_EXCEEDED"}}`
	gErr404Path = `{"error": {"code": 404,"message": "Requested entity was not found.","status": "NOT_FOUND"}}`
)

func TestGeminiClassify(t *testing.T) {
	tests := []struct {
		name        string
		status      int
		body        string
		want        wire.FailClass
		passThrough wire.FailClass
		request     bool
	}{
		{"quota", 429, gErr429, wire.ClassRateLimited, wire.ClassClientKey, false},
		{"overloaded", 503, gErr503, wire.ClassOverloaded, wire.ClassOverloaded, false},
		{"internal", 500, gErr500, wire.ClassStatus5xx, wire.ClassStatus5xx, false},
		{"deadline", 504, gErr504, wire.ClassStatus5xx, wire.ClassStatus5xx, false},
		{"model not found", 404, gErr404, wire.ClassModelNotFound, wire.ClassClientKey, false},
		{"vertex model not found", 404, gErrVertex, wire.ClassModelNotFound, wire.ClassClientKey, false},
		{"other 404", 404, gErr404Path, wire.ClassRequest, wire.ClassClientKey, true},
		{"bad key", 400, gErrKey, wire.ClassAuth, wire.ClassClientKey, false},
		{"bad argument", 400, gErrArg, wire.ClassRequest, wire.ClassRequest, true},
		{"too long", 400, gErrLong, wire.ClassRequest, wire.ClassRequest, true},
		{"failed precondition", 400, gErrPre, wire.ClassRequest, wire.ClassRequest, true},
		{"permission", 403, `{"error":{"code":403,"message":"Method doesn't allow unregistered callers","status":"PERMISSION_DENIED"}}`, wire.ClassAuth, wire.ClassClientKey, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := gemini.Classify(tt.status, []byte(tt.body), false); got != tt.want {
				t.Errorf("own key: %v, want %v", got, tt.want)
			}
			if got := gemini.Classify(tt.status, []byte(tt.body), true); got != tt.passThrough {
				t.Errorf("pass-through key: %v, want %v", got, tt.passThrough)
			}
			if got := gemini.RequestLevel(tt.status, []byte(tt.body)); got != tt.request {
				t.Errorf("geminiRequestLevel = %v, want %v", got, tt.request)
			}
			var e struct{ Error genai.APIError }
			if err := json.Unmarshal([]byte(tt.body), &e); err != nil || e.Error.Code != tt.status {
				t.Errorf("not Google's error shape: %+v %v", e, err)
			}
		})
	}
	if !gemini.PromptTooLong([]byte(gErrLong)) || gemini.PromptTooLong([]byte(gErrArg)) {
		t.Error("geminiPromptTooLong")
	}
}

func TestGeminiRetryDelay(t *testing.T) {
	info := func(delay string) string {
		return `{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.Help"},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":` + delay + `}]}}`
	}
	tests := []struct {
		body string
		want time.Duration
		ok   bool
	}{
		{gErr429, 43 * time.Second, true},
		{info(`"2s"`), 2 * time.Second, true},
		{info(`"0.5s"`), 500 * time.Millisecond, true},
		{info(`"1.000000001s"`), 1001 * time.Millisecond, true},
		{info(`"0s"`), 0, true},
		{info(`"999999999s"`), limit.MaxRetryAfter, true},
		{info(`"2"`), 0, false},
		{info(`"-1s"`), 0, false},
		{info(`" 2s"`), 0, false},
		{info(`"2ms"`), 0, false},
		{info(`"s"`), 0, false},
		{info(`2`), 0, false},
		{info(`{"seconds":2}`), 0, false},
		{`{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","retryDelay":"2s"}]}}`, 0, false},
		{gErr503, 0, false},
		{`not json`, 0, false},
	}
	for _, tt := range tests {
		d, ok := gemini.RetryDelay([]byte(tt.body))
		if d != tt.want || ok != tt.ok {
			t.Errorf("geminiRetryDelay(%.80s) = %v, %v; want %v, %v", tt.body, d, ok, tt.want, tt.ok)
		}
	}
}

func geminiTestClient(t *testing.T, srv *httptest.Server) *genai.Client {
	t.Helper()
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey:      "k",
		Backend:     genai.BackendGeminiAPI,
		HTTPClient:  srv.Client(),
		HTTPOptions: genai.HTTPOptions{BaseURL: srv.URL},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// An error before commit is Google's error body: the SDK returns an
// APIError with its code, status and message.
func TestGeminiErrorJSON(t *testing.T) {
	for _, tc := range []struct {
		status int
		want   string
	}{
		{400, "INVALID_ARGUMENT"}, {401, "UNAUTHENTICATED"}, {403, "PERMISSION_DENIED"}, {404, "NOT_FOUND"},
		{429, "RESOURCE_EXHAUSTED"}, {500, "INTERNAL"}, {502, "UNAVAILABLE"}, {503, "UNAVAILABLE"}, {504, "DEADLINE_EXCEEDED"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(tc.status)
			_, _ = w.Write(gemini.ErrorJSON(tc.status, "every provider failed"))
		}))
		_, err := geminiTestClient(t, srv).Models.GenerateContent(context.Background(), "gemini-2.5-flash", genai.Text("hi"), nil)
		srv.Close()
		var apiErr genai.APIError
		if !errors.As(err, &apiErr) {
			t.Fatalf("%d: error %v (%T), want genai.APIError", tc.status, err, err)
		}
		if apiErr.Code != tc.status || apiErr.Status != tc.want || apiErr.Message != "every provider failed" {
			t.Errorf("%d: SDK error %+v, want status %s", tc.status, apiErr, tc.want)
		}
	}
	// The proxy's own error body is an error body to the proxy too.
	if reason, _ := gemini.CheckGeminiBody(gemini.ErrorJSON(503, "x")); reason != "error_body" {
		t.Errorf("own error body: %q", reason)
	}
}

// What the genai SDK's GenerateContentStream reports for each way a
// committed stream can end. It raises an error for a data line whose JSON
// has a top-level "error" (the proxy's error chunk) and for a broken
// transport; a stream that just ends, finishReason or not, is a clean end
// to it. So the relay must end a cut stream with the error chunk (or an
// aborted connection), never a clean close.
func TestGeminiErrorEventSDK(t *testing.T) {
	head := geminiSSE(gText1)
	ours := string(gemini.ErrorEvent(http.StatusBadGateway, "the upstream ended the stream before it was complete"))
	tests := []struct {
		name    string
		tail    string
		abort   bool
		wantErr string // "" for a clean end
		chunks  int
		status  string
	}{
		{"finished", geminiSSE(gText2), false, "", 2, ""},
		{"the proxy's error chunk", ours, false, "the upstream ended the stream before it was complete", 1, "UNAVAILABLE"},
		{"an upstream error chunk", geminiSSE(gErr503), false, "The model is overloaded", 1, "UNAVAILABLE"},
		{"a clean end before finishReason is no SDK error", "", false, "", 1, ""},
		{"an aborted connection", "", true, "unexpected EOF", 1, ""},
		// The SDK reads every non-blank line that is not data as a chunk:
		// a comment or an event name (keepalives other dialects get) breaks
		// a Gemini client, so the proxy must never send one.
		{"an SSE comment is an SDK error", ": keepalive\r\n\r\n" + geminiSSE(gText2), false, "invalid stream chunk", 1, ""},
		{"an event name is an SDK error", "event: error\r\n" + ours, false, "invalid stream chunk", 1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var requests atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				requests.Add(1)
				if !strings.HasSuffix(r.URL.Path, ":streamGenerateContent") || !gemini.IsSSE(r.URL.RawQuery) {
					t.Errorf("SDK called %s?%s", r.URL.Path, r.URL.RawQuery)
				}
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, head+tt.tail)
				w.(http.Flusher).Flush()
				if tt.abort {
					panic(http.ErrAbortHandler)
				}
			}))
			defer srv.Close()
			n := 0
			var text strings.Builder
			var err error
			for resp, e := range geminiTestClient(t, srv).Models.GenerateContentStream(context.Background(), "gemini-2.5-flash", genai.Text("hi"), nil) {
				if e != nil {
					err = e
					break
				}
				n++
				text.WriteString(resp.Text())
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("stream error %v, want a clean end", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("stream error %v, want one containing %q", err, tt.wantErr)
			}
			var apiErr genai.APIError
			if tt.status != "" && (!errors.As(err, &apiErr) || apiErr.Status != tt.status) {
				t.Errorf("stream error %#v, want an APIError with status %s", err, tt.status)
			}
			if n != tt.chunks || !strings.HasPrefix(text.String(), "Hi") {
				t.Errorf("%d chunks, text %q; want %d starting %q", n, text.String(), tt.chunks, "Hi")
			}
			// Without a continuation token the SDK never resumes a stream
			// on its own: what the proxy sends is the end of it.
			if got := requests.Load(); got != 1 {
				t.Errorf("%d requests, want 1", got)
			}
		})
	}
	// The proxy's own chunk is an error chunk to the proxy too.
	ev := parseEvents(t, ours)[0]
	if info := gemini.InspectGemini(ev, false); info.Class != wire.EvError || !strings.Contains(wire.UpstreamErrorMessage(info.ErrVal, ev.Data), "before it was complete") {
		t.Errorf("own error chunk: %v %q", info.Class, wire.UpstreamErrorMessage(info.ErrVal, ev.Data))
	}
	if !bytes.HasSuffix([]byte(ours), []byte("}\r\n\r\n")) || !strings.HasPrefix(ours, "data: {") {
		t.Errorf("error chunk %q", ours)
	}
}

// A text chunk, what nearly every chunk of a stream is, costs nothing on
// the heap to classify (with the text for the reject check and the end
// state) and to observe for usage, with or without usageMetadata.
func TestGeminiChunkAllocs(t *testing.T) {
	for _, data := range []string{gText1, gText2, gThought, gFnCall2, gSigOnly, gTwoA} {
		ev := parseEvents(t, geminiSSE(data))[0]
		u := wire.Usage{Model: "gemini-2.5-flash"}
		var st gemini.Stream
		allocs := testing.AllocsPerRun(100, func() {
			_ = gemini.InspectGeminiStream(ev, true, &st)
			gemini.ObserveGeminiEvent(&u, ev)
		})
		if allocs != 0 {
			t.Errorf("%.50s: %v allocs per chunk", data, allocs)
		}
	}
}

// BenchmarkGeminiChunk is the per-chunk cost of a Gemini stream: classify
// (with text and the end state) and observe usage.
func BenchmarkGeminiChunk(b *testing.B) {
	ev := parseEvents(b, geminiSSE(gText1))[0]
	u := wire.Usage{Model: "gemini-2.5-flash"}
	var st gemini.Stream
	b.ReportAllocs()
	b.SetBytes(int64(len(ev.Raw)))
	for b.Loop() {
		if gemini.InspectGeminiStream(ev, true, &st).Class != wire.EvOutput {
			b.Fatal("misclassified")
		}
		gemini.ObserveGeminiEvent(&u, ev)
	}
}

// FuzzGeminiChunk feeds arbitrary chunks to the Gemini functions: they
// never panic, the class is the one an encoding/json reading of the chunk
// gives, the text returned is a non-thought text part, and usage, body
// checks and the model stay bounded.
func FuzzGeminiChunk(f *testing.F) {
	for _, d := range []string{gText1, gText2, gThought, gSigOnly, gFnCall, gImage, gCode, gSafety, gBlocked, gFeedback, gUsage, gEmpty, gTwoA, gTwoHalf, gUnspec, gErr503, gErr429,
		`{"c\u0061ndidates":[{"content":{"parts":[{"text":"x"}]}}]}`, `{"candidates":[{"content":{"parts":[{"text":"x","text":""}]}}]}`, `{"candidates":[1,null,[]]}`,
		`{"candidates":[{"index":1.5,"finishReason":"STOP"}]}`, `[1]`, `"x"`, ``, `{"error":null}`, `{"candidates":{}}`,
		geminiPrimer, strings.Replace(geminiPrimer, `"a"`, `"b"`, 1), strings.Replace(geminiPrimer, `"m"`, `"n"`, 1),
		strings.Replace(geminiPrimer, `"r"}`, `"r","modelVersion":"o"}`, 1), strings.Replace(geminiPrimer, `5}`, `5},"x":[}`, 1),
		strings.Replace(geminiPrimer, `,"modelVersion"`, `,"error":{"code":1},"modelVersion"`, 1)} {
		f.Add([]byte(d))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ev := sse.Event{Data: data}
		var st gemini.Stream
		info := gemini.InspectGeminiStream(ev, true, &st)
		want, texts := geminiReferenceClass(data)
		if info.Class != want {
			t.Fatalf("chunk %q: class %v, encoding/json reading says %v", data, info.Class, want)
		}
		// After a chunk that filled the stream's memo (its usage, the
		// frame around its text, what follows its usage), the shortcuts
		// must read the chunk exactly as a fresh walk does.
		var primed gemini.Stream
		gemini.InspectGeminiStream(sse.Event{Data: []byte(geminiPrimer)}, true, &primed)
		if p := gemini.InspectGeminiStream(ev, true, &primed); p.Class != info.Class || p.By != info.By || !bytes.Equal(p.Text, info.Text) ||
			!bytes.Equal(p.ErrVal, info.ErrVal) || p.Counts != info.Counts || !bytes.Equal(p.Model, info.Model) ||
			p.UsageRead != info.UsageRead || !bytes.Equal(p.Usage, info.Usage) || p.Plain != info.Plain {
			t.Fatalf("chunk %q after a primed stream reads %+v, fresh %+v", data, p, info)
		}
		if info.Text != nil {
			got := string(jsonscan.AppendString(nil, info.Text))
			found := false
			for _, s := range texts {
				found = found || s == got
			}
			if !found && utf8.Valid(data) {
				t.Fatalf("text %q is none of %q", got, texts)
			}
		}
		if info.Class != wire.EvError && info.ErrVal != nil {
			t.Fatalf("errVal %s on a %v chunk", info.ErrVal, info.Class)
		}
		_ = wire.UpstreamErrorMessage(info.ErrVal, data)
		var u wire.Usage
		gemini.ObserveGeminiEvent(&u, ev)
		gemini.ObserveGeminiBody(&u, data)
		if len(u.Model) > wire.MaxModelLen {
			t.Fatalf("model of %d bytes", len(u.Model))
		}
		if reason, err := gemini.CheckGeminiBody(data); (reason == "") != (err == nil) {
			t.Fatalf("checkGeminiBody %q %v", reason, err)
		}
		_ = gemini.CheckGeminiBodyReject(data, [][]byte{[]byte("x")})
		if c := gemini.CachedContent(data, nil); len(c) > gemini.MaxCachedContentLen {
			t.Fatalf("cachedContent of %d bytes", len(c))
		}
		if d, ok := gemini.RetryDelay(data); d < 0 || d > limit.MaxRetryAfter || !ok && d != 0 {
			t.Fatalf("retry delay %v %v", d, ok)
		}
		_ = gemini.Classify(400, data, false)
		_ = gemini.Classify(404, data, true)
		s := string(data)
		if model, method, ok := gemini.Path(s); ok && (!gemini.ValidModel(model) || strings.ContainsAny(model, "/?#%\\:") || gemini.RewritePath(s, model) != s || method == "") {
			t.Fatalf("path %q: model %q method %q", s, model, method)
		}
		if q := wire.StripKeyParam(s); gemini.ClientKey(http.Header{}, q) != "" || len(q) > len(s) {
			t.Fatalf("query %q stripped to %q still has a key", s, q)
		}
	})
}

// geminiPrimer is a stream chunk as Gemini writes them, compact: it fills
// every part of the stream's memo.
const geminiPrimer = `{"candidates":[{"content":{"parts":[{"text":"a"}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":5,"totalTokenCount":5},"modelVersion":"m","responseId":"r"}`

// geminiReferenceClass is a chunk's class by the rules inspectGemini
// documents, read with encoding/json (the last of duplicate keys wins, as
// for the Go SDK), and the non-thought texts it holds.
func geminiReferenceClass(data []byte) (wire.EventClass, []string) {
	payload := bytes.Trim(data, " \t\r\n")
	if len(payload) == 0 {
		return wire.EvPrelude, nil
	}
	var m map[string]json.RawMessage
	if !json.Valid(payload) || payload[0] != '{' || json.Unmarshal(payload, &m) != nil {
		return wire.EvMalformed, nil
	}
	if e, ok := m["error"]; ok && string(e) != "null" {
		return wire.EvError, nil
	}
	cands := m["candidates"]
	if len(cands) > 0 && cands[0] != '[' && string(cands) != "null" {
		return wire.EvMalformed, nil
	}
	isObj := func(v json.RawMessage) bool { return len(v) > 0 && v[0] == '{' }
	str := func(v json.RawMessage) (string, bool) {
		var s string
		return s, len(v) > 0 && v[0] == '"' && json.Unmarshal(v, &s) == nil
	}
	var list []json.RawMessage
	_ = json.Unmarshal(cands, &list)
	output, finished := false, 0
	var texts []string
	for _, c := range list {
		var cm map[string]json.RawMessage
		if !isObj(c) || json.Unmarshal(c, &cm) != nil {
			continue
		}
		if r, ok := str(cm["finishReason"]); ok && r != "" && r != "FINISH_REASON_UNSPECIFIED" {
			finished++
		}
		var content map[string]json.RawMessage
		if !isObj(cm["content"]) || json.Unmarshal(cm["content"], &content) != nil {
			continue
		}
		var parts []json.RawMessage
		if len(content["parts"]) == 0 || content["parts"][0] != '[' || json.Unmarshal(content["parts"], &parts) != nil {
			continue
		}
		for _, p := range parts {
			var pm map[string]json.RawMessage
			if !isObj(p) || json.Unmarshal(p, &pm) != nil {
				continue
			}
			text, isText := str(pm["text"])
			switch {
			case isText && text != "":
				output = true
				if string(pm["thought"]) != "true" {
					texts = append(texts, text)
				}
			case isObj(pm["functionCall"]), isObj(pm["inlineData"]), isObj(pm["executableCode"]), isObj(pm["codeExecutionResult"]):
				output = true
			}
		}
	}
	switch {
	case len(list) > 0 && finished == len(list):
		return wire.EvFinish, texts
	case output:
		return wire.EvOutput, texts
	case len(list) == 0:
		var fb map[string]json.RawMessage
		if isObj(m["promptFeedback"]) && json.Unmarshal(m["promptFeedback"], &fb) == nil {
			if r, ok := str(fb["blockReason"]); ok && r != "" && r != "BLOCKED_REASON_UNSPECIFIED" {
				return wire.EvFinish, texts
			}
		}
	}
	return wire.EvPrelude, texts
}

// The dialect reads the model from the path and the stream mode from the
// method and alt=sse: a JSON-array stream is a non-stream body to the
// proxy. The body must be one JSON object; the model never comes from it.
func TestGeminiDialectParseRequest(t *testing.T) {
	body := []byte(`{"contents":[{"parts":[{"text":"hi"}]}],"model":"ignored"}`)
	for _, tt := range []struct {
		path, query string
		body        []byte
		model       string
		stream      bool
		err         bool
	}{
		{"/v1beta/models/gemini-2.5-pro:generateContent", "", body, "gemini-2.5-pro", false, false},
		{"/v1beta/models/gemini-2.5-pro:streamGenerateContent", "alt=sse", body, "gemini-2.5-pro", true, false},
		{"/v1/models/gemini-2.5-pro:streamGenerateContent/", "key=k&alt=SSE", body, "gemini-2.5-pro", true, false},
		{"/v1beta/models/gemini-2.5-pro:streamGenerateContent", "", body, "gemini-2.5-pro", false, false},
		{"/v1beta/models/gemini-2.5-pro:streamGenerateContent", "alt=json&alt=sse", body, "gemini-2.5-pro", false, false},
		{"/v1beta/models/gemini-2.5-pro:generateContent", "alt=sse", body, "gemini-2.5-pro", false, false},
		{"/v1beta/models/gemini-2.5-pro:generateContent", "", []byte(`[{}]`), "", false, true},
		{"/v1beta/models/gemini-2.5-pro:generateContent", "", []byte(`{"contents":`), "", false, true},
		{"/v1beta/models/gemini-2.5-pro:countTokens", "", body, "", false, true},
	} {
		req, err := wire.ParseCompletion(dialectGemini, tt.path, tt.query, tt.body)
		if (err != nil) != tt.err {
			t.Errorf("%s?%s %s: err %v, want error %v", tt.path, tt.query, tt.body, err, tt.err)
			continue
		}
		if err != nil {
			continue
		}
		if req.Model != tt.model || req.Stream != tt.stream || req.Dialect != dialectGemini {
			t.Errorf("%s?%s: model %q stream %v, want %q %v", tt.path, tt.query, req.Model, req.Stream, tt.model, tt.stream)
		}
		if got := req.BodyFor("other-model"); !bytes.Equal(got, tt.body) {
			t.Errorf("%s: bodyFor rewrote the body: %s", tt.path, got)
		}
	}
}

// upstreamPath puts an attempt's model into the client's path, keeping the
// version and the method; the other dialects send their canonical path.
func TestGeminiDialectUpstreamPath(t *testing.T) {
	for _, tt := range []struct {
		d                wire.Dialect
		path, model, out string
	}{
		{dialectGemini, "/v1beta/models/gemini-a:streamGenerateContent", "gemini-b", "/v1beta/models/gemini-b:streamGenerateContent"},
		{dialectGemini, "/v1/models/gemini-a:generateContent/", "gemini-a", "/v1/models/gemini-a:generateContent"},
		{dialectOpenAI, "/chat/completions", "gpt-x", "/v1/chat/completions"},
		{dialectAnthropic, "/messages", "claude-x", "/v1/messages"},
	} {
		if got := tt.d.UpstreamPath(tt.path, tt.model); got != tt.out {
			t.Errorf("%v.upstreamPath(%q, %q) = %q, want %q", tt.d, tt.path, tt.model, got, tt.out)
		}
	}
}

// Through the dialect interface the choiceSet is the stream's end state:
// done once every candidate finished, or the prompt was blocked.
func TestGeminiDialectEndState(t *testing.T) {
	for _, tt := range []struct {
		chunks []string
		done   bool
	}{
		{[]string{gText1}, false},
		{[]string{gText1, gText2}, true},
		{[]string{gBlocked}, true},
		{[]string{gTwoA, gTwoHalf}, false},
		{[]string{gTwoA, gTwoHalf, gTwoEnd}, true},
		{[]string{gUsage}, true},
	} {
		var cs wire.ChoiceSet
		for _, ev := range parseEvents(t, geminiSSE(tt.chunks...)) {
			_ = dialectGemini.Inspect(ev, false, &cs)
		}
		if cs.AllFinished() != tt.done {
			t.Errorf("%.60q: done %v, want %v", tt.chunks, cs.AllFinished(), tt.done)
		}
	}
}

// The relay ends a Gemini stream as Google does: a complete answer ends
// with the body and nothing added (no [DONE], which the SDK cannot parse);
// a body that ends before every candidate finished gets the error chunk.
func TestGeminiRelayEnd(t *testing.T) {
	for _, tt := range []struct {
		name     string
		in       string
		complete bool
		wantOut  string
	}{
		{"complete", geminiSSE(gText1, gText2), true, geminiSSE(gText1, gText2)},
		{"blocked prompt", geminiSSE(gBlocked), true, geminiSSE(gBlocked)},
		{"cut", geminiSSE(gText1), false, geminiSSE(gText1) + string(gemini.ErrorEvent(502, "the upstream ended the stream before it was complete"))},
		{"one of two candidates finished", geminiSSE(gTwoA, gTwoHalf), false,
			geminiSSE(gTwoA, gTwoHalf) + string(gemini.ErrorEvent(502, "the upstream ended the stream before it was complete"))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &relayClient{}
			var u wire.Usage
			res := stream.Relay(context.Background(), c, c.flush, sse.NewReader(strings.NewReader(tt.in), 1<<16), dialectGemini, &u,
				stream.RelayOptions{Idle: time.Minute, Coalesce: true}, nil)
			if res.Complete != tt.complete || c.String() != tt.wantOut {
				t.Errorf("complete %v (%s), out\n%q\nwant %v\n%q", res.Complete, res.Reason, c.String(), tt.complete, tt.wantOut)
			}
		})
	}
}

// A keyed Gemini provider sends its key as x-goog-api-key and strips the
// client's from the header and the query; a provider without a key passes
// both through.
func TestGeminiProviderAuth(t *testing.T) {
	client := http.Header{"X-Goog-Api-Key": {"client"}, "X-Goog-User-Project": {"p"}, "Content-Type": {"application/json"}}
	keyed := &provider{cfg: &ProviderConfig{}, key: "operator", dialect: dialectGemini}
	h := keyed.upstreamHeader(&http.Request{Header: client}, dialectGemini, keyed.key)
	if h.Get("X-Goog-Api-Key") != "operator" || h.Get("X-Goog-User-Project") != "" || h.Get("Content-Type") == "" {
		t.Errorf("keyed header %v", h)
	}
	if q := keyed.upstreamQuery("alt=sse&key=client&k%65y=c2"); q != "alt=sse" {
		t.Errorf("keyed query %q, want alt=sse", q)
	}
	open := &provider{cfg: &ProviderConfig{}, dialect: dialectGemini}
	if h := open.upstreamHeader(&http.Request{Header: client}, dialectGemini, open.key); h.Get("X-Goog-Api-Key") != "client" {
		t.Errorf("open header %v", h)
	}
	if q := open.upstreamQuery("alt=sse&key=client"); q != "alt=sse&key=client" {
		t.Errorf("open query %q", q)
	}
}
