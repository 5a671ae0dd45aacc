package translate

import (
	"io"
	"testing"

	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse/ssetest"
)

// steadyStates are, per pair, the stream's head and one typical text-delta
// event of the target, the bulk of a stream.
var steadyStates = []struct {
	client, target string
	head, delta    string
}{
	{Anthropic, OpenAI,
		`data: {"id":"chatcmpl-A1","object":"chat.completion.chunk","created":1733000000,"model":"gpt-5","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}` + "\n\n",
		`data: {"id":"chatcmpl-A1","object":"chat.completion.chunk","created":1733000000,"model":"gpt-5","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":" the quick brown fox jumps over"},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n"},
	{Responses, Anthropic,
		"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-sonnet-4-5\",\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n" +
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
		ssetest.AnthropicDelta},
	{Anthropic, Gemini,
		`data: {"candidates": [{"content": {"parts": [{"text": "Hello"}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 9,"totalTokenCount": 9},"modelVersion": "gemini-2.5-pro","responseId": "rsp-T1"}` + "\n\n",
		`data: {"candidates": [{"content": {"parts": [{"text": " the quick brown fox jumps over"}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 9,"totalTokenCount": 9},"modelVersion": "gemini-2.5-pro","responseId": "rsp-T1"}` + "\n\n"},
	{Anthropic, Responses,
		"event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_T1\",\"object\":\"response\",\"status\":\"in_progress\",\"model\":\"gpt-5\",\"output\":[]}}\n\n" +
			"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":1,\"output_index\":0,\"item\":{\"id\":\"msg_T1\",\"type\":\"message\",\"status\":\"in_progress\",\"role\":\"assistant\",\"content\":[]}}\n\n",
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":5,\"item_id\":\"msg_T1\",\"output_index\":0,\"content_index\":0,\"delta\":\" the quick brown fox jumps over\",\"logprobs\":[]}\n\n"},
	// Phase 2: the Gemini and Responses clients' pairs, on the same target
	// streams as above.
	{Gemini, Anthropic,
		"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-sonnet-4-5\",\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n" +
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
		ssetest.AnthropicDelta},
	{Gemini, OpenAI,
		`data: {"id":"chatcmpl-A1","object":"chat.completion.chunk","created":1733000000,"model":"gpt-5","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}` + "\n\n",
		`data: {"id":"chatcmpl-A1","object":"chat.completion.chunk","created":1733000000,"model":"gpt-5","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":" the quick brown fox jumps over"},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n"},
	{Responses, Gemini,
		`data: {"candidates": [{"content": {"parts": [{"text": "Hello"}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 9,"totalTokenCount": 9},"modelVersion": "gemini-2.5-pro","responseId": "rsp-T1"}` + "\n\n",
		`data: {"candidates": [{"content": {"parts": [{"text": " the quick brown fox jumps over"}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 9,"totalTokenCount": 9},"modelVersion": "gemini-2.5-pro","responseId": "rsp-T1"}` + "\n\n"},
	{Responses, OpenAI,
		`data: {"id":"chatcmpl-A1","object":"chat.completion.chunk","created":1733000000,"model":"gpt-5","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"},"finish_reason":null}],"usage":null}` + "\n\n",
		`data: {"id":"chatcmpl-A1","object":"chat.completion.chunk","created":1733000000,"model":"gpt-5","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":" the quick brown fox jumps over"},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n"},
}

func firstEvent(t testing.TB, raw string) sse.Event {
	ev, err := sse.NewReader(stringsReader(raw), 0).Next()
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// feedHead sends every event of a stream's head.
func feedHead(t testing.TB, s Stream, dst []byte, head string) []byte {
	rd := sse.NewReader(stringsReader(head), 0)
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return dst
		}
		if err != nil {
			t.Fatal(err)
		}
		if dst, err = s.Event(dst, ev); err != nil {
			t.Fatal(err)
		}
	}
}

// A steady-state text delta allocates nothing.
func TestStreamEventAllocs(t *testing.T) {
	for _, st := range steadyStates {
		p, _ := For(st.client, st.target)
		s := minimal(p).NewStream()
		dst := make([]byte, 0, 4096)
		var err error
		dst = feedHead(t, s, dst, st.head)
		ev := firstEvent(t, st.delta)
		if dst, err = s.Event(dst[:0], ev); err != nil || len(dst) == 0 {
			t.Fatalf("%s<-%s: %v, %d bytes", st.client, st.target, err, len(dst))
		}
		allocs := testing.AllocsPerRun(1000, func() {
			dst, err = s.Event(dst[:0], ev)
		})
		if err != nil || allocs != 0 {
			t.Errorf("%s<-%s: %v allocations per text delta (err %v)", st.client, st.target, allocs, err)
		}
	}
}

func benchStream(b *testing.B, client, target, head, delta string, translate bool) {
	const deltas = 1000
	p, _ := For(client, target)
	tr := minimal(p)
	rd := sse.NewReader(nil, 0)
	dst := make([]byte, 0, 64<<10)
	b.ReportAllocs()
	b.SetBytes(int64(len(head) + deltas*len(delta)))
	for b.Loop() {
		rd.Reset(&ssetest.RepeatReader{Event: []byte(delta), N: deltas, Tail: nil})
		s := tr.NewStream()
		out := feedHead(b, s, dst[:0], head)
		for {
			ev, err := rd.Next()
			if err == io.EOF {
				break
			}
			if translate {
				out, err = s.Event(out[:0], ev)
				if err != nil {
					b.Fatal(err)
				}
			} else {
				out = append(out[:0], ev.Raw...)
			}
		}
	}
}

// benchSteadyState measures steadyStates[i] translated, against the same
// stream relayed untranslated.
func benchSteadyState(b *testing.B, i int) {
	st := steadyStates[i]
	b.Run("translated", func(b *testing.B) { benchStream(b, st.client, st.target, st.head, st.delta, true) })
	b.Run("untranslated", func(b *testing.B) { benchStream(b, st.client, st.target, st.head, st.delta, false) })
}

// BenchmarkTranslateStreamChat: an Anthropic client's stream from a Chat
// provider, against the same stream relayed untranslated.
func BenchmarkTranslateStreamChat(b *testing.B) {
	benchSteadyState(b, 0)
}

// BenchmarkTranslateStreamResponses: a Responses client's stream from an
// Anthropic provider.
func BenchmarkTranslateStreamResponses(b *testing.B) {
	benchSteadyState(b, 1)
}

// BenchmarkTranslateStreamGemini: an Anthropic client's stream from a
// Gemini provider.
func BenchmarkTranslateStreamGemini(b *testing.B) {
	benchSteadyState(b, 2)
}

// BenchmarkTranslateStreamResponsesTarget: an Anthropic client's stream
// from an OpenAI Responses provider.
func BenchmarkTranslateStreamResponsesTarget(b *testing.B) {
	benchSteadyState(b, 3)
}

// BenchmarkTranslateStreamGeminiClientAnthropic: a Gemini client's stream
// from an Anthropic provider.
func BenchmarkTranslateStreamGeminiClientAnthropic(b *testing.B) {
	benchSteadyState(b, 4)
}

// BenchmarkTranslateStreamGeminiClientChat: a Gemini client's stream from
// a Chat provider.
func BenchmarkTranslateStreamGeminiClientChat(b *testing.B) {
	benchSteadyState(b, 5)
}

// BenchmarkTranslateStreamResponsesGemini: a Responses client's stream
// from a Gemini provider.
func BenchmarkTranslateStreamResponsesGemini(b *testing.B) {
	benchSteadyState(b, 6)
}

// BenchmarkTranslateStreamResponsesChat: a Responses client's stream from
// a Chat provider (Codex on vLLM, Ollama...).
func BenchmarkTranslateStreamResponsesChat(b *testing.B) {
	benchSteadyState(b, 7)
}
