package e2e

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// xlRefusals are the answers of each target format that refuse with no
// content: a Chat stream ending in finish_reason content_filter with no
// delta text, Gemini's finishReason SAFETY with no parts, a Responses
// response incomplete for content_filter with no output. Each is given
// as a stream (SSE events) and as a non-stream body.
var xlRefusals = map[string]struct {
	stream []string
	body   string
}{
	"openai": {
		stream: []string{
			`{"id":"chatcmpl-r","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
			`{"id":"chatcmpl-r","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":{},"finish_reason":"content_filter"}]}`,
			`{"id":"chatcmpl-r","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":0,"total_tokens":7}}`,
			`[DONE]`,
		},
		body: `{"id":"chatcmpl-r","object":"chat.completion","created":1,"model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant","content":null},"finish_reason":"content_filter"}],"usage":{"prompt_tokens":7,"completion_tokens":0,"total_tokens":7}}`,
	},
	"gemini": {
		stream: []string{
			`{"candidates":[{"finishReason":"SAFETY","index":0,"safetyRatings":[{"category":"HARM_CATEGORY_DANGEROUS_CONTENT","probability":"HIGH","blocked":true}]}],"usageMetadata":{"promptTokenCount":7,"totalTokenCount":7},"modelVersion":"gemini-x"}`,
		},
		body: `{"candidates":[{"finishReason":"SAFETY","index":0}],"usageMetadata":{"promptTokenCount":7,"totalTokenCount":7},"modelVersion":"gemini-x"}`,
	},
	"responses": {
		stream: []string{
			`{"type":"response.created","sequence_number":0,"response":{"id":"resp_r","object":"response","status":"in_progress","model":"gpt-x","output":[]}}`,
			`{"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_r","object":"response","status":"in_progress","model":"gpt-x","output":[]}}`,
			`{"type":"response.incomplete","sequence_number":2,"response":{"id":"resp_r","object":"response","status":"incomplete","incomplete_details":{"reason":"content_filter"},"model":"gpt-x","output":[],"usage":{"input_tokens":7,"output_tokens":0,"total_tokens":7}}}`,
		},
		body: `{"id":"resp_r","object":"response","status":"incomplete","incomplete_details":{"reason":"content_filter"},"model":"gpt-x","output":[],"usage":{"input_tokens":7,"output_tokens":0,"total_tokens":7}}`,
	},
}

// A translated answer that refuses with no content is the model's answer,
// not a provider fault: an Anthropic client gets stop_reason refusal, as a
// stream and not, and the next provider is never asked (failing over would
// bill the prompt twice, and a less careful provider might answer it).
func TestTranslatedRefusalIsDelivered(t *testing.T) {
	for target, r := range xlRefusals {
		t.Run(target, func(t *testing.T) {
			var calls atomic.Int64
			var events []string
			for _, ev := range r.stream {
				events = append(events, "data: "+ev)
			}
			refusing := cannedUpstream(t, &calls, r.body, events...)
			backup := newUpstream(t, sim.Config{})
			p := startProxy(t, fmt.Sprintf("\t\tprovider refusing %s {\n\t\t\tapi %s\n\t\t\tkey sk-target\n\t\t\ttranslate anthropic\n\t\t}\n", refusing, target)+
				provider("backup", backup, "api anthropic", "priority 1")+
				"\t\thedge {\n\t\t\toff\n\t\t}\n\t\tretry {\n\t\t\tsame_provider 0\n\t\t}\n")
			c := anthropicClient(p, "sk-client")
			for _, stream := range []bool{false, true} {
				params := anthropic.MessageNewParams{
					Model: "claude-sonnet-4-5", MaxTokens: 64,
					Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("something the filter blocks"))},
				}
				var hdr http.Header
				msg := xlSend(t, c, params, stream, &hdr)
				if msg.StopReason != anthropic.StopReasonRefusal || len(msg.Content) != 0 {
					t.Errorf("stream=%v: stop_reason %q content %s, want refusal with no content", stream, msg.StopReason, msg.RawJSON())
				}
			}
			if n := completions(backup); n != 0 {
				t.Errorf("the refusal failed over: the backup provider was asked %d times", n)
			}
			if n := calls.Load(); n != 2 {
				t.Errorf("the refusing provider was asked %d times, want 2 (once per request)", n)
			}
		})
	}
}
