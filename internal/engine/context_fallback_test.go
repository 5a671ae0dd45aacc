package engine

import (
	"testing"

	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// Each dialect recognises its provider's "prompt too long" 400 and nothing
// else (context_fallback).
func TestContextDialectPromptTooLong(t *testing.T) {
	for _, tt := range []struct {
		d    wire.Dialect
		body string
		want bool
	}{
		{dialectAnthropic, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}`, true},
		{dialectAnthropic, `{"type":"error","error":{"type":"invalid_request_error","message":"messages: roles must alternate"}}`, false},
		{dialectAnthropic, `{"type":"error","error":{"type":"overloaded_error","message":"prompt is too long"}}`, false},
		{dialectOpenAI, `{"error":{"message":"too long","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, true},
		{dialectOpenAI, `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 210000 tokens.","code":null}}`, true},
		{dialectOpenAI, `{"error":{"message":"Invalid value for 'temperature'","code":"invalid_value"}}`, false},
		{dialectResponses, `{"error":{"message":"Your input exceeds the context window of this model.","type":"invalid_request_error","code":"context_length_exceeded"}}`, true},
		{dialectResponses, `{"error":{"message":"Unknown parameter","code":"unknown_parameter"}}`, false},
		{dialectGemini, `{"error":{"code":400,"message":"The input token count (2100000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}`, true},
		{dialectGemini, `{"error":{"code":400,"message":"Invalid JSON payload received.","status":"INVALID_ARGUMENT"}}`, false},
		{dialectGemini, `not json`, false},
	} {
		if got := tt.d.PromptTooLong([]byte(tt.body)); got != tt.want {
			t.Errorf("%v.promptTooLong(%s) = %v, want %v", tt.d, tt.body, got, tt.want)
		}
	}
}
