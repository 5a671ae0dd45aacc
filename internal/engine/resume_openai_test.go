package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	dopenai "github.com/llmhedge/caddy-llm-hedge/internal/dialect/openai"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// resumeChatChunk is a chunk as OpenAI sends it, with the given choices.
func resumeChatChunk(choices string) string {
	return `{"id":"chatcmpl-abc","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_1","choices":[` + choices + `]}`
}

func resumeChatDelta(delta, finish string) string {
	return resumeChatChunk(`{"index":0,"delta":` + delta + `,"logprobs":null,"finish_reason":` + finish + `}`)
}

var (
	rcRole    = resumeChatDelta(`{"role":"assistant","content":"","refusal":null}`, "null")
	rcHello   = resumeChatDelta(`{"content":"Hello"}`, "null")
	rcWorld   = resumeChatDelta(`{"content":" w\u00f6rld\n"}`, "null")
	rcStop    = resumeChatDelta(`{}`, `"stop"`)
	rcUsage   = `{"id":"chatcmpl-abc","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-2024-08-06","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}}`
	rcTool    = resumeChatDelta(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}]}`, "null")
	rcFunc    = resumeChatDelta(`{"function_call":{"name":"f","arguments":""}}`, "null")
	rcRefusal = resumeChatDelta(`{"refusal":"I can't"}`, "null")
	rcReason  = resumeChatDelta(`{"reasoning_content":"hmm"}`, "null")
	rcReason2 = resumeChatDelta(`{"reasoning":"hmm"}`, "null")
	rcBoth    = resumeChatDelta(`{"content":"Hi","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}]}`, "null")
	rcTwo     = resumeChatChunk(`{"index":0,"delta":{"content":"a"},"finish_reason":null},{"index":1,"delta":{"content":"b"},"finish_reason":null}`)
	rcIndex1  = resumeChatChunk(`{"index":1,"delta":{"content":"b"},"finish_reason":null}`)
)

// resumeSSE frames chunks as data events.
func resumeSSE(chunks ...string) string {
	var b strings.Builder
	for _, c := range chunks {
		b.WriteString("data: " + c + "\n\n")
	}
	return b.String()
}

// resumeTrackAll feeds events to a resumer as the relay does.
func resumeTrackAll(t *testing.T, d wire.Dialect, rs wire.Resumer, stream string) {
	t.Helper()
	for _, ev := range parseEvents(t, stream) {
		rs.Track(ev, d.Inspect(ev, true, nil))
	}
}

func newChatResumer(t *testing.T, body string) *dopenai.Resumer {
	t.Helper()
	rs, ok := wire.NewResumer(dialectOpenAI, &wire.Request{Body: []byte(body)}).(*dopenai.Resumer)
	if !ok {
		t.Fatalf("newResumer(%s) is not an openAIResumer", body)
	}
	return rs
}

func TestChatResumerTrack(t *testing.T) {
	tests := []struct {
		name     string
		chunks   []string
		text     string
		bad      bool
		finished bool
	}{
		{"text", []string{rcRole, rcHello, rcWorld}, "Hello wörld\n", false, false},
		{"finished", []string{rcRole, rcHello, rcStop, rcUsage}, "Hello", false, true},
		{"tool call", []string{rcRole, rcHello, rcTool}, "", true, false},
		{"function call", []string{rcRole, rcFunc}, "", true, false},
		{"refusal", []string{rcRole, rcRefusal}, "", true, false},
		{"reasoning_content", []string{rcRole, rcReason, rcHello}, "", true, false},
		{"reasoning", []string{rcRole, rcReason2, rcHello}, "", true, false},
		{"content and a tool call in one delta", []string{rcRole, rcBoth}, "", true, false},
		{"two choices", []string{rcRole, rcTwo}, "", true, false},
		{"choice 1", []string{rcRole, rcHello, rcIndex1}, "", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := newChatResumer(t, `{"model":"gpt-4o","messages":[]}`)
			resumeTrackAll(t, dialectOpenAI, rs, resumeSSE(tt.chunks...))
			if got := rs.Ineligible() != ""; got != tt.bad {
				t.Fatalf("ineligible = %q, want ineligible %v", rs.Ineligible(), tt.bad)
			}
			if rs.Text() != tt.text || rs.Finished() != tt.finished {
				t.Errorf("text %q finished %v, want %q %v", rs.Text(), rs.Finished(), tt.text, tt.finished)
			}
		})
	}
}

// A request for several choices is not continued; include_usage is read.
func TestChatResumerRequest(t *testing.T) {
	if rs := wire.NewResumer(dialectOpenAI, &wire.Request{Body: []byte(`{"model":"m","n":2,"messages":[]}`)}); rs != nil {
		t.Errorf("n 2: newResumer = %T, want nil", rs)
	}
	if rs := newChatResumer(t, `{"model":"m","n":1,"stream_options":{"include_usage":true},"messages":[]}`); !rs.IncludeUsage {
		t.Error("include_usage true not read")
	}
	if rs := newChatResumer(t, `{"model":"m","stream_options":{"include_usage":false},"messages":[]}`); rs.IncludeUsage {
		t.Error("include_usage false read as true")
	}
}

func TestChatResumerPrefill(t *testing.T) {
	type message struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	type body struct {
		Model    string    `json:"model"`
		Stream   bool      `json:"stream"`
		Messages []message `json:"messages"`
	}
	tests := []struct {
		name, in string
		last     message
		n        int
	}{
		{"appended", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			message{"assistant", json.RawMessage(`"Hello \"wörld\""`)}, 2},
		{"client prefill extended", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Sure: "}]}`,
			message{"assistant", json.RawMessage(`"Sure: Hello \"wörld\""`)}, 2},
		{"content parts extended", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"text","text":"Sure: "}]}]}`,
			message{"assistant", json.RawMessage(`[{"type":"text","text":"Sure: "},{"text":"Hello \"wörld\"","type":"text"}]`)}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := newChatResumer(t, tt.in).Prefill([]byte(tt.in), `Hello "wörld"`)
			if err != nil {
				t.Fatal(err)
			}
			var b body
			if err := json.Unmarshal(out, &b); err != nil {
				t.Fatalf("%s: %v", out, err)
			}
			if b.Model != "m" || !b.Stream || len(b.Messages) != tt.n {
				t.Fatalf("prefilled body %s", out)
			}
			last := b.Messages[len(b.Messages)-1]
			var got, want any
			_ = json.Unmarshal(last.Content, &got)
			_ = json.Unmarshal(tt.last.Content, &want)
			if last.Role != tt.last.Role || !resumeJSONEqual(got, want) {
				t.Errorf("last message %s %s, want %s %s", last.Role, last.Content, tt.last.Role, tt.last.Content)
			}
		})
	}
	if _, err := newChatResumer(t, `{}`).Prefill([]byte(`{"model":"m"}`), "x"); !errors.Is(err, wire.ErrNoTurns) {
		t.Errorf("no messages: err %v, want errNoTurns", err)
	}
}

func resumeJSONEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

func TestChatResumerRead(t *testing.T) {
	tests := []struct {
		name, stream string
		want         wire.ContEvent
	}{
		{"role", resumeSSE(rcRole), wire.ContEvent{Kind: wire.ContSkip}},
		{"text", resumeSSE(rcWorld), wire.ContEvent{Kind: wire.ContText, Text: " wörld\n"}},
		{"finish", resumeSSE(rcStop), wire.ContEvent{Kind: wire.ContFinish, Finish: "stop"}},
		{"text and finish", resumeSSE(resumeChatDelta(`{"content":"end."}`, `"length"`)), wire.ContEvent{Kind: wire.ContText, Text: "end.", Finish: "length", Ends: true}},
		{"usage", resumeSSE(rcUsage), wire.ContEvent{Kind: wire.ContSkip}},
		{"done", "data: [DONE]\n\n", wire.ContEvent{Kind: wire.ContTerminal}},
		{"error data", resumeSSE(`{"error":{"message":"overloaded","type":"server_error"}}`), wire.ContEvent{Kind: wire.ContError}},
		{"error event", "event: error\ndata: {\"error\":{\"message\":\"x\"}}\n\n", wire.ContEvent{Kind: wire.ContError}},
		{"malformed", "data: {\"id\":\"x\n\n", wire.ContEvent{Kind: wire.ContError}},
		{"tool call", resumeSSE(rcTool), wire.ContEvent{Kind: wire.ContOther}},
		{"refusal", resumeSSE(rcRefusal), wire.ContEvent{Kind: wire.ContOther}},
		{"reasoning", resumeSSE(rcReason), wire.ContEvent{Kind: wire.ContOther}},
		{"two choices", resumeSSE(rcTwo), wire.ContEvent{Kind: wire.ContOther}},
		{"keepalive", ": ping\n\n", wire.ContEvent{Kind: wire.ContSkip}},
	}
	rs := newChatResumer(t, `{"model":"m","messages":[]}`)
	for _, tt := range tests {
		evs := parseEvents(t, tt.stream)
		if len(evs) != 1 {
			t.Fatalf("%s: %d events", tt.name, len(evs))
		}
		if got := rs.Read(evs[0], dialectOpenAI.Inspect(evs[0], true, nil)); got != tt.want {
			t.Errorf("%s: read = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// The chunks a resumer writes continue the client's stream: openai-go's
// accumulator takes them after the client's own (it refuses another id),
// and reads the whole text, the finish and the usage; [DONE] ends it.
func TestChatResumerWrite(t *testing.T) {
	for _, includeUsage := range []bool{true, false} {
		body := `{"model":"gpt-4o","messages":[],"stream_options":{"include_usage":false}}`
		if includeUsage {
			body = strings.Replace(body, "false", "true", 1)
		}
		rs := newChatResumer(t, body)
		client := resumeSSE(rcRole, rcHello)
		resumeTrackAll(t, dialectOpenAI, rs, client)
		var out bytes.Buffer
		if err := rs.WriteText(&out, ` "wörld"`); err != nil {
			t.Fatal(err)
		}
		if err := rs.WriteEnd(&out, wire.ContEnd{Finish: "length", Input: 9, Output: 20}); err != nil {
			t.Fatal(err)
		}
		if rs.Text() != `Hello "wörld"` {
			t.Errorf("text after the writes = %q", rs.Text())
		}
		evs := parseEvents(t, client+out.String())
		if last := evs[len(evs)-1]; string(last.Data) != "[DONE]" {
			t.Fatalf("last event %q, want [DONE]", last.Raw)
		}
		var acc openai.ChatCompletionAccumulator
		usageChunks := 0
		for _, ev := range evs[:len(evs)-1] {
			var ch openai.ChatCompletionChunk
			if err := json.Unmarshal(ev.Data, &ch); err != nil {
				t.Fatalf("%s: %v", ev.Data, err)
			}
			if !acc.AddChunk(ch) {
				t.Fatalf("accumulator refused %s", ev.Data)
			}
			if ch.JSON.Usage.Valid() && ch.Usage.TotalTokens > 0 {
				usageChunks++
			}
			if ch.SystemFingerprint != "fp_1" || ch.Created != 1700000000 || ch.Model != "gpt-4o-2024-08-06" || ch.Object != "chat.completion.chunk" {
				t.Errorf("chunk %s: not in the client's ids", ev.Data)
			}
		}
		if acc.ID != "chatcmpl-abc" || len(acc.Choices) != 1 || acc.Choices[0].Message.Content != `Hello "wörld"` || acc.Choices[0].FinishReason != "length" {
			t.Errorf("accumulated %+v", acc.ChatCompletion)
		}
		wantUsage := 0
		if includeUsage {
			wantUsage = 1
			if u := acc.Usage; u.PromptTokens != 9 || u.CompletionTokens != 20 || u.TotalTokens != 29 {
				t.Errorf("usage = %+v", u)
			}
		}
		if usageChunks != wantUsage {
			t.Errorf("include_usage %v: %d usage chunks, want %d", includeUsage, usageChunks, wantUsage)
		}
	}
}

// A client that has the finish (and the usage) gets only [DONE].
func TestChatResumerWriteEndFinished(t *testing.T) {
	rs := newChatResumer(t, `{"model":"m","messages":[],"stream_options":{"include_usage":true}}`)
	resumeTrackAll(t, dialectOpenAI, rs, resumeSSE(rcRole, rcHello, rcStop, rcUsage))
	if !rs.Finished() {
		t.Fatal("not finished after a finish_reason")
	}
	var out bytes.Buffer
	if err := rs.WriteEnd(&out, wire.ContEnd{}); err != nil {
		t.Fatal(err)
	}
	if out.String() != "data: [DONE]\n\n" {
		t.Errorf("writeEnd = %q, want only [DONE]", out.String())
	}
}

// Following a text stream allocates nothing per chunk (past the text
// buffer's growth): the relay calls track on every event.
func TestResumerTrackAllocs(t *testing.T) {
	tests := []struct {
		d     wire.Dialect
		rs    wire.Resumer
		chunk string
	}{
		{dialectOpenAI, wire.NewResumer(dialectOpenAI, &wire.Request{Body: []byte(`{}`)}), resumeSSE(rcHello)},
		{dialectGemini, wire.NewResumer(dialectGemini, &wire.Request{Body: []byte(`{}`)}), resumeGeminiSSE(rgHello)},
	}
	for _, tt := range tests {
		ev := parseEvents(t, tt.chunk)[0]
		tt.rs.Track(ev, tt.d.Inspect(ev, true, nil)) // the ids are copied once
		if n := testing.AllocsPerRun(1000, func() { tt.rs.Track(ev, tt.d.Inspect(ev, true, nil)) }); n != 0 {
			t.Errorf("%s: %v allocations per chunk", tt.d, n)
		}
		if tt.rs.Ineligible() != "" {
			t.Errorf("%s: %s", tt.d, tt.rs.Ineligible())
		}
	}
}
