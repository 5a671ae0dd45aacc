package translate

import (
	"io"
	"testing"

	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse/ssetest"
)

// Each target's stream head and one typical text-delta event, the bulk
// of a stream.
var (
	chatHead      = `data: {"id":"chatcmpl-A1","object":"chat.completion.chunk","created":1733000000,"model":"gpt-5","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}` + "\n\n"
	chatDelta     = `data: {"id":"chatcmpl-A1","object":"chat.completion.chunk","created":1733000000,"model":"gpt-5","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":" the quick brown fox jumps over"},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n"
	anthropicHead = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-sonnet-4-5\",\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
	anthropicDelta = ssetest.AnthropicDelta
	geminiHead     = `data: {"candidates": [{"content": {"parts": [{"text": "Hello"}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 9,"totalTokenCount": 9},"modelVersion": "gemini-2.5-pro","responseId": "rsp-T1"}` + "\n\n"
	geminiDelta    = `data: {"candidates": [{"content": {"parts": [{"text": " the quick brown fox jumps over"}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 9,"totalTokenCount": 9},"modelVersion": "gemini-2.5-pro","responseId": "rsp-T1"}` + "\n\n"
	responsesHead  = "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_T1\",\"object\":\"response\",\"status\":\"in_progress\",\"model\":\"gpt-5\",\"output\":[]}}\n\n" +
		"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":1,\"output_index\":0,\"item\":{\"id\":\"msg_T1\",\"type\":\"message\",\"status\":\"in_progress\",\"role\":\"assistant\",\"content\":[]}}\n\n"
	responsesDelta = "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":5,\"item_id\":\"msg_T1\",\"output_index\":0,\"content_index\":0,\"delta\":\" the quick brown fox jumps over\",\"logprobs\":[]}\n\n"
)

// steadyStates are, per pair (every one: TestStreamEventAllocs checks),
// the target's stream head and text delta.
var steadyStates = []struct {
	client, target string
	head, delta    string
}{
	{Anthropic, OpenAI, chatHead, chatDelta},
	{Responses, Anthropic, anthropicHead, anthropicDelta},
	{Anthropic, Gemini, geminiHead, geminiDelta},
	{Anthropic, Responses, responsesHead, responsesDelta},
	// Chat Completions clients.
	{OpenAI, Anthropic, anthropicHead, anthropicDelta},
	{OpenAI, Gemini, geminiHead, geminiDelta},
	{OpenAI, Responses, responsesHead, responsesDelta},
	// Gemini clients, and Responses clients on Gemini and Chat.
	{Gemini, Anthropic, anthropicHead, anthropicDelta},
	{Gemini, OpenAI, chatHead, chatDelta},
	{Responses, Gemini, geminiHead, geminiDelta},
	{Responses, OpenAI, chatHead, chatDelta},
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

// A steady-state text delta allocates nothing, in every pair.
func TestStreamEventAllocs(t *testing.T) {
	for _, p := range Pairs() {
		steadyState(t, p[0], p[1])
	}
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

// steadyState is the steady state of the pair client<-target.
func steadyState(t testing.TB, client, target string) (head, delta string) {
	for _, st := range steadyStates {
		if st.client == client && st.target == target {
			return st.head, st.delta
		}
	}
	t.Fatalf("no steady state for %s<-%s", client, target)
	return "", ""
}

// benchSteadyState measures the stream of client<-target translated,
// against the same stream relayed untranslated.
func benchSteadyState(b *testing.B, client, target string) {
	head, delta := steadyState(b, client, target)
	b.Run("translated", func(b *testing.B) { benchStream(b, client, target, head, delta, true) })
	b.Run("untranslated", func(b *testing.B) { benchStream(b, client, target, head, delta, false) })
}

// BenchmarkTranslateStreamChat: an Anthropic client's stream from a Chat
// provider, against the same stream relayed untranslated.
func BenchmarkTranslateStreamChat(b *testing.B) {
	benchSteadyState(b, Anthropic, OpenAI)
}

// BenchmarkTranslateStreamResponses: a Responses client's stream from an
// Anthropic provider.
func BenchmarkTranslateStreamResponses(b *testing.B) {
	benchSteadyState(b, Responses, Anthropic)
}

// BenchmarkTranslateStreamGemini: an Anthropic client's stream from a
// Gemini provider.
func BenchmarkTranslateStreamGemini(b *testing.B) {
	benchSteadyState(b, Anthropic, Gemini)
}

// BenchmarkTranslateStreamResponsesTarget: an Anthropic client's stream
// from an OpenAI Responses provider.
func BenchmarkTranslateStreamResponsesTarget(b *testing.B) {
	benchSteadyState(b, Anthropic, Responses)
}

// BenchmarkTranslateStreamChatClient: a Chat Completions client's stream
// from each target, against the same stream relayed untranslated.
func BenchmarkTranslateStreamChatClient(b *testing.B) {
	for _, target := range []string{Anthropic, Gemini, Responses} {
		b.Run(target, func(b *testing.B) { benchSteadyState(b, OpenAI, target) })
	}
}

// BenchmarkTranslateStreamGeminiClientAnthropic: a Gemini client's stream
// from an Anthropic provider.
func BenchmarkTranslateStreamGeminiClientAnthropic(b *testing.B) {
	benchSteadyState(b, Gemini, Anthropic)
}

// BenchmarkTranslateStreamGeminiClientChat: a Gemini client's stream from
// a Chat provider.
func BenchmarkTranslateStreamGeminiClientChat(b *testing.B) {
	benchSteadyState(b, Gemini, OpenAI)
}

// BenchmarkTranslateStreamResponsesGemini: a Responses client's stream
// from a Gemini provider.
func BenchmarkTranslateStreamResponsesGemini(b *testing.B) {
	benchSteadyState(b, Responses, Gemini)
}

// BenchmarkTranslateStreamResponsesChat: a Responses client's stream from
// a Chat provider (Codex on vLLM, Ollama...).
func BenchmarkTranslateStreamResponsesChat(b *testing.B) {
	benchSteadyState(b, Responses, OpenAI)
}
