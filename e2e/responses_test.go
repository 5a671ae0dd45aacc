package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

func responsesParams(model string) responses.ResponseNewParams {
	return responses.ResponseNewParams{
		Model: model,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")},
	}
}

// responsesStreamed is what the openai-go SDK made of a Responses stream.
type responsesStreamed struct {
	text      string              // the output_text deltas joined
	summary   string              // the reasoning summary's deltas joined
	id        string              // from response.created
	completed *responses.Response // from response.completed, or nil
	err       error               // stream.Err()
}

func streamResponses(ctx context.Context, c *openai.Client, params responses.ResponseNewParams) responsesStreamed {
	var got responsesStreamed
	stream := c.Responses.NewStreaming(ctx, params)
	defer stream.Close()
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "response.created":
			got.id = ev.AsResponseCreated().Response.ID
		case "response.output_text.delta":
			got.text += ev.Delta
		case "response.reasoning_summary_text.delta":
			got.summary += ev.Delta
		case "response.completed":
			r := ev.AsResponseCompleted().Response
			got.completed = &r
		}
	}
	got.err = stream.Err()
	return got
}

// responsesCalls counts the Responses completions an upstream received.
func responsesCalls(u *upstream) int {
	n := 0
	for _, r := range u.Requests() {
		if r.Path == "/v1/responses" {
			n++
		}
	}
	return n
}

// Every failure a primary can have before its first byte ends with the
// secondary's answer, through the openai-go Responses client, streaming
// or not.
func TestResponsesFailoverBeforeFirstByte(t *testing.T) {
	cases := []struct {
		name    string
		primary sim.Config
		refused bool
		block   string
	}{
		{name: "503", primary: sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 503}}}},
		{name: "connection refused", refused: true},
		// 2 s: the healthy secondary answers well within it on a loaded machine
		// under -race; the primary would take 30 s.
		{name: "first-byte timeout", primary: sim.Config{FirstToken: caddyDur(30 * time.Second)}, block: "timeouts {\n first_byte 2s\n response 2s\n }"},
		{name: "fake-200", primary: sim.Config{Faults: []sim.Fault{{Kind: sim.FaultFake200}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			primary := newUpstream(t, tc.primary)
			if tc.refused {
				primary.URL = "http://127.0.0.1:" + fmt.Sprint(freePort(t))
			}
			secondary := newUpstream(t, sim.Config{})
			p := startProxy(t, provider("primary", primary, "priority 0")+provider("secondary", secondary, "priority 1")+
				"hedge off\n cooldown {\n failures 100\n }\n"+tc.block)
			c := openaiClient(p, "sk-client")

			got := streamResponses(ctxTimeout(t, 10*time.Second), c, responsesParams("gpt-test"))
			if got.err != nil || got.text != wantText || got.completed == nil {
				t.Fatalf("stream: err %v, text %q, completed %v", got.err, got.text, got.completed != nil)
			}
			resp, err := c.Responses.New(ctxTimeout(t, 10*time.Second), responsesParams("gpt-test"))
			if err != nil {
				t.Fatalf("non-stream: %v", err)
			}
			if resp.OutputText() != wantText {
				t.Fatalf("non-stream: text %q", resp.OutputText())
			}
			if n := responsesCalls(secondary); n != 2 {
				t.Fatalf("secondary served %d Responses requests, want 2", n)
			}
			// Compaction is a completion of its own endpoint: failed over too.
			cmp, err := c.Responses.Compact(ctxTimeout(t, 10*time.Second), responses.ResponseCompactParams{
				Model: "gpt-test",
				Input: responses.ResponseCompactParamsInputUnion{OfString: openai.String("hello")},
			})
			if err != nil || len(cmp.Output) == 0 {
				t.Fatalf("compact: %v", err)
			}
			compacted := 0
			for _, r := range secondary.Requests() {
				if r.Path == "/v1/responses/compact" {
					compacted++
				}
			}
			if compacted != 1 {
				t.Fatalf("secondary served %d compactions, want 1", compacted)
			}
		})
	}
}

// A 400 is the client's: it passes through after exactly one attempt.
func TestResponsesRequestErrorPassesThrough(t *testing.T) {
	primary := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 400}}})
	secondary := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("primary", primary, "priority 0")+provider("secondary", secondary, "priority 1"))
	c := openaiClient(p, "sk-client")

	_, err := c.Responses.New(ctxTimeout(t, 5*time.Second), responsesParams("gpt-test"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 {
		t.Fatalf("want a 400 API error, got %v", err)
	}
	got := streamResponses(ctxTimeout(t, 5*time.Second), c, responsesParams("gpt-test"))
	if !errors.As(got.err, &apiErr) || apiErr.StatusCode != 400 {
		t.Fatalf("stream: want a 400 API error, got %v", got.err)
	}
	if n := responsesCalls(primary) + responsesCalls(secondary); n != 2 {
		t.Fatalf("upstream attempts = %d, want exactly 1 per request (2)", n)
	}
}

// A stream cut after commit reaches the SDK as an error, never as a clean
// end, and a stream stalled past the idle timeout too.
func TestResponsesCutIsAnError(t *testing.T) {
	for _, f := range []sim.Fault{{Kind: sim.FaultCut, After: 5}, {Kind: sim.FaultStall, After: 5}} {
		t.Run(string(f.Kind), func(t *testing.T) {
			up := newUpstream(t, sim.Config{Tokens: 20, Faults: []sim.Fault{f}})
			p := startProxy(t, provider("only", up)+"timeouts {\n idle 2s\n }") // far above any healthy gap under -race
			got := streamResponses(ctxTimeout(t, 10*time.Second), openaiClient(p, "k"), responsesParams("gpt-test"))
			if got.err == nil {
				t.Fatalf("cut stream finished cleanly with %q", got.text)
			}
			if got.completed != nil || got.text == "" {
				t.Fatalf("completed %v, text %q: want the text so far and no completion", got.completed != nil, got.text)
			}
		})
	}
}

// Usage reaches the SDK unchanged and the request log line reads it:
// input, output and cached tokens, streaming or not, dialect responses.
func TestResponsesUsageThroughProxy(t *testing.T) {
	up := newUpstream(t, sim.Config{Tokens: 7, CacheRead: 5})
	p := startProxy(t, provider("only", up))
	c := openaiClient(p, "k")

	got := streamResponses(ctxTimeout(t, 10*time.Second), c, responsesParams("gpt-test"))
	if got.err != nil || got.completed == nil {
		t.Fatalf("stream: %v", got.err)
	}
	resp, err := c.Responses.New(ctxTimeout(t, 10*time.Second), responsesParams("gpt-test"))
	if err != nil {
		t.Fatal(err)
	}
	for i, u := range []responses.ResponseUsage{got.completed.Usage, resp.Usage} {
		if u.OutputTokens != 7 || u.InputTokensDetails.CachedTokens != 5 || u.InputTokens <= 5 {
			t.Fatalf("response %d: SDK usage %+v", i, u)
		}
	}
	lines := observeRequestLines(t, p.LogFile, 2)
	for i, l := range lines[:2] {
		u := []responses.ResponseUsage{got.completed.Usage, resp.Usage}[i]
		if l["dialect"] != "responses" || l["input_tokens"] != float64(u.InputTokens) ||
			l["output_tokens"] != 7.0 || l["cache_read_tokens"] != 5.0 || l["outcome"] != "success" {
			t.Errorf("log line %d: %v; want dialect responses, usage %d/7/5", i, l, u.InputTokens)
		}
	}
}

// A response created through the proxy is continued on its creator, even
// when another provider comes first and hedging is on; the calls by id
// reach the creator; an id the proxy never served is 404 in OpenAI's shape
// without an upstream call.
func TestResponsesPreviousResponsePinned(t *testing.T) {
	// first fails its first two Responses calls (one stream, one not), so
	// second creates both responses; after that first is healthy and first
	// in order, and would answer the id with 404 previous_response_not_found.
	first := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 503, Count: 2}}})
	second := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("first", first, "priority 0")+provider("second", second, "priority 1")+
		"hedge {\n after 1ms\n min 1ms\n }\n cooldown {\n failures 100\n }\n retry {\n same_provider 0\n }")
	c := openaiClient(p, "sk-client")

	created := streamResponses(ctxTimeout(t, 10*time.Second), c, responsesParams("gpt-test"))
	if created.err != nil || created.id == "" {
		t.Fatalf("create (stream): %v, id %q", created.err, created.id)
	}
	body, err := c.Responses.New(ctxTimeout(t, 10*time.Second), responsesParams("gpt-test"))
	if err != nil || body.ID == "" {
		t.Fatalf("create: %v", err)
	}
	if n := responsesCalls(second); n != 2 {
		t.Fatalf("second created %d responses, want 2", n)
	}

	for _, prev := range []string{created.id, body.ID} {
		params := responsesParams("gpt-test")
		params.PreviousResponseID = openai.String(prev)
		got := streamResponses(ctxTimeout(t, 10*time.Second), c, params)
		if got.err != nil || got.text != wantText {
			t.Fatalf("continue %s (stream): err %v, text %q", prev, got.err, got.text)
		}
		resp, err := c.Responses.New(ctxTimeout(t, 10*time.Second), params)
		if err != nil || resp.OutputText() != wantText {
			t.Fatalf("continue %s: %v", prev, err)
		}
	}
	for _, r := range first.Requests() {
		if r.PreviousResponseID != "" {
			t.Fatalf("first received a continuation of %s", r.PreviousResponseID)
		}
	}
	continued := 0
	for _, r := range second.Requests() {
		if r.PreviousResponseID != "" {
			continued++
		}
	}
	if continued != 4 {
		t.Fatalf("second received %d continuations, want 4", continued)
	}

	// A request naming no known response routes as usual: to first.
	before := responsesCalls(first)
	if _, err := c.Responses.New(ctxTimeout(t, 10*time.Second), responsesParams("gpt-test")); err != nil {
		t.Fatal(err)
	}
	if responsesCalls(first) != before+1 {
		t.Fatal("an unpinned request did not go to the first provider")
	}

	// By id: GET, input_items and DELETE reach the creator.
	got, err := c.Responses.Get(ctxTimeout(t, 10*time.Second), created.id, responses.ResponseGetParams{})
	if err != nil || got.ID != created.id || got.OutputText() != wantText {
		t.Fatalf("GET %s: %v", created.id, err)
	}
	if _, err := c.Responses.InputItems.List(ctxTimeout(t, 10*time.Second), body.ID, responses.InputItemListParams{}); err != nil {
		t.Fatalf("input_items of %s: %v", body.ID, err)
	}
	if err := c.Responses.Delete(ctxTimeout(t, 10*time.Second), body.ID); err != nil {
		t.Fatalf("DELETE %s: %v", body.ID, err)
	}
	var apiErr *openai.Error
	byID := func(u *upstream) int {
		n := 0
		for _, r := range u.Requests() {
			if strings.HasPrefix(r.Path, "/v1/responses/") {
				n++
			}
		}
		return n
	}
	if byID(first) != 0 || byID(second) != 3 {
		t.Fatalf("calls by id: first %d, second %d; want 0 and 3", byID(first), byID(second))
	}

	// A response the provider does not keep (store false, as Codex sends)
	// is not remembered: by id it is discovered, and nobody holds it: 404.
	params := responsesParams("gpt-test")
	params.Store = openai.Bool(false)
	unstored, err := c.Responses.New(ctxTimeout(t, 10*time.Second), params)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Responses.Get(ctxTimeout(t, 10*time.Second), unstored.ID, responses.ResponseGetParams{})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Fatalf("GET of a store-false response: want 404, got %v", err)
	}

	// An unknown id: discovered, each provider asked once; nobody holds
	// it, so the provider's 404 in OpenAI's shape reaches the client.
	_, err = c.Responses.Get(ctxTimeout(t, 10*time.Second), "resp_never_served", responses.ResponseGetParams{})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Type != "invalid_request_error" || apiErr.Message == "" {
		t.Fatalf("unknown id: want a 404 invalid_request_error, got %v", err)
	}
	if byID(first) != 2 || byID(second) != 5 {
		t.Fatalf("the unknown ids were asked of first %d, second %d times: want each provider once per id", byID(first), byID(second))
	}
}

// A pinned request whose creator fails asks the other provider as a
// discovery would (holder.go: a remembered holder can be wrong); it does
// not hold the response, so the client is told to retry (503 with
// Retry-After), not that the response does not exist.
func TestResponsesPinnedNoFailover(t *testing.T) {
	creator := newUpstream(t, sim.Config{})
	other := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 503, Count: 1}}})
	p := startProxy(t, provider("other", other, "priority 0")+provider("creator", creator, "priority 1")+
		"hedge off\n cooldown {\n failures 100\n }\n retry {\n same_provider 0\n }")
	c := openaiClient(p, "k")
	// other is down for exactly the request that creates the response.
	resp, err := c.Responses.New(ctxTimeout(t, 10*time.Second), responsesParams("gpt-test"))
	if err != nil {
		t.Fatal(err)
	}
	if responsesCalls(creator) != 1 {
		t.Fatalf("creator served %d, want 1", responsesCalls(creator))
	}
	if err := creator.SetFaults([]sim.Fault{{Kind: sim.FaultStatus, Status: 503}}); err != nil {
		t.Fatal(err)
	}
	params := responsesParams("gpt-test")
	params.PreviousResponseID = openai.String(resp.ID)
	_, err = c.Responses.New(ctxTimeout(t, 10*time.Second), params)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusServiceUnavailable || apiErr.Response.Header.Get("Retry-After") == "" {
		t.Fatalf("want a 503 with Retry-After, got %v", err)
	}
	if n := other.Stats().PreviousNotFound; n != 1 {
		t.Fatalf("the other provider said %d times it does not hold the response, want once", n)
	}
}

// An `api openai` provider serves Responses clients, with its models and
// model rewrite; an `api anthropic` one never gets them; an
// `api responses` one serves Responses clients only.
func TestResponsesAPIOpenAIProvider(t *testing.T) {
	anth := newUpstream(t, sim.Config{})
	oai := newUpstream(t, sim.Config{})
	resp := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("anth", anth, "api anthropic", "priority 0")+
		provider("oai", oai, "api openai", "priority 1", "models gpt-*", "model gpt-test gpt-upstream")+
		provider("resp", resp, "api responses", "priority 2"))
	c := openaiClient(p, "k")
	got := streamResponses(ctxTimeout(t, 10*time.Second), c, responsesParams("gpt-test"))
	if got.err != nil || got.text != wantText {
		t.Fatalf("stream: %v %q", got.err, got.text)
	}
	if _, err := c.Responses.New(ctxTimeout(t, 10*time.Second), responsesParams("gpt-test")); err != nil {
		t.Fatal(err)
	}
	if len(anth.Requests()) != 0 || len(resp.Requests()) != 0 {
		t.Fatalf("anthropic provider got %d requests, responses one %d; want 0", len(anth.Requests()), len(resp.Requests()))
	}
	for _, r := range oai.Requests() {
		if r.Path != "/v1/responses" || r.Model != "gpt-upstream" {
			t.Fatalf("openai provider got %s model %q, want /v1/responses gpt-upstream", r.Path, r.Model)
		}
	}
	// A model only the responses provider serves.
	if _, err := c.Responses.New(ctxTimeout(t, 10*time.Second), responsesParams("o-other")); err != nil {
		t.Fatal(err)
	}
	if len(resp.Requests()) != 1 {
		t.Fatalf("responses provider got %d requests, want 1", len(resp.Requests()))
	}
	// A chat client is not served by the responses provider.
	_, err := c.Chat.Completions.New(ctxTimeout(t, 10*time.Second), openaiParams("o-other"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Fatalf("chat for a model only the responses provider serves: want 404, got %v", err)
	}
}

// The owners table survives a config reload: a response created before it
// is continued on, and read from, its creator after it.
func TestResponsesOwnersSurviveReload(t *testing.T) {
	a := newUpstream(t, sim.Config{})
	b := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("a", a, "priority 1")+provider("b", b, "priority 0"))
	c := openaiClient(p, "k")
	resp, err := c.Responses.New(ctxTimeout(t, 10*time.Second), responsesParams("gpt-test"))
	if err != nil || responsesCalls(b) != 1 {
		t.Fatalf("create on b: %v, b served %d", err, responsesCalls(b))
	}
	// b now comes last: only the pin sends the continuation there.
	p.reload(t, provider("a", a, "priority 0")+provider("b", b, "priority 1")+"max_body 1MB")
	params := responsesParams("gpt-test")
	params.PreviousResponseID = openai.String(resp.ID)
	if _, err := c.Responses.New(ctxTimeout(t, 10*time.Second), params); err != nil {
		t.Fatalf("continue after reload: %v", err)
	}
	if _, err := c.Responses.Get(ctxTimeout(t, 10*time.Second), resp.ID, responses.ResponseGetParams{}); err != nil {
		t.Fatalf("GET after reload: %v", err)
	}
	if responsesCalls(a) != 0 || responsesCalls(b) != 2 {
		t.Fatalf("after reload: a served %d, b %d completions; want 0 and 2", responsesCalls(a), responsesCalls(b))
	}
}
