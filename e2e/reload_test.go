package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// A stream that started before a reload finishes on the old config's
// handler after its Cleanup ran: the response it creates is still
// remembered, so the next turn goes straight to its holder, with no
// discovery.
func TestReloadKeepsResponseOfStreamInFlight(t *testing.T) {
	a := newUpstream(t, sim.Config{FirstToken: caddyDur(500 * time.Millisecond)})
	b := newUpstream(t, sim.Config{})
	block := provider("a", a, "priority 0") + provider("b", b, "priority 1") + discoverBlock
	p := startProxy(t, block)
	c := openaiClient(p, "sk-client")

	turn1 := make(chan responsesStreamed, 1)
	go func() { turn1 <- streamResponses(ctxTimeout(t, 20*time.Second), c, responsesParams("gpt-test")) }()
	healthWaitRecords(t, a, "turn 1 at a", func(rs []sim.RequestRecord) bool { return len(rs) == 1 })
	p.reload(t, block+"\n timeouts {\n idle 91s\n }")
	s := <-turn1
	if s.err != nil || s.text != wantText || s.id == "" {
		t.Fatalf("turn 1 across the reload: %v %q", s.err, s.text)
	}

	found := metricValue(t, p, `caddy_llm_hedge_discoveries_total{outcome="found"}`)
	params := responsesParams("gpt-test")
	params.PreviousResponseID = openai.String(s.id)
	if _, err := c.Responses.New(ctxTimeout(t, 20*time.Second), params); err != nil {
		t.Fatalf("turn 2: %v", err)
	}
	if got := metricValue(t, p, `caddy_llm_hedge_discoveries_total{outcome="found"}`); got != found {
		t.Fatalf("turn 2 was discovered (found %v -> %v): the reload forgot turn 1's holder", found, got)
	}
}

// llm_hedge_health answers a load balancer's check: 200 while the
// instance takes requests (503 once its shutdown is scheduled: the fleet
// test sees that on a real process).
func TestReadinessEndpoint(t *testing.T) {
	a := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("a", a), "handle /llm_hedge/health {\n llm_hedge_health\n }")
	resp, err := http.Get(p.URL + "/llm_hedge/health")
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(resp)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"ready"`) {
		t.Fatalf("health: %d %s", resp.StatusCode, body)
	}
	if len(a.Requests()) != 0 {
		t.Fatal("the health check reached a provider")
	}
}
