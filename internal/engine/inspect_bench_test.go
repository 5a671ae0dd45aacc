package engine

import (
	"testing"

	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
)

// BenchmarkInspectAnthropicDelta reads one content delta of each kind an
// agent's turn streams (text, thinking, its signature, a tool call's
// arguments) as the relay reads it, with the text.
func BenchmarkInspectAnthropicDelta(b *testing.B) {
	for _, c := range []struct{ name, data string }{
		{"text", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"I'll read the file to see what it holds."}}`},
		{"thinking", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":" the user wants the config read first, so"}}`},
		{"signature", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgwbqLNW7e0J3vQ0nC8iMPlX"}}`},
		{"tool_arguments", `{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"file_path\": \"/home/user/proj"}}`},
	} {
		ev := sse.Event{Name: []byte("content_block_delta"), Data: []byte(c.data)}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if info := dialectAnthropic.Inspect(ev, true, nil); info.By != "content_block_delta" {
					b.Fatalf("%+v", info)
				}
			}
		})
	}
}
