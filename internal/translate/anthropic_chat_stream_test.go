package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
)

// accumulateAnthropic reads an Anthropic client stream the way
// anthropic-sdk-go does; stopped reports whether message_stop arrived,
// errEvent holds an error event's data.
func accumulateAnthropic(t *testing.T, out []byte) (msg anthropic.Message, stopped bool, errEvent string) {
	t.Helper()
	for _, ev := range sseEvents(t, out) {
		if string(ev.Name) == "error" {
			return msg, stopped, string(ev.Data)
		}
		if stopped {
			t.Fatalf("event after message_stop: %s", ev.Data)
		}
		var e anthropic.MessageStreamEventUnion
		if err := json.Unmarshal(ev.Data, &e); err != nil {
			t.Fatalf("event %s: %v", ev.Data, err)
		}
		if e.Type != string(ev.Name) {
			t.Fatalf("event name %q carries type %q", ev.Name, e.Type)
		}
		if err := msg.Accumulate(e); err != nil {
			t.Fatalf("Accumulate(%s): %v", ev.Data, err)
		}
		stopped = e.Type == "message_stop"
	}
	return msg, stopped, ""
}

// sameMessage compares what a client of anthropic-sdk-go sees.
func sameMessage(t *testing.T, got, want anthropic.Message) {
	t.Helper()
	if got.ID != want.ID || got.Model != want.Model || got.StopReason != want.StopReason || got.StopSequence != want.StopSequence {
		t.Errorf("message %s %s %s %q, want %s %s %s %q", got.ID, got.Model, got.StopReason, got.StopSequence,
			want.ID, want.Model, want.StopReason, want.StopSequence)
	}
	if got.Usage.InputTokens != want.Usage.InputTokens || got.Usage.OutputTokens != want.Usage.OutputTokens ||
		got.Usage.CacheReadInputTokens != want.Usage.CacheReadInputTokens {
		t.Errorf("usage %+v, want %+v", got.Usage.RawJSON(), want.Usage.RawJSON())
	}
	if len(got.Content) != len(want.Content) {
		t.Fatalf("%d blocks, want %d", len(got.Content), len(want.Content))
	}
	for i, g := range got.Content {
		w := want.Content[i]
		if g.Type != w.Type || g.Text != w.Text || g.ID != w.ID || g.Name != w.Name || g.Thinking != w.Thinking || g.Signature != w.Signature {
			t.Errorf("block %d = %s, want %s", i, g.RawJSON(), w.RawJSON())
		}
		if g.Type == "tool_use" && !jsonEqual(t, g.Input, w.Input) {
			t.Errorf("block %d input = %s, want %s", i, g.Input, w.Input)
		}
	}
}

func TestAnthropicFromChatStream(t *testing.T) {
	p, _ := For(Anthropic, OpenAI)
	cases := []struct {
		name    string
		wantErr string // "" for a clean stream
		check   func(t *testing.T, m anthropic.Message)
	}{
		{name: "text", check: func(t *testing.T, m anthropic.Message) {
			if m.Content[0].Text != "Hello, \"world\" é\n" || m.StopReason != "end_turn" || m.Usage.InputTokens != 15 || m.Usage.CacheReadInputTokens != 4 {
				t.Errorf("got %s", m.RawJSON())
			}
		}},
		{name: "parallel_tools", check: func(t *testing.T, m anthropic.Message) {
			if len(m.Content) != 2 || m.Content[0].ID == m.Content[1].ID || m.Content[1].Name != "get_weather" || m.StopReason != "tool_use" {
				t.Errorf("got %s", m.RawJSON())
			}
			if !jsonEqual(t, m.Content[1].Input, []byte(`{"location":"Tokyo é"}`)) {
				t.Errorf("second input %s", m.Content[1].Input)
			}
		}},
		{name: "text_then_tool"},
		{name: "max_tokens", check: func(t *testing.T, m anthropic.Message) {
			if m.StopReason != "max_tokens" {
				t.Errorf("stop_reason %s, want max_tokens", m.StopReason)
			}
		}},
		{name: "duplicate_ids", check: func(t *testing.T, m anthropic.Message) {
			if m.Content[0].ID == m.Content[1].ID {
				t.Errorf("tool ids repeat: %s", m.RawJSON())
			}
		}},
		{name: "foreign_ids", check: func(t *testing.T, m anthropic.Message) {
			// An OpenAI-compatible server's id Anthropic would refuse when
			// the history goes back to it (Kimi's functions.ls:0, restarted
			// at :0 in every answer) is replaced; a valid one is kept.
			if m.Content[0].ID != "toolu_chatcmpl-K2_0" || m.Content[1].ID != "call_ok-1" {
				t.Errorf("tool ids: %s", m.RawJSON())
			}
		}},
		{name: "stop_with_calls", check: func(t *testing.T, m anthropic.Message) {
			// finish_reason "stop" with tool calls (OpenAI-compatible
			// servers): a tool-use stop, never end_turn with tool_use blocks.
			if m.StopReason != "tool_use" || len(m.Content) != 2 {
				t.Errorf("got %s", m.RawJSON())
			}
		}},
		{name: "refusal", check: func(t *testing.T, m anthropic.Message) {
			if m.StopReason != "refusal" || m.Content[0].Text != "I can't help with that." {
				t.Errorf("got %s", m.RawJSON())
			}
		}},
		{name: "max_tokens_mid_args", wantErr: "tool arguments are not valid JSON"},
		{name: "truncated", wantErr: "ended before its finish_reason"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if msg, ok := anthropicStreamCase(t, p, "chat", c.name, c.wantErr); ok && c.check != nil {
				c.check(t, msg)
			}
		})
	}
}

// Every byte-level re-chunking of a target stream gives the same client bytes.
func TestAnthropicFromChatStreamRechunked(t *testing.T) {
	p, _ := For(Anthropic, OpenAI)
	checkRechunked(t, p, "chat")
}

// Malformed target streams end in the client's error event, never a clean stop.
func TestAnthropicFromChatStreamMalformed(t *testing.T) {
	p, _ := For(Anthropic, OpenAI)
	head := `data: {"id":"x","model":"m","choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}` + "\n\n"
	cases := map[string]string{
		"done without finish":   head + "data: [DONE]\n\n",
		"unknown finish_reason": head + `data: {"choices":[{"index":0,"delta":{},"finish_reason":"exploded"}]}` + "\n\ndata: [DONE]\n\n",
		"second choice":         head + `data: {"choices":[{"index":1,"delta":{"content":"b"}}]}` + "\n\n",
		"not json":              head + "data: {\"choices\":[\n\n",
		"error chunk":           head + `data: {"error":{"message":"overloaded","type":"server_error"}}` + "\n\n",
		"tool without name":     head + `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"arguments":"{}"}}]}}]}` + "\n\n",
		"tool resumed":          head + `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{"}}]}}]}` + "\n\n" + `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"d","function":{"name":"f","arguments":"{}"}}]}}]}` + "\n\n" + `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"}"}}]}}]}` + "\n\n",
		"array arguments":       head + `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"[1]"}}]},"finish_reason":"tool_calls"}]}` + "\n\ndata: [DONE]\n\n",
		"empty arguments":       head + `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":""}}]},"finish_reason":"tool_calls"}]}` + "\n\ndata: [DONE]\n\n",
		"text after finish":     head + `data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" + `data: {"choices":[{"index":0,"delta":{"content":"more"}}]}` + "\n\n",
		"cut inside an event":   head + `data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
	}
	for name, stream := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := runStream(p, []byte(stream), nil)
			_, stopped, errEvent := accumulateAnthropic(t, out)
			if err == nil || stopped || errEvent == "" {
				t.Fatalf("err %v, stopped %v, error event %q\n%s", err, stopped, errEvent, out)
			}
		})
	}
}

// After message_stop the client's stream is over: whatever follows is an
// error for the log, and not one more byte for the client.
func TestAnthropicFromChatStreamAfterStop(t *testing.T) {
	p, _ := For(Anthropic, OpenAI)
	clean := `data: {"id":"x","model":"m","choices":[{"index":0,"delta":{"content":"a"},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n"
	want, err := runStream(p, []byte(clean), nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := runStream(p, []byte(clean+clean), nil)
	if !errors.Is(err, ErrAfterEnd) || !bytes.Equal(out, want) {
		t.Errorf("err %v, output\n%s", err, out)
	}
}

func TestAnthropicFromChatStreamUpstreamError(t *testing.T) {
	p, _ := For(Anthropic, OpenAI)
	stream := `data: {"id":"x","model":"m","choices":[{"index":0,"delta":{"content":"a"}}]}` + "\n\n" +
		`data: {"error":{"message":"This model's maximum context length is 8 tokens","type":"invalid_request_error","code":"context_length_exceeded"}}` + "\n\n"
	out, _ := runStream(p, []byte(stream), nil)
	_, _, errEvent := accumulateAnthropic(t, out)
	var e struct {
		Error struct{ Type, Message string }
	}
	_ = json.Unmarshal([]byte(errEvent), &e)
	if e.Error.Type != "invalid_request_error" || !strings.HasPrefix(e.Error.Message, "prompt is too long") {
		t.Errorf("error event %s", errEvent)
	}
}

// A Chat stream that sent its finish_reason (and usage) but ends without
// [DONE] is complete, as the proxy takes a native one: the same client
// bytes as with [DONE].
func TestAnthropicFromChatStreamWithoutDone(t *testing.T) {
	p, _ := For(Anthropic, OpenAI)
	body := `data: {"id":"x","model":"m","choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}` + "\n\n" +
		`data: {"id":"x","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
		`data: {"id":"x","model":"m","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}` + "\n\n"
	want, err := runStream(p, []byte(body+"data: [DONE]\n\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := runStream(p, []byte(body), nil)
	if err != nil || !bytes.Equal(out, want) {
		t.Errorf("err %v, output\n%s\nwant\n%s", err, out, want)
	}
}
