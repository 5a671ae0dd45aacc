package e2e

import (
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// holderBlock: no hedging, a breaker that opens on one failure, and room
// for a failover after a failure (discoverBlock allows one attempt only).
const holderBlock = "hedge off\n cooldown {\n failures 1\n }\n retry {\n attempts 3\n same_provider 0\n }"

// outage is a provider's state in front of its simulator.
type outage struct {
	down atomic.Bool  // every request is answered 500 (the simulator sees none)
	hits atomic.Int64 // requests that reached the front
}

// downable fronts u's simulator with an outage switch.
func downable(t *testing.T, u *upstream) (*upstream, *outage) {
	t.Helper()
	o := new(outage)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.hits.Add(1)
		if o.down.Load() {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`)
			return
		}
		u.Simulator.ServeHTTP(w, r)
	})
	return newGatedUpstream(t, h, u.Simulator), o
}

// toolTurn is an Anthropic turn whose history holds a tool call with a
// file_id argument: the tool's own data, no file of the Files API.
func toolTurn() anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     "claude-test",
		MaxTokens: 64,
		Messages: []anthropic.MessageParam{
			anthropic.NewUserMessage(anthropic.NewTextBlock("fetch the q3 report")),
			anthropic.NewAssistantMessage(anthropic.NewToolUseBlock("toolu_1", map[string]any{"file_id": "q3-report"}, "fetch_report")),
			anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_1", "revenue up 4%", false)),
		},
	}
}

// A tool call's file_id argument names no provider-held file: the turns
// carrying it route as any other, and fail over when the provider that
// served the first is down (it used to be remembered as the "holder" and
// the turn got a 503 while the same turn without the field failed over).
func TestObjectsToolArgumentPinsNothing(t *testing.T) {
	a, b := newUpstream(t, sim.Config{}), newUpstream(t, sim.Config{})
	front, down := downable(t, a)
	p := startProxy(t, provider("a", front, "priority 0")+provider("b", b, "priority 1")+holderBlock)
	c := anthropicClient(p, "sk-client")
	msg, err := c.Messages.New(ctxTimeout(t, 10*time.Second), toolTurn())
	if err != nil || messageText(*msg) != wantText {
		t.Fatalf("turn 1: %v", err)
	}
	if completions(a) != 1 || completions(b) != 0 {
		t.Fatalf("turn 1: a saw %d, b %d: want a, the plan's first", completions(a), completions(b))
	}
	down.down.Store(true)
	if _, err := c.Messages.New(ctxTimeout(t, 10*time.Second), anthropicParams("claude-test")); err != nil {
		t.Fatalf("a turn without the field during a's outage: %v", err)
	}
	msg, err = c.Messages.New(ctxTimeout(t, 10*time.Second), toolTurn())
	if err != nil || messageText(*msg) != wantText {
		t.Fatalf("turn 2 during a's outage: %v (the same turn without the field failed over)", err)
	}
	if completions(b) != 2 {
		t.Fatalf("b saw %d completions, want both turns of the outage", completions(b))
	}
}

// A remembered holder that fails with a provider-level error does not make
// the outage final: the other candidates are asked as in a discovery. One
// that holds the object too (a mirror of one account, here the same
// simulator behind another address) serves it and becomes its holder.
func TestObjectsFailingHolderIsNotFinal(t *testing.T) {
	shared := newUpstream(t, sim.Config{})
	front, down := downable(t, shared)
	mirror := newGatedUpstream(t, shared.Simulator, shared.Simulator)
	p := startProxy(t, provider("a", front, "priority 0", "vendor acme")+provider("b", mirror, "priority 1", "vendor acme")+
		holderBlock+"\n"+objectsForward)
	id := uploadOpenAIFile(t, p) // lands on a, the first of the forward order
	c := openaiClient(p, "sk-client")
	if _, err := c.Chat.Completions.New(ctxTimeout(t, 10*time.Second), chatWithFile(id)); err != nil {
		t.Fatalf("a completion naming the file: %v", err)
	}
	found := metricValue(t, p, `caddy_llm_hedge_discoveries_total{outcome="found"}`)
	down.down.Store(true)
	got, err := c.Chat.Completions.New(ctxTimeout(t, 10*time.Second), chatWithFile(id))
	if err != nil || got.Choices[0].Message.Content != wantText {
		t.Fatalf("a completion naming the file while its remembered holder is down: %v", err)
	}
	if v := metricValue(t, p, `caddy_llm_hedge_discoveries_total{outcome="found"}`); v != found+1 {
		t.Fatalf("discoveries found went from %v to %v: want b found as the holder", found, v)
	}
	hits := down.hits.Load()
	if _, err := c.Chat.Completions.New(ctxTimeout(t, 10*time.Second), chatWithFile(id)); err != nil {
		t.Fatalf("the next completion: %v", err)
	}
	if down.hits.Load() != hits || metricValue(t, p, `caddy_llm_hedge_discoveries_total{outcome="found"}`) != found+1 {
		t.Fatal("the next completion did not go straight to b, the holder found")
	}
}

// The holder of a Responses id is down and the other provider says it has
// no such response: the client is told to retry (503 with Retry-After),
// not that the response does not exist, for a turn and a call by id.
func TestObjectsHolderDownIsRetryable(t *testing.T) {
	a, b := newUpstream(t, sim.Config{}), newUpstream(t, sim.Config{})
	front, down := downable(t, a)
	// The default breaker (3 failures): a is not cooling down when it is back.
	p := startProxy(t, provider("a", front, "priority 0")+provider("b", b, "priority 1")+"hedge off\n retry {\n attempts 3\n same_provider 0\n }")
	id := discoverCreated(t, a)
	down.down.Store(true)
	c := openaiClient(p, "sk-client")
	params := responsesParams("gpt-test")
	params.PreviousResponseID = openai.String(id)
	_, err := c.Responses.New(ctxTimeout(t, 10*time.Second), params)
	var oerr *openai.Error
	if !errors.As(err, &oerr) || oerr.StatusCode != http.StatusServiceUnavailable || oerr.Response.Header.Get("Retry-After") == "" {
		t.Fatalf("turn while the holder is down: want 503 with Retry-After, got %v", err)
	}
	if b.Stats().PreviousNotFound != 1 {
		t.Fatalf("b was asked %d times", b.Stats().PreviousNotFound)
	}
	_, err = c.Responses.Get(ctxTimeout(t, 10*time.Second), id, responses.ResponseGetParams{})
	if !errors.As(err, &oerr) || oerr.StatusCode != http.StatusServiceUnavailable || oerr.Response.Header.Get("Retry-After") == "" {
		t.Fatalf("GET while the holder is down: want 503 with Retry-After, got %v", err)
	}
	down.down.Store(false)
	if _, err := c.Responses.Get(ctxTimeout(t, 10*time.Second), id, responses.ResponseGetParams{}); err != nil {
		t.Fatalf("GET once the holder is back: %v", err)
	}
}
