package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// retryLogLine is the part of the module's per-request log line these
// tests read.
type retryLogLine struct {
	Msg           string `json:"msg"`
	Model         string `json:"model"`
	ServedModel   string `json:"served_model"`
	Provider      string `json:"provider"`
	Outcome       string `json:"outcome"`
	FallbackModel string `json:"fallback_model"`
	Chain         []struct {
		Provider string `json:"provider"`
		OffsetMs int64  `json:"offset_ms"`
		Event    string `json:"event"`
		Outcome  string `json:"outcome"`
		Status   int    `json:"status"`
		Class    string `json:"error_class"`
	} `json:"chain"`
}

// retryRequestLogs returns the per-request log lines written so far.
func retryRequestLogs(t *testing.T, p *proxy) []retryLogLine {
	t.Helper()
	var out []retryLogLine
	sc := bufio.NewScanner(strings.NewReader(p.logs(t)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l retryLogLine
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "llm request" {
			out = append(out, l)
		}
	}
	return out
}

// retryLastLog waits for the log line of the request that just finished:
// it is written after the response, so the client can be faster.
func retryLastLog(t *testing.T, p *proxy, n int) retryLogLine {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if logs := retryRequestLogs(t, p); len(logs) >= n {
			return logs[n-1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line for request %d", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// retryStarts returns when each completion request reached u.
func retryStarts(u *upstream) []time.Time {
	var out []time.Time
	for _, r := range u.Requests() {
		if r.Path == "/v1/messages" || r.Path == "/v1/chat/completions" {
			out = append(out, r.Start)
		}
	}
	return out
}

func retryAsk(t *testing.T, p *proxy, params anthropic.MessageNewParams) *anthropic.Message {
	t.Helper()
	m, err := anthropicClient(p, "k").Messages.New(ctxTimeout(t, 15*time.Second), params)
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	if got := messageText(*m); got != wantText {
		t.Fatalf("text %q, want %q", got, wantText)
	}
	return m
}

// A 429 with Retry-After within retry_after_max is waited out on the same
// provider (its prompt cache is there), never sooner than asked.
func TestRetryAfterWaitedOnSameProvider(t *testing.T) {
	primary := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 429, RetryAfter: "2", Count: 1}}})
	secondary := newUpstream(t, sim.Config{})
	// The providers' own keys: a 429 on the client's key is its answer.
	p := startProxy(t, provider("primary", primary, "priority 0", "key sk-p")+provider("secondary", secondary, "priority 1", "key sk-s")+"hedge off\n")

	retryAsk(t, p, anthropicParams("claude-test"))
	starts := retryStarts(primary)
	if len(starts) != 2 || completions(secondary) != 0 {
		t.Fatalf("primary got %d attempts, secondary %d; want 2 and 0", len(starts), completions(secondary))
	}
	if gap := starts[1].Sub(starts[0]); gap < 2*time.Second {
		t.Fatalf("retry came %v after the 429, before its Retry-After of 2s", gap)
	}
	l := retryLastLog(t, p, 1)
	if len(l.Chain) != 2 || l.Chain[1].Event != "retry" || l.Chain[1].Provider != "primary" {
		t.Fatalf("chain %+v: want initial then retry on primary", l.Chain)
	}
}

// A 429 without Retry-After moves on at once: the provider said it is out
// of capacity and not when it comes back.
func TestRetryRateLimitWithoutRetryAfterMovesOn(t *testing.T) {
	primary := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 429}}})
	secondary := newUpstream(t, sim.Config{})
	// The providers' own keys: a 429 on the client's key is its answer.
	p := startProxy(t, provider("primary", primary, "priority 0", "key sk-p")+provider("secondary", secondary, "priority 1", "key sk-s")+"hedge off\n")

	start := time.Now()
	retryAsk(t, p, anthropicParams("claude-test"))
	// The issue allows up to 2 attempts on the 429ing provider within 3 s;
	// the design makes exactly one (no same-provider retry without a
	// Retry-After), so assert that. Three seconds is a generous bound on a
	// loaded machine for an answer that needs no wait at all.
	if n := len(retryStarts(primary)); n != 1 {
		t.Fatalf("primary got %d attempts, want 1", n)
	}
	if s := retryStarts(secondary); len(s) != 1 || s[0].Sub(start) > 3*time.Second {
		t.Fatalf("secondary attempts %v, want one within 3s", s)
	}
}

// A transient 5xx is retried on the same provider after the backoff, and
// x-should-retry: false forbids exactly that retry.
func TestRetrySameProvider(t *testing.T) {
	cases := []struct {
		name                string
		fault               sim.Fault
		primary, secondary  int
		wantEvent, provider string
	}{
		{"500 once", sim.Fault{Kind: sim.FaultStatus, Status: 500, Count: 1}, 2, 0, "retry", "primary"},
		{"503 once", sim.Fault{Kind: sim.FaultStatus, Status: 503, Count: 1}, 2, 0, "retry", "primary"},
		{"503 x-should-retry false", sim.Fault{Kind: sim.FaultStatus, Status: 503, Count: 1, NoRetry: true}, 1, 1, "failover", "secondary"},
		{"500 x-should-retry false", sim.Fault{Kind: sim.FaultStatus, Status: 500, Count: 1, NoRetry: true}, 1, 1, "failover", "secondary"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			primary := newUpstream(t, sim.Config{Faults: []sim.Fault{tc.fault}})
			secondary := newUpstream(t, sim.Config{})
			p := startProxy(t, provider("primary", primary, "priority 0")+provider("secondary", secondary, "priority 1")+
				"hedge off\n retry {\n same_provider 1\n backoff 200ms 1s\n }\n")

			retryAsk(t, p, anthropicParams("claude-test"))
			starts := retryStarts(primary)
			if len(starts) != tc.primary || completions(secondary) != tc.secondary {
				t.Fatalf("attempts primary %d secondary %d, want %d and %d", len(starts), completions(secondary), tc.primary, tc.secondary)
			}
			if len(starts) == 2 && starts[1].Sub(starts[0]) < 200*time.Millisecond {
				t.Fatalf("same-provider retry %v after the first try, closer than the backoff base", starts[1].Sub(starts[0]))
			}
			l := retryLastLog(t, p, 1)
			if len(l.Chain) != 2 || l.Chain[1].Event != tc.wantEvent || l.Provider != tc.provider {
				t.Fatalf("log %+v: want %s answered by %s", l, tc.wantEvent, tc.provider)
			}
		})
	}
}

// A request-level error (context length) is never retried anywhere.
func TestRetryNotOnRequestError(t *testing.T) {
	primary := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 400}}})
	secondary := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("primary", primary, "priority 0")+provider("secondary", secondary, "priority 1")+
		"hedge off\n retry {\n same_provider 3\n attempts 5\n }\n")

	_, err := anthropicClient(p, "k").Messages.New(ctxTimeout(t, 10*time.Second), anthropicParams("claude-test"))
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(err.Error(), "prompt is too long") {
		t.Fatalf("want the provider's 400 context-length error, got %v", err)
	}
	if n := completions(primary) + completions(secondary); n != 1 {
		t.Fatalf("upstream attempts = %d, want exactly 1", n)
	}
}

// When every provider of a model is overloaded, the fallback model is
// tried; the client sees the model that answered and the log says so.
func TestRetryFallbackModel(t *testing.T) {
	overloaded := sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 529}}}
	a1, a2 := newUpstream(t, overloaded), newUpstream(t, overloaded)
	b := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("a1", a1, "models model-a*")+provider("a2", a2, "models model-a*")+provider("b", b, "models model-b")+
		"hedge off\n retry {\n attempts 5\n backoff 100ms 1s\n fallback_model model-a* model-b\n }\n")

	for i, stream := range []bool{false, true} {
		var model string
		if stream {
			m, err := streamAnthropic(ctxTimeout(t, 15*time.Second), anthropicClient(p, "k"), anthropicParams("model-a-large"))
			if err != nil || messageText(m) != wantText {
				t.Fatalf("stream: %q, %v", messageText(m), err)
			}
			model = string(m.Model)
		} else {
			model = string(retryAsk(t, p, anthropicParams("model-a-large")).Model)
		}
		if model != "model-b" {
			t.Fatalf("stream=%v: response reports model %q, want the fallback model-b", stream, model)
		}
		l := retryLastLog(t, p, i+1)
		last := l.Chain[len(l.Chain)-1]
		if l.FallbackModel != "model-b" || l.ServedModel != "model-b" || last.Event != "fallback" || last.Provider != "b" {
			t.Fatalf("stream=%v: log %+v: want the chain to end with a fallback to b serving model-b", stream, l)
		}
		for _, e := range l.Chain[:len(l.Chain)-1] {
			if e.Provider == "b" || e.Status != 529 {
				t.Fatalf("stream=%v: chain %+v: want only 529s from a1/a2 before the fallback", stream, l.Chain)
			}
		}
	}
	if n := completions(b); n != 2 {
		t.Fatalf("b served %d requests, want 2", n)
	}
}

// A Retry-After that would cross timeouts.total is not waited: the request
// fails over at once, or, with nowhere to go, ends with the error at once.
func TestRetryAfterNeverPastTotal(t *testing.T) {
	rateLimited := sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 429, RetryAfter: "3"}}}
	t.Run("fails over", func(t *testing.T) {
		primary, secondary := newUpstream(t, rateLimited), newUpstream(t, sim.Config{})
		// The providers' own keys: a 429 on the client's key is its answer.
		p := startProxy(t, provider("primary", primary, "priority 0", "key sk-p")+provider("secondary", secondary, "priority 1", "key sk-s")+
			"hedge off\n timeouts {\n total 1s\n }\n retry {\n retry_after_max 10s\n }\n")
		// Waiting 3s would end in a 504 at 1s: success proves no wait.
		retryAsk(t, p, anthropicParams("claude-test"))
		if completions(primary) != 1 || completions(secondary) != 1 {
			t.Fatalf("attempts primary %d secondary %d, want 1 and 1", completions(primary), completions(secondary))
		}
	})
	t.Run("ends with the error", func(t *testing.T) {
		only := newUpstream(t, rateLimited)
		p := startProxy(t, provider("only", only)+"hedge off\n timeouts {\n total 1s\n }\n retry {\n retry_after_max 10s\n }\n")
		_, err := anthropicClient(p, "k").Messages.New(ctxTimeout(t, 10*time.Second), anthropicParams("claude-test"))
		// A wait would end in 504 (total timeout); the provider's own 429
		// with its Retry-After is the truthful answer.
		var apiErr *anthropic.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Response.Header.Get("Retry-After") == "" {
			t.Fatalf("want 429 with Retry-After, got %v", err)
		}
		if n := completions(only); n != 1 {
			t.Fatalf("attempts %d, want 1", n)
		}
	})
}

// Once the retry budget is spent, a request makes no same-provider retry
// but still fails over once to a provider that is not failing, so one
// provider's outage stays invisible; that failover is its last chance.
func TestRetryBudgetSpent(t *testing.T) {
	down := sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 503}}}
	primary, secondary := newUpstream(t, down), newUpstream(t, sim.Config{})
	// budget 0 leaves the floor, 30 retries per 10 s window; the whole test
	// runs well within one window, so once spent the budget stays spent.
	p := startProxy(t, provider("primary", primary, "priority 0")+provider("secondary", secondary, "priority 1")+
		"hedge off\n cooldown {\n failures 1000000\n }\n retry {\n budget 0\n backoff 10ms 20ms\n }\n")

	spentAt := 0
	for n := 1; n <= 60 && spentAt == 0; n++ {
		retryAsk(t, p, anthropicParams("claude-test"))
		l := retryLastLog(t, p, n)
		if l.Provider != "secondary" {
			t.Fatalf("request %d answered by %q, want secondary", n, l.Provider)
		}
		if len(l.Chain) == 2 && l.Chain[0].Event == "initial" && l.Chain[1].Event == "failover" {
			spentAt = n // no same-provider retry: the budget is spent
		} else if len(l.Chain) != 3 || l.Chain[1].Event != "retry" {
			t.Fatalf("request %d: chain %+v, want initial, retry, failover while the budget lasts", n, l.Chain)
		}
	}
	// 30 extras at 2 per request (retry + failover): the 16th finds it spent.
	if spentAt != 16 {
		t.Fatalf("the budget was first spent at request %d, want 16 (30 extras, 2 per request)", spentAt)
	}

	// Now the secondary fails too. It had no failure yet, so the next
	// request still fails over to it once, then ends with the error.
	secondary.SetFaults(down.Faults)
	for i, want := range []int{2, 1, 1} {
		primary.ResetStats()
		secondary.ResetStats()
		_, err := anthropicClient(p, "k").Messages.New(ctxTimeout(t, 10*time.Second), anthropicParams("claude-test"))
		var apiErr *anthropic.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 503 {
			t.Fatalf("request %d with both down: want 503, got %v", i+1, err)
		}
		// After its failure the secondary is failing too: no more free
		// failovers, one attempt per request.
		if got := completions(primary) + completions(secondary); got != want {
			t.Fatalf("request %d with both down: %d upstream attempts, want %d", i+1, got, want)
		}
	}
}

// affinityParams is a request of one conversation.
func affinityParams(user string) anthropic.MessageNewParams {
	params := anthropicParams("claude-test")
	if user != "" {
		params.Metadata = anthropic.MetadataParam{UserID: anthropic.String(user)}
	}
	return params
}

// affinityServed returns which of ups served the request just made, by the
// counts before and after.
func affinityServed(t *testing.T, ups []*upstream, before []int) int {
	t.Helper()
	served := -1
	for i, u := range ups {
		if n := completions(u); n != before[i] {
			if served >= 0 || n != before[i]+1 {
				t.Fatalf("one request reached several providers: %v -> %v", before, affinityCounts(ups))
			}
			served = i
		}
	}
	if served < 0 {
		t.Fatal("no provider served the request")
	}
	return served
}

// failOverOnce makes ups[sticky] answer user's next request with one 503
// (no same-provider retry) and sends it: the counts of requests each
// provider saw before and after, and the other provider that took one
// more (-1 if none did).
func failOverOnce(t *testing.T, p *proxy, ups []*upstream, sticky int, user string) (winner int, before, after []int) {
	t.Helper()
	ups[sticky].SetFaults([]sim.Fault{{Kind: sim.FaultStatus, Status: 503, Count: 1, NoRetry: true}})
	before = affinityCounts(ups)
	retryAsk(t, p, affinityParams(user))
	after = affinityCounts(ups)
	winner = -1
	for i := range ups {
		if i != sticky && after[i] == before[i]+1 {
			winner = i
		}
	}
	return winner, before, after
}

func affinityCounts(ups []*upstream) []int {
	out := make([]int, len(ups))
	for i, u := range ups {
		out[i] = completions(u)
	}
	return out
}

// A conversation (metadata.user_id) sticks to one provider while other
// conversations and keyless requests spread; after a failover the winner
// is remembered, so the next turn goes where the prompt cache now is.
func TestAffinitySticky(t *testing.T) {
	ups := []*upstream{newUpstream(t, sim.Config{}), newUpstream(t, sim.Config{}), newUpstream(t, sim.Config{})}
	block := "hedge off\n cooldown {\n failures 100\n }\n"
	for i, u := range ups {
		block += provider(fmt.Sprintf("p%d", i), u)
	}
	p := startProxy(t, block)

	ask := func(user string) int {
		before := affinityCounts(ups)
		retryAsk(t, p, affinityParams(user))
		return affinityServed(t, ups, before)
	}
	sticky := ask("user-sticky")
	for i := 0; i < 49; i++ {
		if got := ask("user-sticky"); got != sticky {
			t.Fatalf("request %d of user-sticky went to p%d, earlier ones to p%d", i+2, got, sticky)
		}
	}
	for _, tc := range []struct {
		name string
		user func(i int) string
	}{
		{"distinct keys", func(i int) string { return fmt.Sprintf("user-%d", i) }},
		{"no key", func(int) string { return "" }},
	} {
		seen := map[int]int{}
		for i := 0; i < 50; i++ {
			seen[ask(tc.user(i))]++
		}
		// With 3 providers, 50 requests all on one is a 3×3^-50 chance.
		if len(seen) < 2 {
			t.Fatalf("%s: 50 requests all went to one provider: %v", tc.name, seen)
		}
	}

	// The sticky provider fails once (no same-provider retry): the request
	// fails over, and the winner keeps the conversation although the
	// original provider is healthy again and still wins the hash.
	winner, before, after := failOverOnce(t, p, ups, sticky, "user-sticky")
	if after[sticky] != before[sticky]+1 || winner < 0 {
		t.Fatalf("failover: counts %v -> %v, want one failed try on p%d and one answer elsewhere", before, after, sticky)
	}
	for i := 0; i < 10; i++ {
		if got := ask("user-sticky"); got != winner {
			t.Fatalf("turn %d after the failover went to p%d, want the failover winner p%d", i+1, got, winner)
		}
	}
}

// stormResult is what one storm run measured.
type stormResult struct {
	requests, attempts int64
	seconds            float64
	bound              float64
}

// retryStorm runs clients concurrent clients against a proxy whose every
// provider answers 503, for d, and counts requests and upstream attempts.
func retryStorm(t *testing.T, cooldown string, clients int, d time.Duration) stormResult {
	t.Helper()
	down := sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 503}}}
	ups := []*upstream{newUpstream(t, down), newUpstream(t, down), newUpstream(t, down)}
	block := "hedge off\n retry {\n budget 20\n }\n" + cooldown
	for i, u := range ups {
		block += provider(fmt.Sprintf("s%d", i), u)
	}
	p := startProxy(t, block)

	body := `{"model":"claude-test","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	defer client.CloseIdleConnections()
	var requests, failed atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				req, _ := http.NewRequest(http.MethodPost, p.URL+"/v1/messages", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Api-Key", "k")
				requests.Add(1)
				resp, err := client.Do(req)
				if err != nil {
					t.Errorf("storm request: %v", err)
					return
				}
				readAll(resp)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					t.Errorf("storm request succeeded while every provider is down")
					return
				}
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	var attempts int64
	for _, u := range ups {
		attempts += u.Stats().Requests
	}
	// The floor is 3/s, granted per 10 s window: 30 for every window the
	// storm touches. The storm starts the budget's window (a new handler), so
	// a storm of 10 s exactly is one window (floor × seconds = 30), and the
	// tail of requests still running at 10 s opens a second one.
	windows := math.Ceil(elapsed.Seconds() / 10)
	r := stormResult{requests: requests.Load(), attempts: attempts, seconds: elapsed.Seconds()}
	r.bound = 1.2*float64(r.requests) + 3*10*windows
	return r
}

// Every provider down under load: retries stay within the budget, so the
// upstreams see at most (1 + 20%) × requests + 3/s × seconds attempts
// (seconds counted per 10 s window: the floor is granted per window).
// The storm runs twice: with a breaker that never opens, so only the retry
// budget limits attempts, and with the default cooldown.
func TestRetryStormBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("10 s storm")
	}
	for _, tc := range []struct {
		name, cooldown string
		d              time.Duration
	}{
		{"budget only", "cooldown {\n failures 1000000\n }\n", 10 * time.Second},
		{"default cooldown", "", 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := retryStorm(t, tc.cooldown, 50, tc.d)
			t.Logf("storm (%s): %d requests, %d upstream attempts in %.1fs (%.2f per request); bound (1+0.2)×requests + 3/s×10s per window = %.0f; (1+0.2)×requests + 3×seconds = %.0f",
				tc.name, r.requests, r.attempts, r.seconds, float64(r.attempts)/float64(r.requests), r.bound, 1.2*float64(r.requests)+3*math.Ceil(r.seconds))
			if r.requests < 100 {
				t.Fatalf("only %d requests in the storm: not a storm", r.requests)
			}
			if float64(r.attempts) > r.bound {
				t.Fatalf("%d upstream attempts for %d requests exceed the budget bound %.0f", r.attempts, r.requests, r.bound)
			}
		})
	}
}
