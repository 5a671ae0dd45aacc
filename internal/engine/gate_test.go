package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/stream"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// sse renders events as a stream: each argument is one event's lines.
func sseStream(events ...string) string {
	var b strings.Builder
	for _, e := range events {
		b.WriteString(e)
		b.WriteString("\n\n")
	}
	return b.String()
}

// events parses a stream into copied events.
func parseEvents(t testing.TB, stream string) []sse.Event {
	t.Helper()
	rd := sse.NewReader(strings.NewReader(stream), 1<<20)
	var out []sse.Event
	for {
		e, err := rd.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("parsing test stream: %v", err)
		}
		c := sse.Event{Raw: bytes.Clone(e.Raw)}
		if e.Name != nil {
			c.Name = append([]byte{}, e.Name...)
		}
		if e.Data != nil {
			c.Data = append([]byte{}, e.Data...)
		}
		out = append(out, c)
	}
}

func anthropicEvent(name, data string) string { return "event: " + name + "\ndata: " + data }
func openAIChunk(data string) string          { return "data: " + data }

const (
	aMessageStart = `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":100,"cache_read_input_tokens":2000,"output_tokens":1}}}`
	aBlockStart   = `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`
	aPing         = `{"type": "ping"}`
	aTextDelta    = `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`
	aBlockStop    = `{"type":"content_block_stop","index":0}`
	aMessageDelta = `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}`
	aRefusalDelta = `{"type":"message_delta","delta":{"stop_reason":"refusal","stop_sequence":null},"usage":{"output_tokens":0}}`
	aMessageStop  = `{"type":"message_stop"}`
	aError        = `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`

	oRole     = `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}]}`
	oContent  = `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}]}`
	oFinish   = `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}`
	oUsage    = `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[],"usage":{"prompt_tokens":30,"completion_tokens":12,"total_tokens":42,"prompt_tokens_details":{"cached_tokens":20}}}`
	oTool     = `{"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}`
	oToolNone = `{"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[]},"finish_reason":null}]}`
)

func TestClassifyEvent(t *testing.T) {
	tests := []struct {
		name  string
		d     wire.Dialect
		event string
		want  wire.EventClass
	}{
		{"message_start", dialectAnthropic, anthropicEvent("message_start", aMessageStart), wire.EvPrelude},
		{"content_block_start", dialectAnthropic, anthropicEvent("content_block_start", aBlockStart), wire.EvPrelude},
		{"ping", dialectAnthropic, anthropicEvent("ping", aPing), wire.EvPrelude},
		{"comment", dialectAnthropic, ": keepalive", wire.EvPrelude},
		{"text delta", dialectAnthropic, anthropicEvent("content_block_delta", aTextDelta), wire.EvOutput},
		{"thinking delta", dialectAnthropic, anthropicEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me"}}`), wire.EvOutput},
		{"input_json delta", dialectAnthropic, anthropicEvent("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"loc"}}`), wire.EvOutput},
		{"unnamed delta", dialectAnthropic, "data: " + aTextDelta, wire.EvOutput},
		{"content_block_stop", dialectAnthropic, anthropicEvent("content_block_stop", aBlockStop), wire.EvPrelude},
		{"message_delta", dialectAnthropic, anthropicEvent("message_delta", aMessageDelta), wire.EvPrelude},
		{"refusal message_delta", dialectAnthropic, anthropicEvent("message_delta", aRefusalDelta), wire.EvFinish},
		{"unnamed refusal message_delta", dialectAnthropic, "data: " + aRefusalDelta, wire.EvFinish},
		{"max_tokens message_delta", dialectAnthropic, anthropicEvent("message_delta", `{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":0}}`), wire.EvFinish},
		{"context window message_delta", dialectAnthropic, anthropicEvent("message_delta", `{"type":"message_delta","delta":{"stop_reason":"model_context_window_exceeded","stop_sequence":null},"usage":{"output_tokens":0}}`), wire.EvFinish},
		{"stop_sequence message_delta", dialectAnthropic, anthropicEvent("message_delta", `{"type":"message_delta","delta":{"stop_reason":"stop_sequence","stop_sequence":"###"},"usage":{"output_tokens":0}}`), wire.EvPrelude},
		{"refusal in another event", dialectAnthropic, anthropicEvent("content_block_stop", `{"type":"content_block_stop","delta":{"stop_reason":"refusal"}}`), wire.EvPrelude},
		{"message_stop", dialectAnthropic, anthropicEvent("message_stop", aMessageStop), wire.EvTerminal},
		{"unnamed stop", dialectAnthropic, "data: " + aMessageStop, wire.EvTerminal},
		{"error event", dialectAnthropic, anthropicEvent("error", aError), wire.EvError},
		{"error event, garbage data", dialectAnthropic, anthropicEvent("error", "upstream broke"), wire.EvError},
		{"error type unnamed", dialectAnthropic, "data: " + aError, wire.EvError},
		{"error key in a delta", dialectAnthropic, anthropicEvent("content_block_delta", `{"error":{"message":"quota"}}`), wire.EvError},
		{"null error is no error", dialectAnthropic, anthropicEvent("ping", `{"type":"ping","error":null}`), wire.EvPrelude},
		{"not JSON", dialectAnthropic, anthropicEvent("content_block_delta", `{"type":"content_block_delta"`), wire.EvMalformed},
		{"JSON but not an object", dialectAnthropic, anthropicEvent("content_block_delta", `"text"`), wire.EvMalformed},
		{"trailing garbage", dialectAnthropic, anthropicEvent("ping", `{"type":"ping"} x`), wire.EvMalformed},
		{"unknown event", dialectAnthropic, anthropicEvent("new_thing", `{"type":"new_thing"}`), wire.EvPrelude},

		{"role chunk", dialectOpenAI, openAIChunk(oRole), wire.EvPrelude},
		{"content chunk", dialectOpenAI, openAIChunk(oContent), wire.EvOutput},
		{"empty content", dialectOpenAI, openAIChunk(`{"choices":[{"delta":{"content":""}}]}`), wire.EvPrelude},
		{"null content", dialectOpenAI, openAIChunk(`{"choices":[{"delta":{"content":null}}]}`), wire.EvPrelude},
		{"content word in a string", dialectOpenAI, openAIChunk(`{"choices":[{"delta":{"role":"\"content\":\"x\""}}],"x":"content"}`), wire.EvPrelude},
		{"escaped key", dialectOpenAI, openAIChunk(`{"choices":[{"delta":{"con\u0074ent":"x"}}]}`), wire.EvOutput},
		{"content is one space", dialectOpenAI, openAIChunk(`{"choices":[{"delta":{"content":" "}}]}`), wire.EvOutput},
		{"reasoning_content", dialectOpenAI, openAIChunk(`{"choices":[{"delta":{"content":null,"reasoning_content":"hmm"}}]}`), wire.EvOutput},
		{"refusal", dialectOpenAI, openAIChunk(`{"choices":[{"delta":{"refusal":"I can't"}}]}`), wire.EvOutput},
		{"tool_calls", dialectOpenAI, openAIChunk(oTool), wire.EvOutput},
		{"empty tool_calls", dialectOpenAI, openAIChunk(oToolNone), wire.EvPrelude},
		{"finish_reason", dialectOpenAI, openAIChunk(oFinish), wire.EvFinish},
		{"finish_reason null", dialectOpenAI, openAIChunk(`{"choices":[{"delta":{},"finish_reason":null}]}`), wire.EvPrelude},
		{"finish_reason empty string", dialectOpenAI, openAIChunk(`{"choices":[{"delta":{},"finish_reason":""}]}`), wire.EvPrelude},
		{"content and finish", dialectOpenAI, openAIChunk(`{"choices":[{"delta":{"content":"!"},"finish_reason":"stop"}]}`), wire.EvFinish},
		{"second choice has content", dialectOpenAI, openAIChunk(`{"choices":[{"index":0,"delta":{}},{"index":1,"delta":{"content":"x"}}]}`), wire.EvOutput},
		{"usage chunk", dialectOpenAI, openAIChunk(oUsage), wire.EvPrelude},
		{"done", dialectOpenAI, "data: [DONE]", wire.EvTerminal},
		{"done without space", dialectOpenAI, "data:[DONE]", wire.EvTerminal},
		{"error object", dialectOpenAI, openAIChunk(`{"error":{"message":"Rate limit","type":"rate_limit_error","code":"429"}}`), wire.EvError},
		{"error next to choices", dialectOpenAI, openAIChunk(`{"id":"x","choices":[{"delta":{"content":"partial"},"finish_reason":"error"}],"error":{"message":"boom"}}`), wire.EvError},
		{"error event name", dialectOpenAI, "event: error\ndata: {\"message\":\"x\"}", wire.EvError},
		{"not JSON", dialectOpenAI, openAIChunk(`Internal Server Error`), wire.EvMalformed},
		{"truncated JSON", dialectOpenAI, openAIChunk(`{"choices":[{"delta":{"content":"x"}`), wire.EvMalformed},
		{"done with junk", dialectOpenAI, "data: [DONE] now", wire.EvMalformed},
		{"comment", dialectOpenAI, ": OPENROUTER PROCESSING", wire.EvPrelude},
		{"empty data", dialectOpenAI, "data:", wire.EvPrelude},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%s", tt.d, tt.name), func(t *testing.T) {
			evs := parseEvents(t, sseStream(tt.event))
			if len(evs) != 1 {
				t.Fatalf("%d events", len(evs))
			}
			if got := wire.ClassifyEvent(tt.d, evs[0]); got != tt.want {
				t.Errorf("classifyEvent = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestGate(t *testing.T) {
	type want struct {
		decision stream.GateDecision
		at       int    // index of the deciding event; -1 for hold to the end
		reason   string // failReason, or committedBy on commit
		errHas   string
	}
	tests := []struct {
		name   string
		d      wire.Dialect
		stream []string
		reject []string
		maxBuf int
		maxEvs int
		want   want
	}{
		{
			name: "anthropic prelude then delta commits at the delta",
			d:    dialectAnthropic,
			stream: []string{
				anthropicEvent("message_start", aMessageStart),
				anthropicEvent("content_block_start", aBlockStart),
				anthropicEvent("ping", aPing),
				anthropicEvent("content_block_delta", aTextDelta),
				anthropicEvent("content_block_delta", aTextDelta),
			},
			want: want{stream.GateCommit, 3, "content_block_delta", ""},
		},
		{
			name:   "anthropic prelude only holds",
			d:      dialectAnthropic,
			stream: []string{anthropicEvent("message_start", aMessageStart), ": keepalive", anthropicEvent("ping", aPing)},
			want:   want{stream.GateHold, -1, "", ""},
		},
		{
			name:   "anthropic error event first",
			d:      dialectAnthropic,
			stream: []string{anthropicEvent("error", aError)},
			want:   want{stream.GateFail, 0, "error_event", "overloaded_error: Overloaded"},
		},
		{
			name:   "anthropic error after message_start",
			d:      dialectAnthropic,
			stream: []string{anthropicEvent("message_start", aMessageStart), anthropicEvent("error", aError)},
			want:   want{stream.GateFail, 1, "error_event", "Overloaded"},
		},
		{
			name:   "anthropic message_stop before content",
			d:      dialectAnthropic,
			stream: []string{anthropicEvent("message_start", aMessageStart), anthropicEvent("message_delta", aMessageDelta), anthropicEvent("message_stop", aMessageStop)},
			want:   want{stream.GateFail, 2, "terminal_before_content", "message_stop"},
		},
		{
			// A refusal is the model's answer: delivered, not failed over
			// (an end_turn with no content, above, is still a failure).
			name:   "anthropic refusal before content commits",
			d:      dialectAnthropic,
			stream: []string{anthropicEvent("message_start", aMessageStart), anthropicEvent("message_delta", aRefusalDelta), anthropicEvent("message_stop", aMessageStop)},
			want:   want{stream.GateCommit, 1, "refusal", ""},
		},
		{
			// So is a limit reached before any content: another provider
			// would reach it again, billing the prompt twice.
			name: "anthropic max_tokens before content commits",
			d:    dialectAnthropic,
			stream: []string{anthropicEvent("message_start", aMessageStart),
				anthropicEvent("message_delta", `{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":0}}`),
				anthropicEvent("message_stop", aMessageStop)},
			want: want{stream.GateCommit, 1, "max_tokens", ""},
		},
		{
			name:   "anthropic non-JSON data",
			d:      dialectAnthropic,
			stream: []string{anthropicEvent("message_start", "<html>502 Bad Gateway</html>")},
			want:   want{stream.GateFail, 0, "malformed_first_event", "502 Bad Gateway"},
		},
		{
			name:   "anthropic rejected phrase in the first delta",
			d:      dialectAnthropic,
			stream: []string{anthropicEvent("message_start", aMessageStart), anthropicEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Sorry, I CANNOT help\u0020with that"}}`)},
			reject: []string{"nope", "i cannot help with"},
			want:   want{stream.GateFail, 1, "rejected_phrase", "i cannot help with"},
		},
		{
			name:   "anthropic phrase not present commits",
			d:      dialectAnthropic,
			stream: []string{anthropicEvent("content_block_delta", aTextDelta)},
			reject: []string{"i cannot help", ""},
			want:   want{stream.GateCommit, 0, "content_block_delta", ""},
		},
		{
			name:   "anthropic buffer overflow by bytes",
			d:      dialectAnthropic,
			stream: []string{anthropicEvent("message_start", aMessageStart), anthropicEvent("ping", aPing), anthropicEvent("ping", aPing)},
			maxBuf: len(anthropicEvent("message_start", aMessageStart)) + 10,
			want:   want{stream.GateFail, 1, "buffer_overflow", "first-event buffer"},
		},
		{
			name:   "anthropic buffer overflow by count",
			d:      dialectAnthropic,
			stream: []string{": a", ": b", ": c", ": d"},
			maxEvs: 3,
			want:   want{stream.GateFail, 3, "buffer_overflow", "4 events"},
		},
		{
			name:   "openai role-only chunk holds, content commits",
			d:      dialectOpenAI,
			stream: []string{openAIChunk(oRole), openAIChunk(oContent)},
			want:   want{stream.GateCommit, 1, "content", ""},
		},
		{
			name:   "openai tool_calls commit",
			d:      dialectOpenAI,
			stream: []string{openAIChunk(oRole), openAIChunk(oToolNone), openAIChunk(oTool)},
			want:   want{stream.GateCommit, 2, "tool_calls", ""},
		},
		{
			name:   "openai finish_reason-only chunk commits",
			d:      dialectOpenAI,
			stream: []string{openAIChunk(oRole), openAIChunk(oFinish), "data: [DONE]"},
			want:   want{stream.GateCommit, 1, "finish_reason", ""},
		},
		{
			name:   "openai error data",
			d:      dialectOpenAI,
			stream: []string{openAIChunk(`{"error":{"message":"You exceeded your current quota","type":"insufficient_quota"}}`)},
			want:   want{stream.GateFail, 0, "error_event", "You exceeded your current quota"},
		},
		{
			name:   "openai non-JSON",
			d:      dialectOpenAI,
			stream: []string{openAIChunk(oRole), "data: upstream connect error"},
			want:   want{stream.GateFail, 1, "malformed_first_event", "upstream connect error"},
		},
		{
			name:   "openai [DONE] before content",
			d:      dialectOpenAI,
			stream: []string{openAIChunk(oRole), openAIChunk(oUsage), "data: [DONE]"},
			want:   want{stream.GateFail, 2, "terminal_before_content", "[DONE]"},
		},
		{
			name:   "openai rejected phrase",
			d:      dialectOpenAI,
			stream: []string{openAIChunk(oRole), openAIChunk(`{"choices":[{"delta":{"content":"Ошибка: Quota Exceeded"}}]}`)},
			reject: []string{"ОШИБКА"},
			want:   want{stream.GateFail, 1, "rejected_phrase", "ОШИБКА"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var reject [][]byte
			for _, p := range tt.reject {
				reject = append(reject, []byte(p))
			}
			g := stream.NewGate(tt.d, reject, tt.maxBuf, tt.maxEvs)
			evs := parseEvents(t, sseStream(tt.stream...))
			at, decision := -1, stream.GateHold
			var fed []byte
			for i, e := range evs {
				decision = g.Feed(e)
				fed = append(fed, e.Raw...)
				if decision != stream.GateHold {
					at = i
					break
				}
			}
			if decision != tt.want.decision || at != tt.want.at {
				t.Fatalf("decision %v at event %d, want %v at %d (reason %q, err %v)", decision, at, tt.want.decision, tt.want.at, g.FailReason(), g.Err())
			}
			// The decision sticks.
			if decision != stream.GateHold && g.Feed(evs[0]) != decision {
				t.Errorf("a later feed changed the decision")
			}
			switch decision {
			case stream.GateCommit:
				if g.CommittedBy() != tt.want.reason {
					t.Errorf("committedBy = %q, want %q", g.CommittedBy(), tt.want.reason)
				}
				if !bytes.Equal(g.Buffered(), fed) {
					t.Errorf("buffered = %q, want every event up to the commit %q", g.Buffered(), fed)
				}
				if g.Err() != nil || g.FailReason() != "" {
					t.Errorf("committed gate reports failure %q %v", g.FailReason(), g.Err())
				}
			case stream.GateFail:
				if g.FailReason() != tt.want.reason {
					t.Errorf("failReason = %q, want %q", g.FailReason(), tt.want.reason)
				}
				if g.Err() == nil || !strings.Contains(g.Err().Error(), tt.want.errHas) {
					t.Errorf("err = %v, want it to mention %q", g.Err(), tt.want.errHas)
				}
			case stream.GateHold:
				if !bytes.Equal(g.Buffered(), fed) {
					t.Errorf("buffered = %q, want %q", g.Buffered(), fed)
				}
			}
		})
	}
}

// A pooled gate starts clean after Reset.
func TestGateReset(t *testing.T) {
	g := stream.NewGate(dialectAnthropic, [][]byte{[]byte("Hello")}, 0, 0)
	if g.Feed(parseEvents(t, sseStream(anthropicEvent("content_block_delta", aTextDelta)))[0]) != stream.GateFail {
		t.Fatal("phrase not rejected")
	}
	g.Reset(dialectOpenAI, nil, 0, 0)
	if g.FailReason() != "" || g.Err() != nil || len(g.Buffered()) != 0 {
		t.Fatal("Reset kept state")
	}
	if d := g.Feed(parseEvents(t, sseStream(openAIChunk(oContent)))[0]); d != stream.GateCommit || g.CommittedBy() != "content" {
		t.Fatalf("after Reset: %v by %q", d, g.CommittedBy())
	}
}

// A reused gate forgets what the last stream repeated (wire.Memo): a
// Gemini frame starts at the candidates value and an OpenAI one at the
// chunk, so a frame kept across dialects would read a chunk as the other
// dialect's (found by review: both of these committed a malformed chunk).
func TestGateResetForgetsTheMemo(t *testing.T) {
	gemini := func(v string) string { return `data: {"candidates":` + v + `}` }
	for _, c := range []struct {
		name          string
		first, second wire.Dialect
		firstEv, next string
	}{
		{"Gemini, then OpenAI", dialectGemini, dialectOpenAI,
			gemini(`[{"content":{"parts":[{"text":"a"}],"role":"model"},"index":0}]`),
			`data: [{"content":{"parts":[{"text":"b"}],"role":"model"},"index":0}]`},
		{"OpenAI, then Gemini", dialectOpenAI, dialectGemini,
			`data: {"choices":[{"delta":{"content":"a"}}]}`, gemini(`{"choices":[{"delta":{"content":"b"}}]}`)},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := stream.NewGate(c.first, [][]byte{[]byte("zzz")}, 0, 0) // a phrase: the text is read
			g.Track = wire.NewResumer(c.first, &wire.Request{Body: []byte(`{}`)})
			if d := g.Feed(parseEvents(t, sseStream(c.firstEv))[0]); d != stream.GateCommit {
				t.Fatalf("first stream: %v %v", d, g.Err())
			}
			g.Reset(c.second, [][]byte{[]byte("zzz")}, 0, 0)
			fresh := stream.NewGate(c.second, [][]byte{[]byte("zzz")}, 0, 0)
			ev := parseEvents(t, sseStream(c.next))[0]
			if d, want := g.Feed(ev), fresh.Feed(ev); d != want || g.FailReason() != fresh.FailReason() {
				t.Fatalf("reused gate %v %q, a new one %v %q", d, g.FailReason(), want, fresh.FailReason())
			}
		})
	}
}

func TestCheckBody(t *testing.T) {
	tests := []struct {
		name   string
		d      wire.Dialect
		body   string
		reason string
		errHas string
	}{
		{"anthropic ok", dialectAnthropic, `{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}`, "", ""},
		{"anthropic error body", dialectAnthropic, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, "error_body", "Overloaded"},
		{"anthropic empty content", dialectAnthropic, `{"type":"message","content":[],"stop_reason":"end_turn"}`, "empty_content", "no content"},
		{"anthropic missing content", dialectAnthropic, `{"ok":true}`, "empty_content", ""},
		{"anthropic refusal without content", dialectAnthropic, `{"type":"message","content":[],"stop_reason":"refusal"}`, "", ""},
		{"anthropic max_tokens without content", dialectAnthropic, `{"type":"message","content":[],"stop_reason":"max_tokens"}`, "", ""},
		{"anthropic context window without content", dialectAnthropic, `{"type":"message","content":[],"stop_reason":"model_context_window_exceeded"}`, "", ""},
		{"anthropic stop_sequence without content", dialectAnthropic, `{"type":"message","content":[],"stop_reason":"stop_sequence"}`, "empty_content", "no content"},
		{"anthropic html", dialectAnthropic, `<html>Bad Gateway</html>`, "malformed_body", "Bad Gateway"},
		{"anthropic truncated", dialectAnthropic, `{"type":"message","content":[{"type":"text"`, "malformed_body", ""},
		{"openai ok", dialectOpenAI, `{"id":"c","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1}}`, "", ""},
		{"openai error", dialectOpenAI, `{"error":{"message":"Invalid API key","type":"invalid_request_error","code":"invalid_api_key"}}`, "error_body", "Invalid API key"},
		{"openai string error", dialectOpenAI, `{"error":"upstream timeout"}`, "error_body", "upstream timeout"},
		{"openai null error is fine", dialectOpenAI, `{"error":null,"choices":[{"message":{"content":"x"}}]}`, "", ""},
		{"openai empty choices", dialectOpenAI, `{"id":"c","choices":[]}`, "empty_choices", ""},
		{"openai null choices", dialectOpenAI, `{"id":"c","choices":null}`, "empty_choices", ""},
		{"openai missing choices", dialectOpenAI, `{"id":"c"}`, "empty_choices", ""},
		{"openai not JSON", dialectOpenAI, ``, "malformed_body", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reason, err := wire.CheckBody(tt.d, []byte(tt.body))
			if reason != tt.reason {
				t.Fatalf("reason = %q (%v), want %q", reason, err, tt.reason)
			}
			if (err != nil) != (reason != "") || err != nil && !strings.Contains(err.Error(), tt.errHas) {
				t.Errorf("err = %v, want it to mention %q", err, tt.errHas)
			}
		})
	}
}

func TestCheckBodyReject(t *testing.T) {
	reject := [][]byte{[]byte("I cannot help"), []byte("")}
	tests := []struct {
		name string
		d    wire.Dialect
		body string
		fail bool
	}{
		{"anthropic text", dialectAnthropic, `{"content":[{"type":"thinking","thinking":"I cannot help? maybe"},{"type":"text","text":"Sorry, i CANNOT help."}]}`, true},
		{"anthropic clean", dialectAnthropic, `{"content":[{"type":"thinking","thinking":"I cannot help"},{"type":"text","text":"Sure."}]}`, false},
		{"openai content", dialectOpenAI, `{"choices":[{"message":{"role":"assistant","content":"I cannot\u0020help you"}}]}`, true},
		{"openai clean", dialectOpenAI, `{"choices":[{"message":{"role":"assistant","content":"Of course"}}]}`, false},
		{"openai phrase only in a key", dialectOpenAI, `{"I cannot help":1,"choices":[{"message":{"content":"ok"}}]}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := wire.CheckBodyReject(tt.d, []byte(tt.body), reject)
			if (err != nil) != tt.fail {
				t.Errorf("checkBodyReject = %v, want failure %v", err, tt.fail)
			}
		})
	}
	if err := wire.CheckBodyReject(dialectOpenAI, []byte(`{"choices":[{"message":{"content":"I cannot help"}}]}`), nil); err != nil {
		t.Errorf("no phrases: %v", err)
	}
}

// FuzzGate feeds arbitrary streams: the gate never panics, its decision
// never changes once made, and what it reports agrees with the decision.
func FuzzGate(f *testing.F) {
	f.Add([]byte(sseStream(anthropicEvent("message_start", aMessageStart), anthropicEvent("ping", aPing), anthropicEvent("content_block_delta", aTextDelta))), false, []byte("hello"))
	f.Add([]byte(sseStream(anthropicEvent("error", aError))), false, []byte(""))
	f.Add([]byte(sseStream(openAIChunk(oRole), openAIChunk(oTool), "data: [DONE]")), true, []byte("x"))
	f.Add([]byte(sseStream(openAIChunk(oRole), "data: [DONE]")), true, []byte(""))
	f.Add([]byte(sseStream(openAIChunk(`{"choices":[{"delta":{"content":"nope"}}]}`))), true, []byte("NOPE"))
	f.Fuzz(func(t *testing.T, in []byte, openai bool, phrase []byte) {
		d := dialectAnthropic
		if openai {
			d = dialectOpenAI
		}
		g := stream.NewGate(d, [][]byte{phrase}, 4096, 8)
		rd := sse.NewReader(bytes.NewReader(in), 1<<16)
		decision := stream.GateHold
		var fed []byte
		for {
			e, err := rd.Next()
			if err != nil {
				break
			}
			// Malformed means exactly: a payload that is not a JSON object.
			if payload := bytes.Trim(e.Data, " \t\r\n"); len(payload) > 0 && string(e.Name) != "error" && !(openai && string(payload) == "[DONE]") {
				object := json.Valid(payload) && payload[0] == '{'
				if malformed := wire.ClassifyEvent(d, e) == wire.EvMalformed; malformed == object {
					t.Fatalf("classified %q as malformed=%v; encoding/json says object=%v", e.Data, malformed, object)
				}
			}
			got := g.Feed(e)
			if decision != stream.GateHold {
				if got != decision {
					t.Fatalf("decision changed from %v to %v", decision, got)
				}
				continue
			}
			fed = append(fed, e.Raw...)
			decision = got
			class := wire.ClassifyEvent(d, e)
			switch got {
			case stream.GateCommit:
				if class != wire.EvOutput && class != wire.EvFinish {
					t.Fatalf("committed on a %v event", class)
				}
				if g.CommittedBy() == "" || g.Err() != nil {
					t.Fatalf("commit by %q, err %v", g.CommittedBy(), g.Err())
				}
			case stream.GateFail:
				switch g.FailReason() {
				case "error_event", "malformed_first_event", "terminal_before_content", "rejected_phrase", "buffer_overflow":
				default:
					t.Fatalf("failReason %q", g.FailReason())
				}
				if g.Err() == nil {
					t.Fatal("failed without an error")
				}
			}
			if !bytes.Equal(g.Buffered(), fed) {
				t.Fatalf("buffered %q, fed %q", g.Buffered(), fed)
			}
		}
	})
}

func BenchmarkClassifyOpenAI(b *testing.B) {
	e := parseEvents(b, sseStream(openAIChunk(oContent)))[0]
	b.ReportAllocs()
	b.SetBytes(int64(len(e.Raw)))
	for range b.N {
		if wire.ClassifyEvent(dialectOpenAI, e) != wire.EvOutput {
			b.Fatal("misclassified")
		}
	}
}

// BenchmarkGate runs a pooled gate over a typical Anthropic first second
// (message_start, content_block_start, ping, first delta) per op, with a
// reject phrase configured.
func BenchmarkGate(b *testing.B) {
	evs := parseEvents(b, sseStream(
		anthropicEvent("message_start", aMessageStart),
		anthropicEvent("content_block_start", aBlockStart),
		anthropicEvent("ping", aPing),
		anthropicEvent("content_block_delta", aTextDelta),
	))
	var n int64
	for _, e := range evs {
		n += int64(len(e.Raw))
	}
	reject := [][]byte{[]byte("I cannot help")}
	g := stream.NewGate(dialectAnthropic, reject, 0, 0)
	b.ReportAllocs()
	b.SetBytes(n)
	for range b.N {
		g.Reset(dialectAnthropic, reject, 0, 0)
		for _, e := range evs {
			g.Feed(e)
		}
		if g.Feed(evs[0]) != stream.GateCommit {
			b.Fatal("no commit")
		}
	}
}
