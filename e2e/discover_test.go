package e2e

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/llmhedge/caddy-llm-hedge/internal/engine"
	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// discoverBlock: no hedging, a breaker that opens on one failure, one
// attempt per request: a discovery miss charges none of them.
const discoverBlock = "hedge off\n cooldown {\n failures 1\n }\n retry {\n attempts 1\n same_provider 0\n }"

// discoverCreated creates a stored response directly on u: a response
// this proxy never saw (another instance, or before a restart).
func discoverCreated(t *testing.T, u *upstream) string {
	t.Helper()
	resp, err := openaiClient(&proxy{URL: u.URL}, "sk-direct").Responses.New(ctxTimeout(t, 10*time.Second), responsesParams("gpt-test"))
	if err != nil {
		t.Fatalf("creating on the simulator: %v", err)
	}
	return resp.ID
}

// A follow-up turn naming a response held by B, the plan putting A
// first: A's not-found moves on to B without charging A's breaker or the
// attempt limit; the next turn goes straight to B.
func TestDiscoverPreviousResponseOnAnotherProvider(t *testing.T) {
	a, b := newUpstream(t, sim.Config{}), newUpstream(t, sim.Config{})
	p := startProxy(t, provider("a", a, "priority 0")+provider("b", b, "priority 1")+discoverBlock)
	c := openaiClient(p, "sk-client")
	id := discoverCreated(t, b)
	found := metricValue(t, p, `caddy_llm_hedge_discoveries_total{outcome="found"}`)

	params := responsesParams("gpt-test")
	params.PreviousResponseID = openai.String(id)
	turn2, err := c.Responses.New(ctxTimeout(t, 10*time.Second), params)
	if err != nil {
		t.Fatalf("turn 2: %v", err)
	}
	if turn2.OutputText() != wantText || responsesCalls(a) != 1 || responsesCalls(b) != 2 {
		t.Fatalf("turn 2: text %q, a saw %d, b saw %d (want a's miss, then b)", turn2.OutputText(), responsesCalls(a), responsesCalls(b))
	}
	if v := hedgeProviderView(t, p, a); v["state"] != "closed" || v["consecutive_failures"] != 0.0 {
		t.Fatalf("a's breaker was charged for not holding the response: %v", v)
	}
	// The third turn continues turn 2 (b's) and turn 2's own previous id
	// is now known too: both go straight to b.
	for _, prev := range []string{turn2.ID, id} {
		params.PreviousResponseID = openai.String(prev)
		if _, err := c.Responses.New(ctxTimeout(t, 10*time.Second), params); err != nil {
			t.Fatalf("turn after %s: %v", prev, err)
		}
	}
	if responsesCalls(a) != 1 || responsesCalls(b) != 4 {
		t.Fatalf("a saw %d, b saw %d: the holder is not remembered", responsesCalls(a), responsesCalls(b))
	}
	if got := metricValue(t, p, `caddy_llm_hedge_discoveries_total{outcome="found"}`); got != found+1 {
		t.Fatalf("discoveries found went from %v to %v, want one more", found, got)
	}
}

// Calls by id on a response the proxy never saw reach the provider that
// holds it, and a streamed follow-up turn is discovered too.
func TestDiscoverCallsByID(t *testing.T) {
	a, b := newUpstream(t, sim.Config{}), newUpstream(t, sim.Config{})
	p := startProxy(t, provider("a", a, "priority 0")+provider("b", b, "priority 1")+discoverBlock)
	c := openaiClient(p, "sk-client")
	id := discoverCreated(t, b)

	got, err := c.Responses.Get(ctxTimeout(t, 10*time.Second), id, responses.ResponseGetParams{})
	if err != nil || got.ID != id || got.OutputText() != wantText {
		t.Fatalf("GET by id: %v", err)
	}
	items, err := c.Responses.InputItems.List(ctxTimeout(t, 10*time.Second), id, responses.InputItemListParams{})
	if err != nil || len(items.Data) == 0 {
		t.Fatalf("input_items: %v", err)
	}
	id2 := discoverCreated(t, b) // another unknown id, for DELETE
	if err := c.Responses.Delete(ctxTimeout(t, 10*time.Second), id2); err != nil {
		t.Fatalf("DELETE by id: %v", err)
	}
	if _, err := openaiClient(&proxy{URL: b.URL}, "sk-direct").Responses.Get(ctxTimeout(t, 10*time.Second), id2, responses.ResponseGetParams{}); err == nil {
		t.Fatal("the DELETE did not reach the holder")
	}
	id3 := discoverCreated(t, b)
	params := responsesParams("gpt-test")
	params.PreviousResponseID = openai.String(id3)
	if s := streamResponses(ctxTimeout(t, 10*time.Second), c, params); s.err != nil || s.text != wantText {
		t.Fatalf("streamed turn: %v %q", s.err, s.text)
	}
	if v := hedgeProviderView(t, p, a); v["state"] != "closed" || v["consecutive_failures"] != 0.0 {
		t.Fatalf("a's breaker was charged: %v", v)
	}
}

// An id no provider holds: the client gets the provider's own not-found
// answer; each candidate was asked once.
func TestDiscoverHeldByNobody(t *testing.T) {
	a, b := newUpstream(t, sim.Config{}), newUpstream(t, sim.Config{})
	p := startProxy(t, provider("a", a, "priority 0")+provider("b", b, "priority 1")+discoverBlock)
	c := openaiClient(p, "sk-client")
	notFound := metricValue(t, p, `caddy_llm_hedge_discoveries_total{outcome="not_found"}`)

	params := responsesParams("gpt-test")
	params.PreviousResponseID = openai.String("resp_nowhere")
	_, err := c.Responses.New(ctxTimeout(t, 10*time.Second), params)
	var oerr *openai.Error
	if !errors.As(err, &oerr) || oerr.StatusCode != http.StatusNotFound || oerr.Code != "previous_response_not_found" {
		t.Fatalf("want the providers' 404 previous_response_not_found, got %v", err)
	}
	if a.Stats().PreviousNotFound != 1 || b.Stats().PreviousNotFound != 1 {
		t.Fatalf("not found at a %d, b %d times: want each asked once", a.Stats().PreviousNotFound, b.Stats().PreviousNotFound)
	}
	_, err = c.Responses.Get(ctxTimeout(t, 10*time.Second), "resp_nowhere", responses.ResponseGetParams{})
	if !errors.As(err, &oerr) || oerr.StatusCode != http.StatusNotFound || oerr.Message != "Response with id 'resp_nowhere' not found." {
		t.Fatalf("GET: want the provider's 404, got %v", err)
	}
	for _, u := range []*upstream{a, b} {
		if v := hedgeProviderView(t, p, u); v["state"] != "closed" {
			t.Fatalf("breaker charged: %v", v)
		}
	}
	// A discovery that found nothing is counted as its request finishes,
	// after the client has the answer: wait for the series to move.
	if got := metricReaches(t, p, `caddy_llm_hedge_discoveries_total{outcome="not_found"}`, notFound+2); got != notFound+2 {
		t.Fatalf("discoveries not_found went from %v to %v, want two more", notFound, got)
	}
}

// Concurrent turns naming one unknown id: one discovers (one miss on a),
// the others wait for it and go straight to the holder.
func TestDiscoverConcurrentOnce(t *testing.T) {
	a, b := newUpstream(t, sim.Config{}), newUpstream(t, sim.Config{})
	// a's answers wait until the test lets them go: the first discovery
	// is in flight while the others arrive.
	release := make(chan struct{})
	arrived := make(chan struct{}, 16)
	gate := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		a.Simulator.ServeHTTP(w, r)
	})
	gated := newGatedUpstream(t, gate, a.Simulator)
	p := startProxy(t, provider("a", gated, "priority 0")+provider("b", b, "priority 1")+discoverBlock)
	c := openaiClient(p, "sk-client")
	id := discoverCreated(t, b)

	const n = 5
	waiting := make(chan struct{}, n)
	defer engine.OnDiscoveryWait(func() { waiting <- struct{}{} })()
	params := responsesParams("gpt-test")
	params.PreviousResponseID = openai.String(id)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	turn := func() {
		defer wg.Done()
		_, err := c.Responses.New(ctxTimeout(t, 10*time.Second), params)
		errs <- err
	}
	wg.Add(1)
	go turn()
	<-arrived // the first discovery asks a
	for range n - 1 {
		wg.Add(1)
		go turn()
	}
	for range n - 1 {
		select {
		case <-waiting:
		case <-arrived:
			close(release)
			wg.Wait()
			t.Fatal("a second request asked a while the first discovery was in flight")
		}
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if responsesCalls(a) != 1 || responsesCalls(b) != n+1 {
		t.Fatalf("a saw %d, b saw %d: want one discovery (one miss on a)", responsesCalls(a), responsesCalls(b))
	}
}

// newGatedUpstream serves h (which fronts a simulator) on a loopback port.
func newGatedUpstream(t *testing.T, h http.Handler, s *sim.Simulator) *upstream {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &upstream{Simulator: s, URL: srv.URL}
}

// metricReaches waits (up to 10 s) for a series recorded as a request
// finishes, after its client has the answer, to reach want; it returns
// the value then, or the last read.
func metricReaches(t *testing.T, p *proxy, series string, want float64) float64 {
	t.Helper()
	got := metricValue(t, p, series)
	for deadline := time.Now().Add(10 * time.Second); got < want && time.Now().Before(deadline); got = metricValue(t, p, series) {
		time.Sleep(10 * time.Millisecond)
	}
	return got
}

// metricValue reads one series from the admin metrics, 0 when absent
// (the collectors are shared by every proxy of the test binary: compare
// before and after).
func metricValue(t *testing.T, p *proxy, series string) float64 {
	t.Helper()
	_, _, body := healthAdmin(t, p, http.MethodGet, "/metrics")
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	return 0
}

// With the default policy (hedging on) a streamed turn naming an unknown
// id is discovered the same way: no hedge races the discovery.
func TestDiscoverDefaultPolicyStream(t *testing.T) {
	a, b := newUpstream(t, sim.Config{}), newUpstream(t, sim.Config{})
	p := startProxy(t, provider("a", a, "priority 0")+provider("b", b, "priority 1"))
	c := openaiClient(p, "sk-client")
	params := responsesParams("gpt-test")
	params.PreviousResponseID = openai.String(discoverCreated(t, b))
	if s := streamResponses(ctxTimeout(t, 10*time.Second), c, params); s.err != nil || s.text != wantText || s.completed == nil {
		t.Fatalf("streamed turn: %v %q", s.err, s.text)
	}
	if responsesCalls(a) != 1 || responsesCalls(b) != 2 {
		t.Fatalf("a saw %d, b saw %d", responsesCalls(a), responsesCalls(b))
	}
}

// A discovery never carries the client's own key to another vendor (SPEC
// 15): with pass-through providers of two vendors, the response held by
// the second is not looked for there (its simulator never sees the
// client's key), and the client gets the first's not-found. Providers
// marked as one vendor (mirrors of one API) are all asked.
func TestDiscoverKeepsClientKeyWithinVendor(t *testing.T) {
	for _, tc := range []struct {
		name         string
		vendorB      string
		wantFound    bool
		wantBReached int
	}{
		{"other vendor", "vendor other", false, 1},
		{"same vendor", "vendor same", true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := newUpstream(t, sim.Config{}), newUpstream(t, sim.Config{})
			vendorA := "vendor other-a"
			if tc.wantFound {
				vendorA = "vendor same"
			}
			p := startProxy(t, provider("a", a, "priority 0", vendorA)+provider("b", b, "priority 1", tc.vendorB)+discoverBlock)
			id := discoverCreated(t, b) // b's first request
			params := responsesParams("gpt-test")
			params.PreviousResponseID = openai.String(id)
			_, err := openaiClient(p, "sk-client").Responses.New(ctxTimeout(t, 10*time.Second), params)
			var apiErr *openai.Error
			switch {
			case tc.wantFound && err != nil:
				t.Fatalf("same vendor: %v", err)
			case !tc.wantFound && (!errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound):
				t.Fatalf("other vendor: err %v, want a's 404", err)
			}
			if got := responsesCalls(b); got != tc.wantBReached {
				t.Fatalf("b saw %d requests, want %d", got, tc.wantBReached)
			}
		})
	}
}
