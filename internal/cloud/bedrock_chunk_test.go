package cloud

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan/jsontest"
)

// eventType's shortcut for an event that starts with its type gives what
// the lookup it stands for gives, on Anthropic's events and on every
// mutation of them.
func TestEventTypeIsLookup(t *testing.T) {
	events := []string{
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`,
		`{"type":"message_stop"}`,
		`{"type":"ping"}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}`,
		`{"type":"a\"b","x":1}`,
		`{"type":"\u0070ing"}`,
		`{"type":1}`,
		`{"type":null,"type":"ping"}`,
		`{"index":0,"type":"content_block_stop"}`,
		`{ "type" : "ping" }`,
		`{"type":"ping`,
		`{"type":`,
		`[]`,
		``,
	}
	check := func(ev []byte) {
		gotV, gotOK := eventType(ev)
		wantV, wantOK := jsonscan.Lookup(ev, "type")
		if gotOK != wantOK || !bytes.Equal(gotV, wantV) {
			t.Fatalf("%q: eventType %q %v, Lookup %q %v", ev, gotV, gotOK, wantV, wantOK)
		}
	}
	rng := rand.New(rand.NewPCG(24, 3))
	const alphabet = "\"\\{}[],: \t0123456789aptyeu"
	for _, e := range events {
		check([]byte(e))
		for range 2000 {
			check(jsontest.Mutate(rng, []byte(e), alphabet))
		}
	}
}
