package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"go.uber.org/goleak"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// Hedging is about time, so these tests measure some. Every bound is loose
// enough for a loaded 2-core machine running -race, and each comment says
// what the bound tells apart: "after the hedge delay" from "at once", "at
// the commit" from "when the slow provider would have answered".

// hedgeRecs returns the completion requests an upstream saw, oldest first.
func hedgeRecs(u *upstream) []sim.RequestRecord {
	var out []sim.RequestRecord
	for _, r := range u.Requests() {
		if r.Path == "/v1/messages" || r.Path == "/v1/chat/completions" {
			out = append(out, r)
		}
	}
	return out
}

// hedgeOnly returns the single completion request u saw.
func hedgeOnly(t *testing.T, name string, u *upstream) sim.RequestRecord {
	t.Helper()
	recs := hedgeRecs(u)
	if len(recs) != 1 {
		t.Fatalf("%s saw %d completion requests, want 1: %+v", name, len(recs), recs)
	}
	return recs[0]
}

// hedgeWait polls until cond holds, failing the test after d.
func hedgeWait(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition with a deadline
	}
}

// hedgeClosed waits until every completion request of u has ended with its
// connection closed by the proxy, and returns them.
func hedgeClosed(t *testing.T, name string, u *upstream, d time.Duration) []sim.RequestRecord {
	t.Helper()
	hedgeWait(t, d, name+"'s connections to be closed by the proxy", func() bool {
		for _, r := range hedgeRecs(u) {
			if !r.Canceled || r.End.IsZero() {
				return false
			}
		}
		return true
	})
	return hedgeRecs(u)
}

// hedgeChainEntry and hedgeLine are the request log line of the module.
type hedgeChainEntry struct {
	Provider     string `json:"provider"`
	Event        string `json:"event"`
	Outcome      string `json:"outcome"`
	Status       int    `json:"status"`
	Class        string `json:"error_class"`
	OffsetMs     int64  `json:"offset_ms"`
	FirstEventMs int64  `json:"first_event_ms"`
}

type hedgeLine struct {
	Msg      string            `json:"msg"`
	Outcome  string            `json:"outcome"`
	Provider string            `json:"provider"`
	Hedged   bool              `json:"hedged"`
	Chain    []hedgeChainEntry `json:"chain"`
}

func (l hedgeLine) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s hedged=%v provider=%s chain:", l.Outcome, l.Hedged, l.Provider)
	for _, e := range l.Chain {
		fmt.Fprintf(&b, " [%s %s->%s %d %s @%dms]", e.Provider, e.Event, e.Outcome, e.Status, e.Class, e.OffsetMs)
	}
	return b.String()
}

// hedgeLogLines waits until the proxy logged n request lines and returns them.
func hedgeLogLines(t *testing.T, p *proxy, n int) []hedgeLine {
	t.Helper()
	var lines []hedgeLine
	hedgeWait(t, 5*time.Second, fmt.Sprintf("%d request log lines", n), func() bool {
		lines = lines[:0]
		b, err := os.ReadFile(p.LogFile)
		if err != nil {
			return false
		}
		for _, raw := range strings.Split(string(b), "\n") {
			var l hedgeLine
			if json.Unmarshal([]byte(raw), &l) == nil && l.Msg == "llm request" {
				lines = append(lines, l)
			}
		}
		return len(lines) >= n
	})
	return lines
}

// hedgeEntry finds the chain entry of provider, failing if there is none.
func hedgeEntry(t *testing.T, l hedgeLine, provider string) hedgeChainEntry {
	t.Helper()
	var found []hedgeChainEntry
	for _, e := range l.Chain {
		if e.Provider == provider {
			found = append(found, e)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one chain entry for %s: %v", provider, l)
	}
	return found[0]
}

// hedgeProviderView reads the admin API's view of the provider at u.
func hedgeProviderView(t *testing.T, p *proxy, u *upstream) map[string]any {
	t.Helper()
	resp, err := http.Get(p.AdminURL + "/llm_hedge/providers")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var views []map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&views); err != nil {
		t.Fatalf("admin view: %v", err)
	}
	for _, v := range views {
		if v["url"] == u.URL {
			return v
		}
	}
	t.Fatalf("admin view has no provider at %s: %v", u.URL, views)
	return nil
}

// hedgeSSEEvent is one raw server-sent event.
type hedgeSSEEvent struct {
	Event string
	Data  string
}

// hedgeRawStream posts a streaming completion with net/http and returns
// the raw events, so the test sees exactly the bytes a client gets.
func hedgeRawStream(ctx context.Context, p *proxy, path, body string) (int, []hedgeSSEEvent, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.URL+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Api-Key", "k")
	req.Header.Set("Authorization", "Bearer k")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, []hedgeSSEEvent{{Data: string(b)}}, nil
	}
	var events []hedgeSSEEvent
	var cur hedgeSSEEvent
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur != (hedgeSSEEvent{}) {
				events = append(events, cur)
			}
			cur = hedgeSSEEvent{}
		case strings.HasPrefix(line, "event:"):
			cur.Event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			cur.Data += strings.TrimSpace(strings.TrimPrefix(line, "data:"))
		}
	}
	if cur != (hedgeSSEEvent{}) {
		events = append(events, cur)
	}
	return resp.StatusCode, events, sc.Err()
}

const (
	hedgeAnthropicBody = `{"model":"claude-test","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hello"}]}`
	hedgeOpenAIBody    = `{"model":"gpt-test","stream":true,"messages":[{"role":"user","content":"hello"}]}`
)

// hedgeCheckAnthropic checks the events are one well-formed message with
// the given id and text: one message_start, content, one message_stop last.
func hedgeCheckAnthropic(events []hedgeSSEEvent, wantID string) error {
	var text strings.Builder
	starts, stops := 0, 0
	for i, ev := range events {
		var d struct {
			Type    string `json:"type"`
			Message struct {
				ID string `json:"id"`
			} `json:"message"`
			Delta struct {
				Text string `json:"text"`
			} `json:"delta"`
		}
		if err := json.Unmarshal([]byte(ev.Data), &d); err != nil {
			return fmt.Errorf("event %d %q: data is not JSON: %q", i, ev.Event, ev.Data)
		}
		if d.Type != ev.Event {
			return fmt.Errorf("event %d: event %q carries data of type %q", i, ev.Event, d.Type)
		}
		switch ev.Event {
		case "message_start":
			starts++
			if d.Message.ID != wantID {
				return fmt.Errorf("message_start of %q, want the winner's %q", d.Message.ID, wantID)
			}
		case "content_block_delta":
			text.WriteString(d.Delta.Text)
		case "message_stop":
			stops++
			if i != len(events)-1 {
				return fmt.Errorf("%d events after message_stop", len(events)-1-i)
			}
		case "error":
			return fmt.Errorf("error event: %s", ev.Data)
		}
	}
	if starts != 1 || stops != 1 {
		return fmt.Errorf("%d message_start and %d message_stop events, want one of each", starts, stops)
	}
	if text.String() != wantText {
		return fmt.Errorf("text %q, want %q", text.String(), wantText)
	}
	return nil
}

// hedgeCheckOpenAI checks every chunk is of the completion wantID, the
// text is whole and [DONE] comes once, last.
func hedgeCheckOpenAI(events []hedgeSSEEvent, wantID string) error {
	var text strings.Builder
	for i, ev := range events {
		if ev.Data == "[DONE]" {
			if i != len(events)-1 {
				return fmt.Errorf("%d events after [DONE]", len(events)-1-i)
			}
			if text.String() != wantText {
				return fmt.Errorf("text %q, want %q", text.String(), wantText)
			}
			return nil
		}
		var c struct {
			ID      string `json:"id"`
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(ev.Data), &c); err != nil {
			return fmt.Errorf("chunk %d: not JSON: %q", i, ev.Data)
		}
		if c.ID != wantID {
			return fmt.Errorf("chunk %d is of completion %q, want only the winner's %q", i, c.ID, wantID)
		}
		for _, ch := range c.Choices {
			text.WriteString(ch.Delta.Content)
		}
	}
	return errors.New("stream ended without [DONE]")
}

// (a) A primary that takes 30 s to its first token is raced after 300ms:
// the alternative answers, and the proxy hangs up on the primary as soon
// as the alternative commits, while the alternative still streams (its
// nine tokens take ~2.7 s: a proxy that closed the primary at the end of
// the request would close it after the alternative's end).
func TestHedgeSlowPrimaryLosesToAlternative(t *testing.T) {
	primary := newUpstream(t, sim.Config{FirstToken: caddyDur(30 * time.Second)})
	alt := newUpstream(t, sim.Config{TokenDelay: caddyDur(300 * time.Millisecond)})
	p := startProxy(t, provider("primary", primary, "priority 0")+provider("alternative", alt, "priority 1")+
		"hedge {\n after 300ms\n }\n")

	start := time.Now()
	m, err := streamAnthropic(ctxTimeout(t, 20*time.Second), anthropicClient(p, "k"), anthropicParams("claude-test"))
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if got := messageText(m); got != wantText {
		t.Fatalf("text %q, want %q", got, wantText)
	}
	// 300ms of hedge delay and a ~2.7 s alternative, against 30 s.
	if elapsed >= 15*time.Second {
		t.Fatalf("answered after %v, want well before the primary's 30s", elapsed)
	}
	ar := hedgeOnly(t, "alternative", alt)
	if m.ID != ar.ID {
		t.Fatalf("answer is message %q, want the alternative's %q", m.ID, ar.ID)
	}
	pr := hedgeClosed(t, "primary", primary, 3*time.Second)[0]
	if len(hedgeRecs(primary)) != 1 {
		t.Fatalf("primary saw %d requests, want 1", len(hedgeRecs(primary)))
	}
	if pr.Deltas != 0 {
		t.Fatalf("primary sent %d deltas: it should have been cut before its first token", pr.Deltas)
	}
	// The hedge waits for its delay: launched at once would be ~0.
	if d := ar.Start.Sub(pr.Start); d < 200*time.Millisecond {
		t.Fatalf("alternative started %v after the primary, want the 300ms hedge delay", d)
	}
	// The commit follows the alternative's first delta by one loopback hop
	// and the primary is cancelled at the commit: before the alternative's
	// last token, ~2.4 s later (a proxy that let it run, or closed it at the
	// end of the request, would fail; no margin of a loaded machine's
	// scheduling decides it).
	gap := pr.CanceledAt.Sub(ar.FirstDelta)
	t.Logf("answered in %v; primary closed %v after the alternative's first delta", elapsed, gap)
	if !pr.CanceledAt.Before(ar.End) {
		t.Fatalf("primary closed %v after the alternative's first delta, after the alternative's end (%v): want at the commit",
			gap, ar.End.Sub(ar.FirstDelta))
	}

	l := hedgeLogLines(t, p, 1)[0]
	if !l.Hedged || l.Outcome != "success" || l.Provider != "alternative" {
		t.Fatalf("log: %v", l)
	}
	if e := hedgeEntry(t, l, "primary"); e.Event != "initial" || e.Outcome != "hedge_loser_cancelled" {
		t.Fatalf("primary's chain entry: %+v", e)
	}
	if e := hedgeEntry(t, l, "alternative"); e.Event != "hedge_triggered" || e.Outcome != "hedge_winner" || e.FirstEventMs == 0 {
		t.Fatalf("alternative's chain entry: %+v", e)
	}
	if v := hedgeProviderView(t, p, primary); v["failures"] != 0.0 || v["hedges_lost"] != 1.0 {
		t.Fatalf("primary's admin view %v: a hedge loser is not a failure, and counts as a hedge lost", v)
	}
}

// (b) Both providers are slow and stream slowly; the alternative wins.
// The client gets exactly one message, read raw: every event of one id, no
// byte of the loser in between, for both dialects.
func TestHedgeOneUninterleavedStream(t *testing.T) {
	for _, tc := range []struct {
		name, path, body string
		check            func([]hedgeSSEEvent, string) error
	}{
		{"anthropic", "/v1/messages", hedgeAnthropicBody, hedgeCheckAnthropic},
		{"openai", "/v1/chat/completions", hedgeOpenAIBody, hedgeCheckOpenAI},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The alternative's first token comes ~800ms in, the primary's
			// at 2 s while the alternative is still streaming (9 tokens,
			// 150ms apart): any primary byte would land inside its stream.
			primary := newUpstream(t, sim.Config{FirstToken: caddyDur(2 * time.Second), TokenDelay: caddyDur(150 * time.Millisecond)})
			alt := newUpstream(t, sim.Config{FirstToken: caddyDur(500 * time.Millisecond), TokenDelay: caddyDur(150 * time.Millisecond)})
			p := startProxy(t, provider("primary", primary, "priority 0")+provider("alternative", alt, "priority 1")+
				"hedge {\n after 300ms\n }\n")

			status, events, err := hedgeRawStream(ctxTimeout(t, 10*time.Second), p, tc.path, tc.body)
			if err != nil || status != http.StatusOK {
				t.Fatalf("status %d, err %v, events %v", status, err, events)
			}
			ar := hedgeOnly(t, "alternative", alt)
			if err := tc.check(events, ar.ID); err != nil {
				t.Fatalf("%v\nevents: %v", err, events)
			}
			if pr := hedgeClosed(t, "primary", primary, 3*time.Second)[0]; pr.Deltas != 0 {
				t.Fatalf("primary sent %d deltas after losing", pr.Deltas)
			}
		})
	}
}

// (c) A primary that fails at once, with no same-provider retry allowed
// (x-should-retry: false), is replaced at once: the alternative waits
// neither for the (long) hedge delay nor for a backoff (20 s each here,
// so the verdict does not hang on a loaded machine's scheduling). (With a
// retry allowed the primary's tier keeps the request: e2e_tier_test.go.)
func TestHedgeFailedPrimaryReplacedAtOnce(t *testing.T) {
	primary := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 503, NoRetry: true}}})
	alt := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("primary", primary, "priority 0")+provider("alternative", alt, "priority 1")+
		"hedge {\n after 20s\n max 20s\n }\nretry {\n backoff 20s 40s\n }\n")

	start := time.Now()
	m, err := streamAnthropic(ctxTimeout(t, 30*time.Second), anthropicClient(p, "k"), anthropicParams("claude-test"))
	elapsed := time.Since(start)
	if err != nil || messageText(m) != wantText {
		t.Fatalf("text %q, err %v", messageText(m), err)
	}
	pr, ar := hedgeOnly(t, "primary", primary), hedgeOnly(t, "alternative", alt)
	gap := ar.Start.Sub(pr.End)
	t.Logf("answered in %v; alternative started %v after the primary's 503", elapsed, gap)
	// "At once": well under the 20 s backoff base and hedge delay.
	if gap > 5*time.Second {
		t.Fatalf("alternative started %v after the primary failed, want at once", gap)
	}
	if elapsed > 10*time.Second {
		t.Fatalf("answered after %v, want well before the 20s hedge delay", elapsed)
	}
	l := hedgeLogLines(t, p, 1)[0]
	if l.Hedged || l.Provider != "alternative" {
		t.Fatalf("log: %v", l)
	}
	if e := hedgeEntry(t, l, "primary"); e.Outcome != "provider_error" || e.Status != 503 {
		t.Fatalf("primary's chain entry: %+v", e)
	}
	if e := hedgeEntry(t, l, "alternative"); e.Event != "failover" || e.Outcome != "request_success" {
		t.Fatalf("alternative's chain entry: %+v", e)
	}
}

// A racer that fails while another races is replaced at once too: the
// primary fails 700ms in (no retry allowed) while the hedge (slow) runs;
// the third provider starts at once, not after a backoff (20 s here), and
// wins.
func TestHedgeRacerFailureLaunchesNextAtOnce(t *testing.T) {
	primary := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 503, NoRetry: true, Delay: caddyDur(700 * time.Millisecond)}}})
	slow := newUpstream(t, sim.Config{FirstToken: caddyDur(30 * time.Second)})
	third := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("primary", primary, "priority 0")+provider("slow", slow, "priority 1")+
		provider("third", third, "priority 2")+"hedge {\n after 200ms\n }\nretry {\n backoff 20s 40s\n }\n")

	m, err := streamAnthropic(ctxTimeout(t, 20*time.Second), anthropicClient(p, "k"), anthropicParams("claude-test"))
	if err != nil || messageText(m) != wantText {
		t.Fatalf("text %q, err %v", messageText(m), err)
	}
	pr, tr := hedgeOnly(t, "primary", primary), hedgeOnly(t, "third", third)
	if m.ID != tr.ID {
		t.Fatalf("answer %q, want the third provider's %q", m.ID, tr.ID)
	}
	if gap := tr.Start.Sub(pr.End); gap > 5*time.Second {
		t.Fatalf("third started %v after the primary failed, want at once (no backoff)", gap)
	}
	hedgeClosed(t, "slow", slow, 3*time.Second)
	l := hedgeLogLines(t, p, 1)[0]
	if e := hedgeEntry(t, l, "slow"); e.Event != "hedge_triggered" || e.Outcome != "hedge_loser_cancelled" {
		t.Fatalf("slow's chain entry: %+v\n%v", e, l)
	}
	if e := hedgeEntry(t, l, "third"); e.Event != "failover" || e.Outcome != "hedge_winner" {
		t.Fatalf("third's chain entry: %+v\n%v", e, l)
	}
}

// (d) With `budget 0` only the floor of 1 hedge/s (10 per 10 s window)
// is left: of 14 slow requests at once, exactly 10 are hedged, and the
// other 4 are still served, by their first attempt.
func TestHedgeBudgetExhausted(t *testing.T) {
	const n, floor = 14, 10
	primary := newUpstream(t, sim.Config{FirstToken: caddyDur(1500 * time.Millisecond)})
	alt := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("primary", primary, "priority 0")+provider("alternative", alt, "priority 1")+
		"hedge {\n after 100ms\n budget 0\n }\n")

	c := anthropicClient(p, "k")
	clients := make([]*anthropic.Client, n)
	for i := range clients {
		clients[i] = c
	}
	allStreamed(t, wantText, clients...)
	if got := len(hedgeRecs(alt)); got != floor {
		t.Fatalf("%d hedges reached the alternative, want exactly the floor of %d", got, floor)
	}
	if got := len(hedgeRecs(primary)); got != n {
		t.Fatalf("primary saw %d requests, want %d", got, n)
	}
	hedged, waited := 0, 0
	for _, l := range hedgeLogLines(t, p, n) {
		switch {
		case l.Outcome != "success":
			t.Fatalf("log: %v", l)
		case l.Hedged:
			hedged++
		case len(l.Chain) == 2 && l.Provider == "primary" && l.Chain[0].Outcome == "request_success" &&
			l.Chain[1].Event == "hedge_budget_exhausted":
			waited++ // the chain also says why no hedge was launched
		default:
			t.Fatalf("unhedged request not served by its first attempt: %v", l)
		}
	}
	if hedged != floor || waited != n-floor {
		t.Fatalf("%d hedged and %d served by the primary alone, want %d and %d", hedged, waited, floor, n-floor)
	}
}

// A hedge that finds no candidate to start (the alternative is cooling
// down) is not charged to the budget: with only the floor of 10 hedges,
// a dozen such requests still leave room for a real hedge afterwards.
func TestHedgeBudgetNotSpentWithoutHedge(t *testing.T) {
	primary := newUpstream(t, sim.Config{FirstToken: caddyDur(time.Second)})
	alt := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 503, Count: 1}}})
	p := startProxy(t, provider("primary", primary, "priority 0")+provider("alternative", alt, "priority 1")+
		"hedge {\n after 100ms\n budget 0\n }\n cooldown {\n failures 1\n }\n")
	c := anthropicClient(p, "k")
	stream := func() (anthropic.Message, error) {
		return streamAnthropic(ctxTimeout(t, 10*time.Second), c, anthropicParams("claude-test"))
	}

	// One real hedge, which fails and opens the alternative's breaker.
	if _, err := stream(); err != nil {
		t.Fatal(err)
	}
	if v := hedgeProviderView(t, p, alt); v["state"] != "open" {
		t.Fatalf("alternative %v, want its breaker open", v)
	}
	var wg sync.WaitGroup
	for range 12 {
		wg.Go(func() {
			if _, err := stream(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := len(hedgeRecs(alt)); n != 1 {
		t.Fatalf("the cooling alternative got %d requests, want only the first", n)
	}

	resp, err := http.Post(p.AdminURL+"/llm_hedge/providers/alternative/reset", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	m, err := stream()
	if err != nil {
		t.Fatal(err)
	}
	recs := hedgeRecs(alt)
	if len(recs) != 2 || m.ID != recs[1].ID {
		t.Fatalf("after the reset the request was not hedged to the alternative (%d requests there): hedges that never started used up the budget", len(recs))
	}
}

// (e) The client hangs up mid-race: every upstream connection is closed
// within 1 s, and nothing is counted against the providers.
func TestHedgeClientCancelClosesEveryAttempt(t *testing.T) {
	primary := newUpstream(t, sim.Config{FirstToken: caddyDur(5 * time.Second)})
	alt := newUpstream(t, sim.Config{FirstToken: caddyDur(5 * time.Second)})
	p := startProxy(t, provider("primary", primary, "priority 0")+provider("alternative", alt, "priority 1")+
		"hedge {\n after 200ms\n }\n")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, _, err := hedgeRawStream(ctx, p, "/v1/messages", hedgeAnthropicBody)
		done <- err
	}()
	hedgeWait(t, 5*time.Second, "both attempts to be racing", func() bool {
		return len(hedgeRecs(primary)) == 1 && len(hedgeRecs(alt)) == 1
	})
	cancelAt := time.Now()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("client: %v", err)
	}
	for _, u := range []struct {
		name string
		up   *upstream
	}{{"primary", primary}, {"alternative", alt}} {
		r := hedgeClosed(t, u.name, u.up, 3*time.Second)[0]
		if d := r.CanceledAt.Sub(cancelAt); d > time.Second {
			t.Fatalf("%s closed %v after the client left, want within 1s", u.name, d)
		}
	}
	l := hedgeLogLines(t, p, 1)[0]
	if l.Outcome != "client_abort" {
		t.Fatalf("log: %v", l)
	}
	for _, e := range l.Chain {
		if e.Outcome != "client_abort" {
			t.Fatalf("chain entry %+v, want client_abort\n%v", e, l)
		}
	}
	for _, u := range []*upstream{primary, alt} {
		if v := hedgeProviderView(t, p, u); v["failures"] != 0.0 {
			t.Fatalf("admin view %v: a client abort counts against nobody", v)
		}
	}
}

// (f) A hedge goes to another vendor first, even past a provider of the
// slow one's vendor that comes earlier by priority.
func TestHedgePrefersAnotherVendor(t *testing.T) {
	slow := newUpstream(t, sim.Config{FirstToken: caddyDur(5 * time.Second)})
	sibling := newUpstream(t, sim.Config{})
	other := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("slow", slow, "vendor acme", "priority 0")+
		provider("sibling", sibling, "vendor acme", "priority 1")+
		provider("other", other, "vendor globex", "priority 2")+"hedge {\n after 200ms\n }\n")

	m, err := streamAnthropic(ctxTimeout(t, 10*time.Second), anthropicClient(p, "k"), anthropicParams("claude-test"))
	if err != nil || messageText(m) != wantText {
		t.Fatalf("text %q, err %v", messageText(m), err)
	}
	if or := hedgeOnly(t, "other", other); m.ID != or.ID {
		t.Fatalf("answer %q, want the other vendor's %q", m.ID, or.ID)
	}
	if n := len(hedgeRecs(sibling)); n != 0 {
		t.Fatalf("the slow provider's sibling got %d requests; the hedge should go to another vendor", n)
	}
	hedgeClosed(t, "slow", slow, 3*time.Second)
}

// A request-level error from a racer ends the race: the client gets the
// 400 as is, and the cancelled primary is a loser, not a failure.
func TestHedgeRequestErrorEndsRace(t *testing.T) {
	primary := newUpstream(t, sim.Config{FirstToken: caddyDur(5 * time.Second)})
	alt := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 400}}})
	p := startProxy(t, provider("primary", primary, "priority 0")+provider("alternative", alt, "priority 1")+
		"hedge {\n after 200ms\n }\n")

	_, err := streamAnthropic(ctxTimeout(t, 10*time.Second), anthropicClient(p, "k"), anthropicParams("claude-test"))
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 {
		t.Fatalf("want the alternative's 400, got %v", err)
	}
	hedgeClosed(t, "primary", primary, 3*time.Second)
	hedgeLogLines(t, p, 1)
	if v := hedgeProviderView(t, p, primary); v["failures"] != 0.0 || v["consecutive_failures"] != 0.0 {
		t.Fatalf("primary's admin view %v: cancelled because the request was bad, it did not fail", v)
	}
}

// Racing is bounded by hedge max_attempts at once and retry attempts in
// total; each further hedge waits for its own delay.
func TestHedgeAttemptLimits(t *testing.T) {
	for _, tc := range []struct {
		name  string
		retry string
		want  int
	}{
		{"max_attempts 3", "", 3},
		{"attempts 2", "retry {\n attempts 2\n }\n", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ups := []*upstream{
				newUpstream(t, sim.Config{FirstToken: caddyDur(2 * time.Second)}),
				newUpstream(t, sim.Config{FirstToken: caddyDur(2 * time.Second)}),
				newUpstream(t, sim.Config{FirstToken: caddyDur(300 * time.Millisecond)}),
			}
			p := startProxy(t, provider("a", ups[0], "priority 0")+provider("b", ups[1], "priority 1")+
				provider("c", ups[2], "priority 2")+"hedge {\n after 200ms\n max_attempts 3\n }\n"+tc.retry)

			m, err := streamAnthropic(ctxTimeout(t, 10*time.Second), anthropicClient(p, "k"), anthropicParams("claude-test"))
			if err != nil || messageText(m) != wantText {
				t.Fatalf("text %q, err %v", messageText(m), err)
			}
			var starts []time.Time
			for i, u := range ups {
				n := len(hedgeRecs(u))
				if (i < tc.want && n != 1) || (i >= tc.want && n != 0) {
					t.Fatalf("provider %d saw %d requests; want %d attempts in all", i, n, tc.want)
				}
				if n == 1 {
					starts = append(starts, hedgeRecs(u)[0].Start)
				}
			}
			// Each hedge waits for the delay after the one before it.
			for i := 1; i < len(starts); i++ {
				if d := starts[i].Sub(starts[i-1]); d < 150*time.Millisecond {
					t.Fatalf("attempt %d started %v after attempt %d, want the 200ms hedge delay", i+1, d, i)
				}
			}
			l := hedgeLogLines(t, p, 1)[0]
			if len(l.Chain) != tc.want {
				t.Fatalf("log: %v", l)
			}
		})
	}
}

// When the first attempt fails and its replacement runs alone, the hedge
// delay starts over for the replacement: a hedge 3 s into an attempt
// with a 5 s delay would cut its delay short by the time the first took.
func TestHedgeDelayRestartsForReplacement(t *testing.T) {
	primary := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 503, NoRetry: true, Delay: caddyDur(2 * time.Second)}}})
	slow := newUpstream(t, sim.Config{FirstToken: caddyDur(30 * time.Second)})
	third := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("primary", primary, "priority 0")+provider("slow", slow, "priority 1")+
		provider("third", third, "priority 2")+"hedge {\n after 5s\n }\nretry {\n backoff 20s 40s\n }\n")

	m, err := streamAnthropic(ctxTimeout(t, 30*time.Second), anthropicClient(p, "k"), anthropicParams("claude-test"))
	if err != nil || messageText(m) != wantText {
		t.Fatalf("text %q, err %v", messageText(m), err)
	}
	pr, sr, tr := hedgeOnly(t, "primary", primary), hedgeOnly(t, "slow", slow), hedgeOnly(t, "third", third)
	if m.ID != tr.ID {
		t.Fatalf("answer %q, want the hedge's %q", m.ID, tr.ID)
	}
	if d := sr.Start.Sub(pr.End); d > 5*time.Second {
		t.Fatalf("replacement started %v after the primary failed, want at once (no 20s backoff)", d)
	}
	// Counted from the primary's start the delay would end ~3 s after the
	// replacement started; restarted, it ends 5 s after. The threshold sits
	// a second from each, and the primary fails 3 s before its delay would,
	// so a loaded machine's scheduling decides neither.
	if d := tr.Start.Sub(sr.Start); d < 4*time.Second {
		t.Fatalf("hedge started %v after the replacement, want the full 5s delay", d)
	}
	hedgeClosed(t, "slow", slow, 3*time.Second)
}

// Non-streaming requests are not hedged, and their times (a whole
// generation) do not feed the first-event estimate that sets the delay.
func TestHedgeNotForNonStreaming(t *testing.T) {
	primary := newUpstream(t, sim.Config{FirstToken: caddyDur(1200 * time.Millisecond)})
	alt := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("primary", primary, "priority 0")+provider("alternative", alt, "priority 1")+
		"hedge {\n after 200ms\n }\n")

	m, err := anthropicClient(p, "k").Messages.New(ctxTimeout(t, 10*time.Second), anthropicParams("claude-test"))
	if err != nil || messageText(*m) != wantText {
		t.Fatalf("non-stream: %v", err)
	}
	if n := len(hedgeRecs(alt)); n != 0 {
		t.Fatalf("a non-streaming request was hedged (%d requests to the alternative)", n)
	}
	if v := hedgeProviderView(t, p, primary); v["first_event_p50_ms"] != nil {
		t.Fatalf("admin view %v: a non-stream response time fed the first-event estimate", v)
	}
	if err := primary.SetConfig(sim.Config{Tokens: 9}); err != nil {
		t.Fatal(err)
	}
	if _, err := streamAnthropic(ctxTimeout(t, 10*time.Second), anthropicClient(p, "k"), anthropicParams("claude-test")); err != nil {
		t.Fatal(err)
	}
	if v := hedgeProviderView(t, p, primary); v["first_event_p50_ms"] == nil {
		t.Fatalf("admin view %v: a stream's first event should feed the estimate", v)
	}
}

// Caddy's own process-wide goroutines outlive caddy.Stop by design: the
// admin server (kept across configs), the storage lock refresher of
// certmagic and the log file's rotation worker. They are not request work,
// so the leak check ignores exactly those, by function anywhere in their
// stack.
var hedgeCaddyGoroutines = []goleak.Option{
	goleak.IgnoreAnyFunction("github.com/caddyserver/caddy/v2.replaceLocalAdminServer.func2"),
	goleak.IgnoreAnyFunction("github.com/caddyserver/certmagic.keepLockfileFresh"),
	goleak.IgnoreTopFunction("github.com/DeRuina/timberjack.(*Logger).millRun"),
}

// No goroutine of a request outlives it: after hedge wins, failovers, a
// client leaving mid-race, a request error ending a race and plain
// requests, once Caddy is stopped (which closes the pooled upstream
// connections) nothing started since the baseline is left, except
// Caddy's own process-wide workers.
func TestHedgeLeavesNoGoroutine(t *testing.T) {
	slow := sim.Config{Tokens: 9, FirstToken: caddyDur(3 * time.Second)}
	fast := sim.Config{Tokens: 9}
	primary, alt := newUpstream(t, slow), newUpstream(t, fast)
	base := goleak.IgnoreCurrent()
	p := startProxy(t, provider("primary", primary, "priority 0")+provider("alternative", alt, "priority 1")+
		"hedge {\n after 200ms\n }\n cooldown {\n failures 100\n }\n")
	client := &http.Client{Transport: &http.Transport{}}
	idle := func() {
		for _, u := range []*upstream{primary, alt} {
			if err := u.WaitIdle(ctxTimeout(t, 5*time.Second)); err != nil {
				t.Fatalf("upstream still busy: %v", err)
			}
		}
	}
	set := func(pc, ac sim.Config) {
		idle()
		if err := primary.SetConfig(pc); err != nil {
			t.Fatal(err)
		}
		if err := alt.SetConfig(ac); err != nil {
			t.Fatal(err)
		}
	}
	post := func(ctx context.Context, path, body string) (int, string, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	expect := func(what string, wantStatus int, path, body string) {
		t.Helper()
		status, got, err := post(ctxTimeout(t, 10*time.Second), path, body)
		if err != nil || status != wantStatus {
			t.Fatalf("%s: status %d, err %v: %s", what, status, err, got)
		}
	}

	set(slow, fast)
	expect("hedge win", 200, "/v1/messages", hedgeAnthropicBody)
	set(sim.Config{Tokens: 9, Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 503}}}, fast)
	expect("failover", 200, "/v1/chat/completions", hedgeOpenAIBody)
	set(slow, sim.Config{Tokens: 9, Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 400}}})
	expect("request error mid-race", 400, "/v1/messages", hedgeAnthropicBody)
	set(slow, slow)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, _, err := post(ctx, "/v1/messages", hedgeAnthropicBody); done <- err }()
	hedgeWait(t, 5*time.Second, "both attempts to be racing", func() bool {
		return len(hedgeRecs(primary)) > 0 && primary.Stats().InFlight == 1 && alt.Stats().InFlight == 1
	})
	cancel()
	<-done
	set(fast, fast)
	expect("plain stream", 200, "/v1/messages", hedgeAnthropicBody)
	expect("non-stream", 200, "/v1/messages", `{"model":"claude-test","max_tokens":64,"messages":[{"role":"user","content":"hello"}]}`)
	idle()

	client.CloseIdleConnections()
	http.DefaultClient.CloseIdleConnections()
	if err := caddy.Stop(); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, append([]goleak.Option{base}, hedgeCaddyGoroutines...)...)
}
