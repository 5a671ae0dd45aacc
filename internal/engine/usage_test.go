package engine

import (
	"testing"

	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

func TestUsageStream(t *testing.T) {
	tests := []struct {
		name   string
		d      wire.Dialect
		stream []string
		want   wire.Usage
	}{
		{
			name: "anthropic",
			d:    dialectAnthropic,
			stream: []string{
				anthropicEvent("message_start", aMessageStart),
				anthropicEvent("content_block_start", aBlockStart),
				anthropicEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\"usage\":{\"output_tokens\":999}"}}`),
				anthropicEvent("message_delta", aMessageDelta),
				anthropicEvent("message_stop", aMessageStop),
			},
			want: wire.Usage{Input: 25, Output: 15, CacheRead: 2000, CacheWrite: 100, Model: "claude-sonnet-4-5"},
		},
		{
			name: "anthropic message_delta with corrected input and zero cache",
			d:    dialectAnthropic,
			stream: []string{
				anthropicEvent("message_start", aMessageStart),
				anthropicEvent("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"input_tokens":30,"cache_read_input_tokens":0,"output_tokens":77}}`),
			},
			want: wire.Usage{Input: 30, Output: 77, CacheRead: 2000, CacheWrite: 100, Model: "claude-sonnet-4-5"},
		},
		{
			name: "anthropic unnamed events",
			d:    dialectAnthropic,
			stream: []string{
				"data: " + aMessageStart,
				"data: " + aMessageDelta,
			},
			want: wire.Usage{Input: 25, Output: 15, CacheRead: 2000, CacheWrite: 100, Model: "claude-sonnet-4-5"},
		},
		{
			name: "openai with include_usage",
			d:    dialectOpenAI,
			stream: []string{
				openAIChunk(`{"id":"c","model":"gpt-4o-2024-08-06","choices":[{"delta":{"role":"assistant","content":""}}],"usage":null}`),
				openAIChunk(`{"id":"c","model":"other","choices":[{"delta":{"content":"\"usage\":{\"prompt_tokens\":1}"}}],"usage":null}`),
				openAIChunk(oUsage),
				"data: [DONE]",
			},
			want: wire.Usage{Input: 30, Output: 12, CacheRead: 20, Model: "gpt-4o-2024-08-06"},
		},
		{
			name:   "openai without usage",
			d:      dialectOpenAI,
			stream: []string{openAIChunk(oRole), openAIChunk(oContent), "data: [DONE]"},
			want:   wire.Usage{Model: "gpt-4o"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var u wire.Usage
			for _, e := range parseEvents(t, sseStream(tt.stream...)) {
				u.ObserveEvent(tt.d, e)
			}
			if u != tt.want {
				t.Errorf("usage = %+v, want %+v", u, tt.want)
			}
		})
	}
}

func TestUsageBody(t *testing.T) {
	tests := []struct {
		name string
		d    wire.Dialect
		body string
		want wire.Usage
	}{
		{
			name: "anthropic",
			d:    dialectAnthropic,
			body: `{"id":"msg_1","type":"message","model":"claude-haiku-4-5","content":[{"type":"text","text":"Hi"}],"usage":{"input_tokens":12,"cache_creation_input_tokens":0,"cache_read_input_tokens":50,"output_tokens":6}}`,
			want: wire.Usage{Input: 12, Output: 6, CacheRead: 50, Model: "claude-haiku-4-5"},
		},
		{
			name: "openai",
			d:    dialectOpenAI,
			body: `{"id":"c","object":"chat.completion","model":"gpt-4o-mini","choices":[{"message":{"content":"Hi"}}],"usage":{"prompt_tokens":1200,"completion_tokens":8,"total_tokens":1208,"prompt_tokens_details":{"cached_tokens":1024,"audio_tokens":0}}}`,
			want: wire.Usage{Input: 1200, Output: 8, CacheRead: 1024, Model: "gpt-4o-mini"},
		},
		{
			name: "not JSON",
			d:    dialectOpenAI,
			body: `oops`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var u wire.Usage
			u.ObserveBody(tt.d, []byte(tt.body))
			if u != tt.want {
				t.Errorf("usage = %+v, want %+v", u, tt.want)
			}
		})
	}
	var nilUsage *wire.Usage
	nilUsage.ObserveBody(dialectOpenAI, []byte(`{}`)) // a caller without accounting
}
