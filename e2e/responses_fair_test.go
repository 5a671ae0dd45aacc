package e2e

import (
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/llmhedge/caddy-llm-hedge/internal/engine"
	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// Item 10: one client cannot evict another's Responses pins. With a table
// of 20 ids (2 per client), client B stores 30 responses: client A's one
// id still reaches its creator, and only B's own oldest ids are forgotten.
func TestResponsesPinsPerClient(t *testing.T) {
	t.Cleanup(engine.SetResponseOwnersCapacity(20))
	up := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("only", up))
	a, b := openaiClient(p, "sk-client-a"), openaiClient(p, "sk-client-b")

	mine, err := a.Responses.New(ctxTimeout(t, 10*time.Second), responsesParams("gpt-test"))
	if err != nil {
		t.Fatal(err)
	}
	var flood []string
	for i := range 30 {
		r, err := b.Responses.New(ctxTimeout(t, 10*time.Second), responsesParams("gpt-test"))
		if err != nil {
			t.Fatalf("flood %d: %v", i, err)
		}
		flood = append(flood, r.ID)
	}
	// A forgotten id is discovered again (issue 23): the metric tells.
	found := func() float64 { return metricValue(t, p, `caddy_llm_hedge_discoveries_total{outcome="found"}`) }
	before := found()
	got, err := a.Responses.Get(ctxTimeout(t, 10*time.Second), mine.ID, responses.ResponseGetParams{})
	if err != nil || got.ID != mine.ID {
		t.Fatalf("client A's response after client B's flood: %v", err)
	}
	params := responsesParams("gpt-test")
	params.PreviousResponseID = openai.String(mine.ID)
	if _, err := a.Responses.New(ctxTimeout(t, 10*time.Second), params); err != nil {
		t.Fatalf("client A continues its response: %v", err)
	}
	if n := found(); n != before {
		t.Fatalf("client A's id was forgotten: %v discoveries", n-before)
	}
	if _, err := b.Responses.Get(ctxTimeout(t, 10*time.Second), flood[0], responses.ResponseGetParams{}); err != nil || found() != before+1 {
		t.Fatalf("client B's oldest id past its share: want it forgotten and discovered, got %v, %v discoveries", err, found()-before)
	}
	if _, err := b.Responses.Get(ctxTimeout(t, 10*time.Second), flood[29], responses.ResponseGetParams{}); err != nil || found() != before+1 {
		t.Fatalf("client B's newest id: %v, %v discoveries", err, found()-before)
	}
}
