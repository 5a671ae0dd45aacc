package genai

import (
	"slices"
	"testing"
)

// Finish reasons come from each dialect's own place, once each; a value
// that is not an enum word is never kept.
func TestFinishReasons(t *testing.T) {
	cases := []struct {
		d      string
		events []string
		body   string
		want   []string
	}{
		{d: "anthropic", events: []string{`{"type":"message_start","message":{"stop_reason":null}}`, `{"type":"message_delta","delta":{"stop_reason":"max_tokens"}}`}, want: []string{"max_tokens"}},
		{d: "anthropic", body: `{"content":[{"type":"text","text":"\"stop_reason\":\"x\""}],"stop_reason":"end_turn"}`, want: []string{"end_turn"}},
		{d: "openai", events: []string{`{"choices":[{"index":0,"finish_reason":null}]}`, `{"choices":[{"index":0,"finish_reason":"stop"},{"index":1,"finish_reason":"length"}]}`}, want: []string{"stop", "length"}},
		{d: "openai", body: `{"choices":[{"finish_reason":"tool_calls"},{"finish_reason":"tool_calls"}]}`, want: []string{"tool_calls"}},
		{d: "gemini", events: []string{`{"candidates":[{"content":{}}]}`, `{"candidates":[{"finishReason":"STOP"}]}`}, want: []string{"STOP"}},
		{d: "responses", events: []string{`{"type":"response.output_item.done","item":{"status":"completed"}}`, `{"type":"response.incomplete","response":{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"}}}`}, want: []string{"max_output_tokens"}},
		{d: "responses", body: `{"status":"completed"}`, want: []string{"completed"}},
		{d: "openai", body: `{"choices":[{"finish_reason":"my secret words"}]}`, want: nil},
	}
	for i, c := range cases {
		f := FinishReasons{On: true}
		for _, e := range c.events {
			f.ObserveEvent(c.d, []byte(e))
		}
		if c.body != "" {
			f.ObserveBody(c.d, []byte(c.body))
		}
		if got := f.List(); !slices.Equal(got, c.want) {
			t.Errorf("case %d (%s): %q, want %q", i, c.d, got, c.want)
		}
		// Per event, reading them allocates nothing (known words are shared).
		evs := make([][]byte, len(c.events))
		for j, e := range c.events {
			evs[j] = []byte(e)
		}
		allocs := testing.AllocsPerRun(100, func() {
			f := FinishReasons{On: true}
			for _, ev := range evs {
				f.ObserveEvent(c.d, ev)
			}
		})
		if allocs != 0 {
			t.Errorf("case %d (%s): %.1f allocations reading finish reasons", i, c.d, allocs)
		}
	}
}

// The registry's names: the cloud first, then a vendor that is a registry
// value, a known host, the API spoken.
func TestProviderName(t *testing.T) {
	cases := []struct{ cloud, vendor, host, api, want string }{
		{"bedrock", "", "bedrock-runtime.us-east-1.amazonaws.com", "anthropic", "aws.bedrock"},
		{"vertex", "", "us-east5-aiplatform.googleapis.com", "gemini", "gcp.vertex_ai"},
		{"azure", "", "x.openai.azure.com", "openai", "azure.ai.openai"},
		{"", "", "generativelanguage.googleapis.com", "gemini", "gcp.gemini"},
		{"", "", "api.deepseek.com", "openai", "deepseek"},
		{"", "groq", "10.0.0.7", "openai", "groq"},
		{"", "lab", "127.0.0.1", "anthropic", "anthropic"},
		{"", "", "127.0.0.1", "responses", "openai"},
		{"", "", "127.0.0.1", "gemini", "gcp.gemini"},
	}
	for _, c := range cases {
		if got := ProviderName(c.cloud, c.vendor, c.host, c.api); got != c.want {
			t.Errorf("%+v: %q, want %q", c, got, c.want)
		}
	}
	if Operation("gemini") != "generate_content" || Operation("anthropic") != "chat" || Operation("responses") != "chat" {
		t.Error("gen_ai.operation.name: gemini is generate_content, the others chat")
	}
}
