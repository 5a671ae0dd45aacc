package engine

import (
	"testing"

	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
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

// BenchmarkInspectResponsesDelta: the same for a Responses stream's
// deltas (the first of a stream's, read without its memo).
func BenchmarkInspectResponsesDelta(b *testing.B) {
	for _, c := range []struct{ name, data string }{
		{"text", `{"type":"response.output_text.delta","sequence_number":5,"item_id":"msg_68b9a1c2d3e4f5a6b7c8d9e0f1a2b3c4","output_index":1,"content_index":0,"delta":" I'll read the file","logprobs":[],"obfuscation":"aB3dE5fG"}`},
		{"reasoning_summary", `{"type":"response.reasoning_summary_text.delta","sequence_number":4,"item_id":"rs_6820f383d7c08191846711c5df8233bc","output_index":0,"summary_index":0,"delta":"**Reading the config**","obfuscation":"Wc"}`},
		{"function_arguments", `{"type":"response.function_call_arguments.delta","sequence_number":9,"item_id":"fc_67ca09c6bedc8190a7abfec07b1a1332","output_index":2,"delta":"{\"command\":[\"bash\",\"-lc\",","obfuscation":"bS"}`},
	} {
		ev := sse.Event{Data: []byte(c.data)}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if info := dialectResponses.Inspect(ev, true, nil); info.Class != wire.EvOutput {
					b.Fatalf("%+v", info)
				}
			}
		})
	}
}

// BenchmarkInspectChatToolArguments reads a Chat stream's run of one tool
// call's argument chunks as the relay does, with the stream's memo: the
// first is walked, the rest are read by the frame it leaves.
func BenchmarkInspectChatToolArguments(b *testing.B) {
	benchmarkInspectChatRun(b, "tool_calls", func(i int) string {
		return `{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\": \"src/m` + string(rune('a'+i%26)) + `\"}"}}]}`
	})
}

// BenchmarkInspectChatReasoning: the same for a run of reasoning chunks
// (DeepSeek's spelling, with "content":null).
func BenchmarkInspectChatReasoning(b *testing.B) {
	benchmarkInspectChatRun(b, "reasoning_content", func(i int) string {
		return `{"content":null,"reasoning_content":" the user wants the config read ` + string(rune('a'+i%26)) + `"}`
	})
}

func benchmarkInspectChatRun(b *testing.B, by string, delta func(i int) string) {
	const n = 64
	evs := make([]sse.Event, n)
	for i := range evs {
		evs[i] = sse.Event{Data: []byte(`{"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_eb9dce56a8","choices":[{"index":0,"delta":` +
			delta(i) + `,"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"x1"}`)}
	}
	b.ReportAllocs()
	for b.Loop() {
		var cs wire.ChoiceSet
		for _, ev := range evs {
			if info := dialectOpenAI.Inspect(ev, true, &cs); info.By != by {
				b.Fatalf("%+v", info)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
}

// BenchmarkInspectGeminiThoughts reads a Gemini stream's run of thought
// chunks (a thinking model's with includeThoughts, as Gemini CLI asks)
// as the relay does, with the stream's memo, then its run of text.
func BenchmarkInspectGeminiThoughts(b *testing.B) {
	const n = 64
	evs := make([]sse.Event, n)
	for i := range evs {
		part := `"text": "**Reading the config** The user wants the file ` + string(rune('a'+i%26)) + ` read first.","thought": true`
		if i >= n/2 {
			part = `"text": "I'll read the file ` + string(rune('a'+i%26)) + ` to see what it holds."`
		}
		evs[i] = sse.Event{Data: []byte(`{"candidates": [{"content": {"parts": [{` + part + `}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 5210,"totalTokenCount": 5290,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 5210}],"thoughtsTokenCount": 80},"modelVersion": "gemini-2.5-pro","responseId": "nKqAaMzXFoWe1MkP5rW4yQo"}`)}
	}
	b.ReportAllocs()
	for b.Loop() {
		var cs wire.ChoiceSet
		for i, ev := range evs {
			if info := dialectGemini.Inspect(ev, true, &cs); info.Class != wire.EvOutput || (info.By == "thought") != (i < n/2) {
				b.Fatalf("%d: %+v", i, info)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
}
