package translate

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/responses"
)

// checkResponsesStream holds a client stream to the Responses grammar:
// sequence numbers 0, 1, 2...; response.created and .in_progress first;
// output items added at indices 0, 1, 2... and done before the next, with
// deltas only into the open item and .done texts equal to the deltas
// joined; arguments that parse at function_call_arguments.done; then
// response.completed or response.incomplete last, or an error event last.
// It returns the final response when the stream ends cleanly.
func checkResponsesStream(t testing.TB, out []byte) (final *responses.Response, err error) {
	open, next := -1, 0
	var text strings.Builder
	evs := sseEvents(t, out)
	for i, ev := range evs {
		var e responses.ResponseStreamEventUnion
		if jerr := json.Unmarshal(ev.Data, &e); jerr != nil {
			return nil, fmt.Errorf("event %d is not JSON: %v", i, jerr)
		}
		if e.Type != string(ev.Name) || e.SequenceNumber != int64(i) {
			return nil, fmt.Errorf("event %d: name %q, type %q, sequence %d", i, ev.Name, e.Type, e.SequenceNumber)
		}
		last := i == len(evs)-1
		switch {
		case e.Type == "error":
		case i == 0 && e.Type != "response.created", i == 1 && e.Type != "response.in_progress":
			return nil, fmt.Errorf("event %d is %s", i, e.Type)
		}
		switch e.Type {
		case "error":
			if !last || e.Message == "" {
				return nil, fmt.Errorf("error event not last or without message")
			}
			return nil, nil
		case "response.created", "response.in_progress":
			if i > 1 {
				return nil, fmt.Errorf("%s at %d", e.Type, i)
			}
		case "response.output_item.added":
			if open >= 0 || e.OutputIndex != int64(next) {
				return nil, fmt.Errorf("item %d added (open %d, next %d)", e.OutputIndex, open, next)
			}
			// A message item carries its content array, empty: Codex
			// drops an item without one, then every text delta into it
			// ("OutputTextDelta without active item").
			var added struct {
				Item struct {
					Type    string          `json:"type"`
					Content json.RawMessage `json:"content"`
				} `json:"item"`
			}
			if json.Unmarshal(ev.Data, &added); added.Item.Type == "message" && string(added.Item.Content) != "[]" {
				return nil, fmt.Errorf("message item %d added with content %q, want []", e.OutputIndex, added.Item.Content)
			}
			open, next = int(e.OutputIndex), next+1
			text.Reset()
		case "response.content_part.added", "response.content_part.done":
			if int(e.OutputIndex) != open {
				return nil, fmt.Errorf("%s outside the open item", e.Type)
			}
		case "response.output_text.delta", "response.function_call_arguments.delta", "response.custom_tool_call_input.delta":
			if int(e.OutputIndex) != open {
				return nil, fmt.Errorf("%s outside the open item", e.Type)
			}
			text.WriteString(e.Delta)
		case "response.output_text.done":
			if int(e.OutputIndex) != open || e.Text != text.String() {
				return nil, fmt.Errorf("text done %q, deltas %q", e.Text, text.String())
			}
		case "response.custom_tool_call_input.done":
			if int(e.OutputIndex) != open || e.Input != text.String() {
				return nil, fmt.Errorf("custom input done %q, deltas %q", e.Input, text.String())
			}
		case "response.function_call_arguments.done":
			if int(e.OutputIndex) != open || e.Arguments != text.String() || checkArgs([]byte(e.Arguments)) != nil {
				return nil, fmt.Errorf("arguments done %q, deltas %q", e.Arguments, text.String())
			}
		case "response.output_item.done":
			if int(e.OutputIndex) != open {
				return nil, fmt.Errorf("item %d done, open %d", e.OutputIndex, open)
			}
			open = -1
		case "response.completed", "response.incomplete":
			if !last || open >= 0 || len(e.Response.Output) != next {
				return nil, fmt.Errorf("%s not last, or with an open item, or %d items of %d", e.Type, len(e.Response.Output), next)
			}
			r := e.Response
			return &r, nil
		default:
			return nil, fmt.Errorf("unknown event %s", e.Type)
		}
	}
	return nil, nil
}

func checkResponsesClean(t testing.TB, out []byte) (bool, error) {
	r, err := checkResponsesStream(t, out)
	return r != nil, err
}

func TestResponsesFromAnthropicStream(t *testing.T) {
	p, _ := For(Responses, Anthropic)
	cases := []struct {
		name    string
		wantErr string
		check   func(t *testing.T, r *responses.Response)
	}{
		{name: "text", check: func(t *testing.T, r *responses.Response) {
			if r.OutputText() != "Hello, \"world\" é\n" || r.Status != "completed" || r.Usage.InputTokens != 35 || r.Usage.InputTokensDetails.CachedTokens != 10 || r.Usage.OutputTokens != 12 {
				t.Errorf("got %s", r.RawJSON())
			}
		}},
		{name: "parallel_tools", check: func(t *testing.T, r *responses.Response) {
			if len(r.Output) != 3 || r.Output[1].CallID == r.Output[2].CallID || r.Output[2].Name != "get_weather" || !jsonEqual(t, []byte(r.Output[2].Arguments.OfString), []byte(`{"location":"Tokyo"}`)) {
				t.Errorf("got %s", r.RawJSON())
			}
		}},
		{name: "thinking_tools", check: func(t *testing.T, r *responses.Response) {
			if len(r.Output) != 1 || r.Output[0].Type != "function_call" || strings.Contains(r.RawJSON(), "EqQB") {
				t.Errorf("thinking or its signature reached a Responses client: %s", r.RawJSON())
			}
		}},
		{name: "empty_input", check: func(t *testing.T, r *responses.Response) {
			if r.Output[0].Arguments.OfString != "{}" {
				t.Errorf("arguments %q", r.Output[0].Arguments.OfString)
			}
		}},
		{name: "max_tokens", check: func(t *testing.T, r *responses.Response) {
			if r.Status != "incomplete" || r.IncompleteDetails.Reason != "max_output_tokens" {
				t.Errorf("status %s, details %s", r.Status, r.IncompleteDetails.RawJSON())
			}
		}},
		{name: "max_tokens_mid_args", wantErr: "tool arguments are not valid JSON"},
		{name: "overloaded", wantErr: "Overloaded"},
		{name: "truncated", wantErr: "ended before message_stop"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			target := readFile(t, filepath.Join("testdata", "anthropic", c.name+".sse"))
			out, err := runStream(p, target, nil)
			golden(t, "responses_from_anthropic_"+c.name+".sse", out)
			final, gerr := checkResponsesStream(t, out)
			if gerr != nil {
				t.Fatalf("grammar: %v\n%s", gerr, out)
			}
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) || final != nil {
					t.Fatalf("err %v, clean %v; want an error event for %q", err, final != nil, c.wantErr)
				}
				return
			}
			if err != nil || final == nil {
				t.Fatalf("err %v, clean %v", err, final != nil)
			}
			body, err := minimal(p).Response(readFile(t, filepath.Join("testdata", "anthropic", c.name+".json")))
			if err != nil {
				t.Fatal(err)
			}
			var want responses.Response
			if err := json.Unmarshal(body, &want); err != nil {
				t.Fatal(err)
			}
			sameResponse(t, final, &want)
			c.check(t, final)
		})
	}
}

// sameResponse compares what a client of openai-go sees.
func sameResponse(t *testing.T, got, want *responses.Response) {
	t.Helper()
	if got.ID != want.ID || got.Status != want.Status || got.Model != want.Model || got.IncompleteDetails.Reason != want.IncompleteDetails.Reason ||
		got.Usage.RawJSON() != want.Usage.RawJSON() || len(got.Output) != len(want.Output) {
		t.Fatalf("response\n got %s\nwant %s", got.RawJSON(), want.RawJSON())
	}
	for i, g := range got.Output {
		w := want.Output[i]
		if g.ID != w.ID || g.Type != w.Type || g.CallID != w.CallID || g.Name != w.Name || g.Status != w.Status {
			t.Errorf("item %d\n got %s\nwant %s", i, g.RawJSON(), w.RawJSON())
		}
		if g.Type == "function_call" && !jsonEqual(t, []byte(g.Arguments.OfString), []byte(w.Arguments.OfString)) {
			t.Errorf("item %d arguments %s, want %s", i, g.Arguments.OfString, w.Arguments.OfString)
		}
		if g.Type == "message" && g.Content[0].Text != w.Content[0].Text {
			t.Errorf("item %d text %q, want %q", i, g.Content[0].Text, w.Content[0].Text)
		}
	}
}

func TestResponsesFromAnthropicStreamRechunked(t *testing.T) {
	p, _ := For(Responses, Anthropic)
	checkRechunked(t, p, "anthropic")
}

func TestResponsesFromAnthropicStreamMalformed(t *testing.T) {
	p, _ := For(Responses, Anthropic)
	start := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"c\",\"usage\":{\"input_tokens\":1}}}\n\n"
	text0 := "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
	stop0 := "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
	end := "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":1}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	cases := map[string]string{
		"second message_start":       start + start + text0 + stop0 + end,
		"index gap":                  start + strings.Replace(text0, `"index":0`, `"index":1`, 1) + end,
		"delta to a closed block":    start + text0 + stop0 + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\n" + end,
		"stop without delta":         start + text0 + stop0 + "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
		"unknown stop reason":        start + text0 + stop0 + strings.Replace(end, "end_turn", "pause_turn", 1),
		"server tool block":          start + "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"server_tool_use\",\"id\":\"s\",\"name\":\"web_search\"}}\n\n",
		"json delta into text":       start + text0 + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n" + stop0 + end,
		"message_delta inside block": start + text0 + end,
		"unknown event":              start + "event: surprise\ndata: {\"type\":\"surprise\"}\n\n" + end,
		"array input":                start + "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"f\",\"input\":{}}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"[1]\"}}\n\n" + stop0 + end,
	}
	for name, stream := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := runStream(p, []byte(stream), nil)
			final, gerr := checkResponsesStream(t, out)
			if err == nil || final != nil || gerr != nil {
				t.Fatalf("err %v, clean %v, grammar %v\n%s", err, final != nil, gerr, out)
			}
		})
	}
}
