package translate

import (
	"io"
	"testing"

	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse/ssetest"
)

// The end of each target's stream, after its text deltas.
var streamTails = map[string]string{
	OpenAI: `data: {"id":"chatcmpl-A1","object":"chat.completion.chunk","created":1733000000,"model":"gpt-5","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}` + "\n\n" +
		`data: {"id":"chatcmpl-A1","object":"chat.completion.chunk","created":1733000000,"model":"gpt-5","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":54,"total_tokens":63}}` + "\n\ndata: [DONE]\n\n",
	Anthropic: "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":54}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
	Gemini: `data: {"candidates": [{"content": {"parts": [{"text": "."}],"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": {"promptTokenCount": 9,"candidatesTokenCount": 54,"totalTokenCount": 63},"modelVersion": "gemini-2.5-pro","responseId": "rsp-T1"}` + "\n\n",
	Responses: "event: response.output_text.done\ndata: {\"type\":\"response.output_text.done\",\"sequence_number\":60,\"item_id\":\"msg_T1\",\"output_index\":0,\"content_index\":0,\"text\":\"x\",\"logprobs\":[]}\n\n" +
		"event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"sequence_number\":61,\"output_index\":0,\"item\":{\"id\":\"msg_T1\",\"type\":\"message\",\"status\":\"completed\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"x\",\"annotations\":[]}]}}\n\n" +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":62,\"response\":{\"id\":\"resp_T1\",\"object\":\"response\",\"status\":\"completed\",\"model\":\"gpt-5\",\"output\":[{\"id\":\"msg_T1\",\"type\":\"message\",\"status\":\"completed\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"x\",\"annotations\":[]}]}],\"usage\":{\"input_tokens\":9,\"output_tokens\":54,\"total_tokens\":63}}}\n\n",
}

// benchRequests are the client bodies the end-to-end bench sends
// (bench/modes.go), a Gemini one marked streamed as the engine marks it.
var benchRequests = map[string]string{
	Anthropic: `{"model":"claude-bench","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":"Write a short paragraph about the sea."}]}`,
	OpenAI:    `{"model":"gpt-bench","stream":true,"stream_options":{"include_usage":true},"max_tokens":1024,"messages":[{"role":"user","content":"Write a short paragraph about the sea."}]}`,
	Responses: `{"model":"gpt-bench","stream":true,"store":false,"max_output_tokens":1024,"input":"Write a short paragraph about the sea."}`,
	Gemini:    string(WithGeminiStream([]byte(`{"contents":[{"role":"user","parts":[{"text":"Write a short paragraph about the sea."}]}],"generationConfig":{"maxOutputTokens":1024}}`))),
}

// BenchmarkTranslateRequestStream is one whole request of each pair, as
// the end-to-end bench's: the request translated, then its stream (head,
// 54 text deltas, tail) into a buffer reused across requests.
func BenchmarkTranslateRequestStream(b *testing.B) {
	for _, p := range Pairs() {
		b.Run(p[0]+"-"+p[1], func(b *testing.B) {
			pair, _ := For(p[0], p[1])
			head, delta := steadyState(b, p[0], p[1])
			raw := []byte(head)
			for range 54 {
				raw = append(raw, delta...)
			}
			raw = append(raw, streamTails[p[1]]...)
			body := []byte(benchRequests[p[0]])
			rd := sse.NewReader(nil, 0)
			dst := make([]byte, 0, 64<<10)
			b.ReportAllocs()
			for b.Loop() {
				tr, err := pair.Translate(body, translateBenchModel)
				if err != nil || Material(tr.Losses) {
					b.Fatal(err, tr.Losses)
				}
				rd.Reset(&ssetest.RepeatReader{Event: raw, N: 1})
				s := tr.NewStream()
				out := dst[:0]
				for {
					ev, err := rd.Next()
					if err == io.EOF {
						break
					}
					if out, err = s.Event(out, ev); err != nil {
						b.Fatal(err)
					}
				}
				if out, err = s.End(out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

const translateBenchModel = "bench-model"
