package translate

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// Property: a random conversation, written as the client's request and
// translated, reads back from the target's body as the same conversation
// except for what the translation declared lost.

// randomConversation draws a conversation of alternating turns with text,
// images, parallel tool calls and their results, reasoning, cache marks
// and error flags, as an Anthropic client would send it.
func randomConversation(rng *rand.Rand) *Request {
	word := func() string {
		words := []string{"alpha", "béta", "gamma \"q\"", "line\nbreak", "tab\t", "emoji 🙂", "<html>", "\\slash"}
		return words[rng.IntN(len(words))]
	}
	r := &Request{Model: "client-model", MaxTokens: responsesMinOutput + rng.IntN(4000), Stream: rng.IntN(2) == 0}
	if rng.IntN(2) == 0 {
		t := float64(rng.IntN(10)) / 10
		r.Temperature = &t
	}
	for range rng.IntN(3) {
		r.System = append(r.System, Block{Kind: KindText, Text: word(), Cache: rng.IntN(4) == 0})
	}
	for i := range rng.IntN(3) {
		r.Tools = append(r.Tools, Tool{Name: fmt.Sprintf("tool_%d", i), Description: word(),
			Schema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}}}`)})
	}
	if len(r.Tools) > 0 {
		modes := []string{ChoiceDefault, ChoiceAuto, ChoiceAny, ChoiceNone, ChoiceTool}
		r.ToolChoice.Mode = modes[rng.IntN(len(modes))]
		if r.ToolChoice.Mode == ChoiceTool {
			r.ToolChoice.Name = r.Tools[0].Name
		}
		r.ToolChoice.DisableParallel = r.ToolChoice.Mode != ChoiceNone && rng.IntN(3) == 0
	}
	var pending []string // calls of the last assistant turn
	calls := 0
	for turn := range 1 + rng.IntN(6) {
		if turn%2 == 0 {
			m := Message{Role: "user"}
			for _, id := range pending {
				res := Block{Kind: KindToolResult, ToolID: id, IsError: rng.IntN(5) == 0}
				for range rng.IntN(3) {
					res.Result = append(res.Result, Block{Kind: KindText, Text: word()})
				}
				if rng.IntN(8) == 0 {
					res.Result = append(res.Result, Block{Kind: KindImage, MediaType: "image/png", Data: "iVBORw0KGgo="})
				}
				m.Blocks = append(m.Blocks, res)
			}
			pending = nil
			for range 1 + rng.IntN(2) {
				m.Blocks = append(m.Blocks, Block{Kind: KindText, Text: word(), Cache: rng.IntN(5) == 0})
			}
			if rng.IntN(4) == 0 {
				m.Blocks = append(m.Blocks, Block{Kind: KindImage, MediaType: "image/png", Data: "iVBORw0KGgo="})
			}
			r.Messages = append(r.Messages, m)
			continue
		}
		m := Message{Role: "assistant"}
		if rng.IntN(3) == 0 {
			m.Blocks = append(m.Blocks, Block{Kind: KindReasoning, Text: word(), Opaque: &Opaque{Origin: Anthropic, Kind: "signature", Value: "c2ln"}})
		}
		m.Blocks = append(m.Blocks, Block{Kind: KindText, Text: word()})
		if len(r.Tools) > 0 {
			for range rng.IntN(3) {
				calls++
				id := fmt.Sprintf("toolu_%d", calls)
				m.Blocks = append(m.Blocks, Block{Kind: KindToolCall, ToolID: id, ToolName: r.Tools[0].Name,
					Args: json.RawMessage(fmt.Sprintf(`{"x":%q}`, word()))})
				pending = append(pending, id)
			}
		}
		r.Messages = append(r.Messages, m)
	}
	return r
}

// chatProjection is what a Chat target can hold of r, and the losses that
// explain the rest: system blocks joined, tool results first in a user
// turn and flattened to text, text before calls in an assistant turn.
func chatProjection(r *Request) (*Request, []string) {
	var lost expectedLosses
	note := lost.note
	out := *r
	out.Model = "gpt-5"
	out.System = joinedSystem(r.System, note)
	out.Messages = nil
	for _, m := range r.Messages {
		var results, rest []Block
		for _, b := range m.Blocks {
			if b.Cache {
				note("cache_control breakpoints")
			}
			switch b.Kind {
			case KindReasoning:
				note("anthropic reasoning state (kept for anthropic only)")
			case KindToolResult:
				if b.IsError {
					note("tool_result is_error flag")
				}
				results = append(results, Block{Kind: KindToolResult, ToolID: b.ToolID, Result: []Block{{Kind: KindText, Text: resultText(b.Result, note)}}})
			case KindToolCall:
				rest = append(rest, b)
			default:
				b.Cache = false
				rest = append(rest, b)
			}
		}
		slices.SortStableFunc(rest, func(a, b Block) int { return boolInt(a.Kind == KindToolCall) - boolInt(b.Kind == KindToolCall) })
		blocks := append(results, rest...)
		if n := len(out.Messages); n > 0 && out.Messages[n-1].Role == m.Role {
			out.Messages[n-1].Blocks = append(out.Messages[n-1].Blocks, blocks...)
		} else if len(blocks) > 0 {
			out.Messages = append(out.Messages, Message{Role: m.Role, Blocks: blocks})
		}
	}
	for i := range out.Tools {
		out.Tools[i].Cache = false
	}
	if r.ToolChoice.DisableParallel && r.ToolChoice.Mode == ChoiceDefault {
		out.ToolChoice.Mode = ChoiceAuto // Anthropic states it with tool_choice auto
	}
	return &out, lost
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// decodeChatRequest reads a Chat Completions request back into the
// intermediate form (the tests' inverse of encodeChatRequest).
func decodeChatRequest(t *testing.T, body []byte) *Request {
	var in struct {
		Model    string `json:"model"`
		Messages []struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			ToolCallID string          `json:"tool_call_id"`
			ToolCalls  []chatToolCall  `json:"tool_calls"`
		} `json:"messages"`
		MaxCompletionTokens int             `json:"max_completion_tokens"`
		Temperature         *float64        `json:"temperature"`
		TopP                *float64        `json:"top_p"`
		Stop                []string        `json:"stop"`
		Tools               []chatTool      `json:"tools"`
		ToolChoice          json.RawMessage `json:"tool_choice"`
		ParallelToolCalls   *bool           `json:"parallel_tool_calls"`
		Stream              bool            `json:"stream"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		t.Fatal(err)
	}
	r := &Request{Model: in.Model, MaxTokens: in.MaxCompletionTokens, Temperature: in.Temperature, TopP: in.TopP, Stop: in.Stop, Stream: in.Stream}
	add := func(role string, b ...Block) {
		if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == role {
			r.Messages[n-1].Blocks = append(r.Messages[n-1].Blocks, b...)
			return
		}
		r.Messages = append(r.Messages, Message{Role: role, Blocks: b})
	}
	content := func(raw json.RawMessage) []Block {
		if isNullish(raw) {
			return nil
		}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return []Block{{Kind: KindText, Text: s}}
		}
		var parts []chatPart
		if err := json.Unmarshal(raw, &parts); err != nil {
			t.Fatal(err)
		}
		var out []Block
		for _, p := range parts {
			if p.Type == "image_url" {
				out = append(out, imageFromURL(p.ImageURL.URL))
			} else {
				out = append(out, Block{Kind: KindText, Text: p.Text})
			}
		}
		return out
	}
	for _, m := range in.Messages {
		switch m.Role {
		case "system":
			r.System = append(r.System, content(m.Content)...)
		case "tool":
			add("user", Block{Kind: KindToolResult, ToolID: m.ToolCallID, Result: content(m.Content)})
		default:
			blocks := content(m.Content)
			for _, c := range m.ToolCalls {
				blocks = append(blocks, Block{Kind: KindToolCall, ToolID: c.ID, ToolName: c.Function.Name, Args: json.RawMessage(c.Function.Arguments)})
			}
			add(m.Role, blocks...)
		}
	}
	for _, tl := range in.Tools {
		r.Tools = append(r.Tools, Tool{Name: tl.Function.Name, Description: tl.Function.Description, Schema: tl.Function.Parameters})
	}
	var s string
	switch {
	case isNullish(in.ToolChoice):
	case json.Unmarshal(in.ToolChoice, &s) == nil:
		r.ToolChoice.Mode = map[string]string{"auto": ChoiceAuto, "required": ChoiceAny, "none": ChoiceNone}[s]
	default:
		var named struct{ Function struct{ Name string } }
		_ = json.Unmarshal(in.ToolChoice, &named)
		r.ToolChoice = ToolChoice{Mode: ChoiceTool, Name: named.Function.Name}
	}
	r.ToolChoice.DisableParallel = in.ParallelToolCalls != nil && !*in.ParallelToolCalls
	return r
}

// normalize makes two requests comparable: raw JSON compacted, empty
// slices nil.
func normalize(r *Request) {
	for i := range r.Messages {
		for j := range r.Messages[i].Blocks {
			b := &r.Messages[i].Blocks[j]
			if b.Args != nil {
				b.Args = canonicalJSON(b.Args)
			}
			if len(b.Result) == 0 {
				b.Result = nil
			}
		}
	}
	for i := range r.Tools {
		r.Tools[i].Schema = canonicalJSON(r.Tools[i].Schema)
	}
}

// canonicalJSON re-marshals a value, so equal values are equal bytes.
func canonicalJSON(v json.RawMessage) json.RawMessage {
	var x any
	if err := json.Unmarshal(v, &x); err != nil {
		return v
	}
	b, _ := json.Marshal(x)
	return b
}

func TestPropertyAnthropicToChatRoundTrip(t *testing.T) {
	p, _ := For(Anthropic, OpenAI)
	eachAnthropicTranslation(t, p, "gpt-5", 1, func(i int, conv *Request, client, out []byte, losses []Loss) {
		want, lost := chatProjection(conv)
		if conv.MaxTokens == 0 {
			want.MaxTokens = 0
		}
		checkRoundTrip(t, i, client, decodeChatRequest(t, out), want, losses, prefillLost(conv, anthropicPrefill, lost))
	})
}

// firstDiff names the first part where two requests differ.
func firstDiff(got, want *Request) string {
	for i := range max(len(got.Messages), len(want.Messages)) {
		var g, w any
		if i < len(got.Messages) {
			g = got.Messages[i]
		}
		if i < len(want.Messages) {
			w = want.Messages[i]
		}
		if !reflect.DeepEqual(g, w) {
			gj, _ := json.Marshal(g)
			wj, _ := json.Marshal(w)
			return fmt.Sprintf("message %d\n got %s\nwant %s", i, gj, wj)
		}
	}
	g2, w2 := *got, *want
	g2.Messages, w2.Messages = nil, nil
	gj, _ := json.Marshal(g2)
	wj, _ := json.Marshal(w2)
	return fmt.Sprintf(" got %s\nwant %s", gj, wj)
}
