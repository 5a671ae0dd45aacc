package e2e

import (
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// BenchmarkDiscoverMiss measures what discovery costs a turn: continuing
// a response this instance knows (known) against one it never saw, held
// by the second candidate (one_miss: the first answers its not-found).
// The difference is one round trip to a provider for a 404, here a
// simulator on loopback (docs/fleet.md).
//
//	go test -run '^$' -bench BenchmarkDiscoverMiss -benchtime 200x .
func BenchmarkDiscoverMiss(b *testing.B) {
	a, bb := newUpstream(b, sim.Config{}), newUpstream(b, sim.Config{})
	p := startProxy(b, provider("a", a, "priority 0")+provider("b", bb, "priority 1")+discoverBlock)
	c := openaiClient(p, "sk-client")
	direct := openaiClient(&proxy{URL: bb.URL}, "sk-direct")
	for _, mode := range []string{"known", "one_miss"} {
		b.Run(mode, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				creator := c
				if mode == "one_miss" {
					creator = direct
				}
				params := responsesParams("gpt-test")
				created, err := creator.Responses.New(b.Context(), params)
				if err != nil {
					b.Fatal(err)
				}
				params.PreviousResponseID = openai.String(created.ID)
				b.StartTimer()
				if _, err := c.Responses.New(b.Context(), params); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
