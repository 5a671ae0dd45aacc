package cloud

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
)

// cloudPieces makes from the parse's index the body CloudBody makes by a
// walk, and walks when the index is of another body.
func TestCloudBodyInAgreesWithCloudBody(t *testing.T) {
	set := map[string]json.RawMessage{"anthropic_version": json.RawMessage(BedrockAnthropicVersion)}
	for _, b := range []string{
		`{"model":"m","stream":true,"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
		`{"mod\u0065l":"m","anthropic_version":"old","system":"s"}`,
		`{"model":"m","stream":false,"model":"n"}`,
		`{}`,
	} {
		body := []byte(b)
		want, err := CloudBody(body, []string{"model", "stream"}, set)
		if err != nil {
			t.Fatal(err)
		}
		var top jsonscan.Top
		if err := top.Index(body); err != nil {
			t.Fatal(err)
		}
		got, err := cloudBodyIn(body, &top, set)
		if err != nil || string(got) != string(want) {
			t.Errorf("%s: indexed %s (%v), walked %s", b, got, err, want)
		}
		other := append([]byte(nil), body...) // not the indexed bytes: walked
		if got, _ := cloudBodyIn(other, &top, set); string(got) != string(want) {
			t.Errorf("%s: another body's index gave %s", b, got)
		}
	}
}

// cloudBodyIn is the Bedrock rewrite of body from top's index, joined.
func cloudBodyIn(body []byte, top *jsonscan.Top, set map[string]json.RawMessage) ([]byte, error) {
	pieces, _, err := cloudPieces(body, top, []string{"model", "stream"}, set)
	return bytes.Join(pieces, nil), err
}
