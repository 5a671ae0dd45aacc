package health

import (
	"testing"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
)

// The quota estimate reads the same through the parse's index of the
// top-level members as by a walk: the first output limit in the order
// max_tokens, max_completion_tokens, max_output_tokens that is a positive
// integer, else the body's size alone.
func TestQuotaEstimateIndexed(t *testing.T) {
	for _, tc := range []struct {
		body string
		out  int64 // the output limit counted
	}{
		{`{"max_tokens":100,"messages":[]}`, 100},
		{`{"messages":[{"max_tokens":7}],"max_output_tokens":50}`, 50},
		{`{"max_output_tokens":50,"max_completion_tokens":60}`, 60},
		{`{"max_tokens":0,"max_completion_tokens":60}`, 60},
		{`{"max_tokens":-1}`, 0},
		{`{"max_tokens":"100"}`, 0},
		{`{"max_tokens":100,"max_tokens":200}`, 100},
		{`{"a":{"max_tokens":9}}`, 0},
		{`[1,2]`, 0},
	} {
		body := []byte(tc.body)
		want := int64(len(body)/4) + tc.out
		var top jsonscan.Top
		indexed := top.Index(body) == nil
		for _, got := range []int64{QuotaEstimate(body), QuotaEstimateIn(body, &top)} {
			if got != want {
				t.Errorf("%s (indexed %v): estimate %d, want %d", tc.body, indexed, got, want)
			}
		}
	}
}
