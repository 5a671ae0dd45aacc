package gemini

import (
	"testing"

	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// A thinking model's thought chunks (Gemini CLI asks for them) are read
// by their shape and then by the frame the first leaves, as the answer's
// text is; the memo says the frame holds a thought, so no chunk read by
// it gives the thought's text or reads as plain. (The readings are
// checked against the walk's in the engine's
// TestInspectMatchesOldClassification and FuzzInspectSequence.)
func TestInspectThoughtsFramed(t *testing.T) {
	chunk := func(part string) sse.Event {
		return sse.Event{Data: []byte(`{"candidates": [{"content": {"parts": [{` + part + `}],"role": "model"},"index": 0}],` +
			`"usageMetadata": {"promptTokenCount": 5,"totalTokenCount": 29,"thoughtsTokenCount": 24},"modelVersion": "gemini-2.5-pro","responseId": "r1"}`)}
	}
	var st Stream
	for i, part := range []string{`"text": "**Planning**","thought": true`, `"text": "The user wants x.","thought": true`, `"text": "and y.","thought": true`} {
		info := InspectGeminiStream(chunk(part), true, &st)
		if info.Class != wire.EvOutput || info.By != "thought" || info.Text != nil || info.Plain {
			t.Fatalf("thought %d: %+v", i, info)
		}
		if m := st.memo(); i > 0 && (m == nil || m.ChunkSplit == 0 || m.ChunkBy != "thought" || m.FrameBy != "thought") {
			t.Fatalf("thought %d left no thought's frame: %+v", i, m)
		}
	}
	if _, _, _, thought, _, ok := st.framedChunk(chunk(`"text": "z","thought": true`).Data); !ok || !thought {
		t.Fatalf("the next thought is not read by the frame as a thought: %v %v", ok, thought)
	}
	// The answer's text after them has another frame: walked, then framed.
	for i, text := range []string{`"I'll read it."`, `"Done."`} {
		info := InspectGeminiStream(chunk(`"text": `+text), true, &st)
		if info.Class != wire.EvOutput || info.By != "text" || string(info.Text) != text || !info.Plain {
			t.Fatalf("text %d: %+v", i, info)
		}
		if m := st.memo(); i > 0 && (m.ChunkSplit == 0 || m.ChunkBy != "" || m.FrameBy != "") {
			t.Fatalf("text %d left a thought's frame: %+v", i, m)
		}
	}
}
