package llmhedge

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"google.golang.org/genai"
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

func newGeminiResumer(t *testing.T) *geminiResumer {
	t.Helper()
	rs, ok := dialectGemini.newResumer(&llmRequest{body: []byte(`{"contents":[]}`)}).(*geminiResumer)
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
			if got := rs.ineligible() != ""; got != tt.bad {
				t.Fatalf("ineligible = %q, want ineligible %v", rs.ineligible(), tt.bad)
			}
			if rs.text() != tt.text || rs.finished() != tt.finished {
				t.Errorf("text %q finished %v, want %q %v", rs.text(), rs.finished(), tt.text, tt.finished)
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
			out, err := newGeminiResumer(t).prefill([]byte(tt.in), `Hello "wörld"`)
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
	if _, err := newGeminiResumer(t).prefill([]byte(`{"generationConfig":{}}`), "x"); !errors.Is(err, errNoTurns) {
		t.Errorf("no contents: err %v, want errNoTurns", err)
	}
}

func TestGeminiResumerRead(t *testing.T) {
	tests := []struct {
		name, chunk string
		want        contEvent
	}{
		{"text", rgHello, contEvent{kind: contText, text: "Hello"}},
		{"text parts", rgWorld, contEvent{kind: contText, text: " wörld!\n"}},
		{"finish", rgStop, contEvent{kind: contFinish, finish: "STOP"}},
		{"text and finish", resumeGeminiChunk(`{"text":"end."}`, `,"finishReason":"MAX_TOKENS"`), contEvent{kind: contText, text: "end.", finish: "MAX_TOKENS", ends: true}},
		{"unspecified finish", resumeGeminiChunk(`{"text":"a"}`, `,"finishReason":"FINISH_REASON_UNSPECIFIED"`), contEvent{kind: contText, text: "a"}},
		{"usage only", rgUsage, contEvent{kind: contSkip}},
		{"thought", rgThought, contEvent{kind: contOther}},
		{"functionCall", rgCall, contEvent{kind: contOther}},
		{"text and a functionCall", rgMixed, contEvent{kind: contOther}},
		{"two candidates", rgTwo, contEvent{kind: contOther}},
		{"error", `{"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}}`, contEvent{kind: contError}},
		{"malformed", `{"candidates": [{"content": {"parts": [{"te`, contEvent{kind: contError}},
	}
	rs := newGeminiResumer(t)
	for _, tt := range tests {
		evs := parseEvents(t, resumeGeminiSSE(tt.chunk))
		if got := rs.read(evs[0], dialectGemini.inspect(evs[0], true, nil)); got != tt.want {
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
		if err := rs.writeText(&out, ` "wörld"`); err != nil {
			t.Fatal(err)
		}
		if err := rs.writeEnd(&out, contEnd{finish: "MAX_TOKENS", input: 7, output: 20}); err != nil {
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
		if text.String() != `Hello "wörld"` || rs.text() != `Hello "wörld"` {
			t.Errorf("text %q, resumer text %q", text.String(), rs.text())
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
	if err := rs.writeEnd(&out, contEnd{}); err != nil || out.Len() != 0 || !rs.finished() {
		t.Errorf("writeEnd = %q, %v (finished %v); want nothing", out.String(), err, rs.finished())
	}
}
