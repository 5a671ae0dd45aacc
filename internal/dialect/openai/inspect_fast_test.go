package openai

import (
	"testing"

	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// The frame a walked content delta leaves is what the next deltas are
// read by: OpenAI's (obfuscation after "usage":null) and a provider's
// without either; what the walk must read again is left to it (the
// readings themselves are checked against the walk's in the root
// package's TestInspectMatchesOldClassification and FuzzInspectSequence).
func TestInspectFramed(t *testing.T) {
	openAI := func(text, obf string) string {
		return `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-x","system_fingerprint":"fp","choices":[{"index":0,"delta":{"content":` +
			text + `},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":` + obf + `}`
	}
	plain := func(text string) string {
		return `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":` + text + `},"finish_reason":null}]}`
	}
	for _, c := range []struct {
		name, first, next string
		framed            bool
		odd, null         bool
	}{
		{"OpenAI, another obfuscation", openAI(`"Hel"`, `"ab"`), openAI(`"lo \"x\""`, `"xyz1"`), true, true, true},
		{"OpenAI, an empty text", openAI(`"Hel"`, `"ab"`), openAI(`""`, `"x"`), false, true, true},
		{"OpenAI, obfuscation not a string", openAI(`"Hel"`, `"ab"`), openAI(`"lo"`, `1`), false, true, true},
		{"plain provider", plain(`"a"`), plain(`"b"`), true, false, false},
		{"plain provider, a finish", plain(`"a"`), `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"b"},"finish_reason":"stop"}]}`, false, false, false},
		{"plain provider, trailing space", plain(`"a"`), plain(`"b"`) + "  ", true, false, false},
		{"plain provider, more after", plain(`"a"`), plain(`"b"`) + `,"x":1}`, false, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var cs wire.ChoiceSet
			first := inspectOpenAI(sse.Event{Data: []byte(c.first)}, true, &cs)
			if first.Class != wire.EvOutput || cs.Memo == nil || cs.Memo.FrameSplit == 0 {
				t.Fatalf("the walk left no frame: %+v, memo %+v", first, cs.Memo)
			}
			if cs.Memo.FrameOdd != c.odd || cs.Memo.FrameNull != c.null {
				t.Fatalf("frame odd %v null %v, want %v %v", cs.Memo.FrameOdd, cs.Memo.FrameNull, c.odd, c.null)
			}
			got, ok := inspectFramed([]byte(c.next), true, &cs)
			if ok != c.framed {
				t.Fatalf("read by the frame: %v, want %v (%+v)", ok, c.framed, got)
			}
			if !ok {
				return
			}
			walked := inspectOpenAI(sse.Event{Data: []byte(c.next)}, true, nil)
			if got.Class != walked.Class || got.By != walked.By || string(got.Text) != string(walked.Text) || got.Plain != walked.Plain ||
				got.UsageRead != walked.UsageRead || string(got.Usage) != string(walked.Usage) || got.ErrVal != nil {
				t.Fatalf("framed %+v, walked %+v", got, walked)
			}
			// A stream with no resumer (a translated one) reads by the
			// frame too, as the walk reads without the text.
			got, ok = inspectFramed([]byte(c.next), false, &cs)
			walked = inspectOpenAI(sse.Event{Data: []byte(c.next)}, false, nil)
			if !ok || got.Text != nil || got.Plain || got.Class != walked.Class || got.By != walked.By || walked.Text != nil ||
				got.UsageRead != walked.UsageRead || string(got.Usage) != string(walked.Usage) {
				t.Fatalf("without the text: framed %v %+v, walked %+v", ok, got, walked)
			}
		})
	}
}

// A stream whose chunks never repeat their frame (each stamped with its
// own created) stops keeping frames after wire.MemoMisses of them; one
// that meets its frame again keeps going.
func TestInspectFramedGivesUp(t *testing.T) {
	chunk := func(created int, text string) []byte {
		return []byte(`{"id":"c","object":"chat.completion.chunk","created":` + string(rune('1'+created)) +
			`,"model":"m","choices":[{"index":0,"delta":{"content":"` + text + `"},"finish_reason":null}]}`)
	}
	var cs wire.ChoiceSet
	for i := range wire.MemoMisses + 2 {
		info := inspectOpenAI(sse.Event{Data: chunk(i, "x")}, true, &cs)
		if info.Class != wire.EvOutput || string(info.Text) != `"x"` {
			t.Fatalf("chunk %d: %+v", i, info)
		}
		if kept := cs.Memo.FrameSplit > 0; kept != (i < wire.MemoMisses-1) {
			t.Fatalf("after chunk %d: frame kept %v, misses %d", i, kept, cs.Memo.FrameMisses)
		}
	}
	cs = wire.ChoiceSet{}
	for i := range 3 * wire.MemoMisses {
		created := i / 2 // each frame met once again, then another
		inspectOpenAI(sse.Event{Data: chunk(created, "y")}, true, &cs)
		if cs.Memo.FrameSplit == 0 {
			t.Fatalf("chunk %d: a stream that meets its frames stopped keeping them", i)
		}
	}
}

// A tool call's argument chunks leave their frame around the arguments:
// the next one is read by it as the walk reads it (output, tool_calls, no
// text); a call's first chunk (its id and name) leaves none.
func TestInspectFramedToolArguments(t *testing.T) {
	chunk := func(call string) []byte {
		return []byte(`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[` +
			call + `]},"finish_reason":null}],"usage":null,"obfuscation":"ab"}`)
	}
	var cs wire.ChoiceSet
	first := inspectOpenAI(sse.Event{Data: chunk(`{"index":0,"id":"call_1","type":"function","function":{"name":"read","arguments":""}}`)}, true, &cs)
	if first.By != "tool_calls" || cs.Memo != nil && cs.Memo.FrameSplit != 0 {
		t.Fatalf("a call's first chunk: %+v, memo %+v", first, cs.Memo)
	}
	inspectOpenAI(sse.Event{Data: chunk(`{"index":0,"function":{"arguments":"{\"pa"}}`)}, true, &cs)
	if cs.Memo == nil || cs.Memo.FrameSplit == 0 || cs.Memo.FrameBy != "tool_calls" || !cs.Memo.FrameOdd || !cs.Memo.FrameNull {
		t.Fatalf("no tool frame: %+v", cs.Memo)
	}
	next := chunk(`{"index":0,"function":{"arguments":"th\": \"a\"}"}}`)
	for _, withText := range []bool{true, false} {
		got, ok := inspectFramed(next, withText, &cs)
		walked := inspectOpenAI(sse.Event{Data: next}, withText, nil)
		if !ok || got.Class != walked.Class || got.By != "tool_calls" || got.By != walked.By || got.Text != nil || walked.Text != nil ||
			got.Plain || walked.Plain || got.UsageRead != walked.UsageRead || string(got.Usage) != string(walked.Usage) {
			t.Fatalf("with text %v: framed %v %+v, walked %+v", withText, ok, got, walked)
		}
	}
}
