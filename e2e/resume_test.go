package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// longText is an answer of 60 words: one delta each.
var longText = strings.TrimSpace(strings.Repeat("alpha beta gamma delta epsilon zeta eta theta iota kappa ", 6))

// cutOnce is a simulated provider that cuts its first stream after 40 of
// its 60 deltas.
func cutOnce(t *testing.T) *upstream {
	return newUpstream(t, sim.Config{Tokens: 60, Text: longText, Faults: []sim.Fault{{Kind: sim.FaultCut, After: 40, Count: 1}}})
}

// resumeLine is the request's log line and its resume chain entries.
func resumeLine(t *testing.T, p *proxy) (map[string]any, []map[string]any) {
	t.Helper()
	lines := streamLogLines(t, p, 1)
	line := lines[len(lines)-1]
	var resumes []map[string]any
	chain, _ := line["chain"].([]any)
	for _, e := range chain {
		if m, _ := e.(map[string]any); m["event"] == "resume" {
			resumes = append(resumes, m)
		}
	}
	return line, resumes
}

// A stream cut after 40 deltas, with a fallback that accepts prefill: the
// fallback gets the delivered text as an assistant turn and answers the
// rest; the SDK reads the whole text as one message with one id, and the
// usage counts the output of the whole answer.
func TestResumePrefillAnthropic(t *testing.T) {
	cut := cutOnce(t)
	other := newUpstream(t, sim.Config{Tokens: 60, Text: longText})
	p := startProxy(t, provider("cut", cut, "priority 1", "api anthropic")+provider("other", other, "priority 2", "api anthropic")+"hedge off\n")

	m, err := streamAnthropic(ctxTimeout(t, 10*time.Second), anthropicClient(p, "k"), anthropicParams("claude-test"))
	if err != nil {
		t.Fatalf("continued stream: %v (text so far %q)", err, messageText(m))
	}
	if got := messageText(m); got != longText || len(m.Content) != 1 {
		t.Fatalf("text = %q in %d blocks\nwant %q in 1", got, len(m.Content), longText)
	}
	first := cut.Requests()[0]
	if m.ID != first.ID {
		t.Errorf("message id %q, want the committed stream's %q", m.ID, first.ID)
	}
	if m.Usage.OutputTokens != 60 {
		t.Errorf("output tokens = %d, want 60 (40 delivered + 20 continued)", m.Usage.OutputTokens)
	}
	recs := other.Requests()
	if len(recs) != 1 || !recs[0].Prefilled || !strings.HasPrefix(longText, recs[0].Prefill) || len(recs[0].Prefill) < 100 {
		t.Fatalf("the fallback saw %+v, want one request with the delivered text as its prefill", recs)
	}
	line, resumes := resumeLine(t, p)
	if line["outcome"] != "success" || len(resumes) != 1 || resumes[0]["outcome"] != "completed" || resumes[0]["strategy"] != "prefill" {
		t.Fatalf("log line outcome %v, resume entries %v", line["outcome"], resumes)
	}
	if want := len(strings.Join(strings.Fields(longText)[:40], " ")) + 1; resumes[0]["delivered_chars"] != float64(want) {
		t.Errorf("delivered_chars %v, want %d (the 40 words delivered)", resumes[0]["delivered_chars"], want)
	}
	if line["output_tokens"] != float64(60) {
		t.Errorf("logged output tokens %v, want 60", line["output_tokens"])
	}
	mt := observeScrapeUntil(t, p, func(m observeMetrics) bool { return m[`caddy_llm_hedge_resume_total{outcome="completed"}`] >= 1 })
	if mt.sum("caddy_llm_hedge_resume_input_tokens_total") <= 0 {
		t.Errorf("no continuation input tokens counted")
	}
	// The continuation's output is billed by its provider: tokens_total.
	if got := mt[`caddy_llm_hedge_tokens_total{kind="output",provider="other"}`]; got < 20 {
		t.Errorf("tokens_total output of the continuation's provider = %v, want what it reported (the 20 continued words at least)", got)
	}
}

// A fallback that refuses prefill (a 400 naming it) but answers the same
// text: replay-match completes the stream, and the 400 never reaches the
// client.
func TestResumePrefillRejectedReplays(t *testing.T) {
	cut := cutOnce(t)
	other := newUpstream(t, sim.Config{Tokens: 60, Text: longText, Prefill: sim.PrefillOff})
	p := startProxy(t, provider("cut", cut, "priority 1", "api anthropic")+provider("other", other, "priority 2", "api anthropic")+"hedge off\n")

	m, err := streamAnthropic(ctxTimeout(t, 10*time.Second), anthropicClient(p, "k"), anthropicParams("claude-test"))
	if err != nil || messageText(m) != longText || len(m.Content) != 1 {
		t.Fatalf("continued stream: %v, text %q", err, messageText(m))
	}
	if m.Usage.OutputTokens != 60 {
		t.Errorf("output tokens = %d, want 60", m.Usage.OutputTokens)
	}
	var statuses []int
	for _, r := range other.Requests() {
		statuses = append(statuses, r.Status)
	}
	if fmt.Sprint(statuses) != "[400 200]" {
		t.Fatalf("fallback answered %v, want the prefill refused then the replay", statuses)
	}
	_, resumes := resumeLine(t, p)
	if len(resumes) != 1 || resumes[0]["strategy"] != "replay" || resumes[0]["outcome"] != "completed" {
		t.Fatalf("resume entries %v, want one completed replay", resumes)
	}
}

// A sampled fallback answers another text: the continuation is cancelled
// and the client gets the error event, with only the delivered text.
func TestResumeSampledIsAnError(t *testing.T) {
	cut := newUpstream(t, sim.Config{Tokens: 60, Text: longText, Faults: []sim.Fault{{Kind: sim.FaultCut, After: 40}}})
	other := newUpstream(t, sim.Config{Tokens: 60, Text: longText, Sampling: sim.SamplingSampled, Prefill: sim.PrefillOff})
	p := startProxy(t, provider("cut", cut, "priority 1")+provider("other", other, "priority 2")+"hedge off\n")
	m, err := streamAnthropic(ctxTimeout(t, 10*time.Second), anthropicClient(p, "k"), anthropicParams("claude-test"))
	if err == nil {
		t.Fatalf("diverged continuation finished cleanly: %q", messageText(m))
	}
	got := messageText(m)
	if !strings.HasPrefix(longText, got) || len(strings.Fields(got)) != 40 {
		t.Fatalf("client text %q: want exactly the 40 delivered words", got)
	}
	_, resumes := resumeLine(t, p)
	if len(resumes) != 1 || resumes[0]["outcome"] == "completed" {
		t.Fatalf("resume entries %v, want one that did not complete", resumes)
	}
}

// A stream that stalls past idle after commit is continued like a cut one.
func TestResumeStall(t *testing.T) {
	stall := newUpstream(t, sim.Config{Tokens: 60, Text: longText, Faults: []sim.Fault{{Kind: sim.FaultStall, After: 40, Count: 1}}})
	other := newUpstream(t, sim.Config{Tokens: 60, Text: longText})
	p := startProxy(t, provider("stall", stall, "priority 1", "api anthropic")+provider("other", other, "priority 2", "api anthropic")+
		"hedge off\ntimeouts {\n idle 2s\n}\n") // far above the healthy continuation's gaps under -race
	m, err := streamAnthropic(ctxTimeout(t, 20*time.Second), anthropicClient(p, "k"), anthropicParams("claude-test"))
	if err != nil || messageText(m) != longText {
		t.Fatalf("stalled stream: %v, text %q", err, messageText(m))
	}
	line, _ := resumeLine(t, p)
	if line["outcome"] != "success" {
		t.Fatalf("log outcome %v", line["outcome"])
	}
}

// With resume off a cut stream ends in the error event, as before, and no
// other provider is asked.
func TestResumeOff(t *testing.T) {
	cut := cutOnce(t)
	other := newUpstream(t, sim.Config{Tokens: 60, Text: longText})
	p := startProxy(t, provider("cut", cut, "priority 1", "api anthropic")+provider("other", other, "priority 2", "api anthropic")+
		"hedge off\nstream {\n resume off\n}\n")
	m, err := streamAnthropic(ctxTimeout(t, 10*time.Second), anthropicClient(p, "k"), anthropicParams("claude-test"))
	if err == nil {
		t.Fatalf("cut stream finished cleanly: %q", messageText(m))
	}
	if n := len(other.Requests()); n != 0 {
		t.Fatalf("other saw %d requests, want none", n)
	}
}

// A stream cut in the middle of a tool call's arguments is not continued:
// the client gets the error event, and no continuation is attempted.
func TestResumeToolCallIsNotContinued(t *testing.T) {
	tool := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_t\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-test\",\"stop_reason\":null,\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n"+
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"+
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Let me look.\"}}\n\n"+
			"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"+
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"read\",\"input\":{}}}\n\n"+
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"path\\\": \\\"/et\"}}\n\n")
	}))
	t.Cleanup(tool.Close)
	other := newUpstream(t, sim.Config{Tokens: 60, Text: longText})
	p := startProxy(t, fmt.Sprintf("\t\tprovider tool %s {\n\t\t\tpriority 1\n\t\t\tapi anthropic\n\t\t}\n", tool.URL)+
		provider("other", other, "priority 2", "api anthropic")+"hedge off\n")
	m, err := streamAnthropic(ctxTimeout(t, 10*time.Second), anthropicClient(p, "k"), anthropicParams("claude-test"))
	if err == nil {
		t.Fatalf("a cut tool call finished cleanly: %+v", m)
	}
	if n := len(other.Requests()); n != 0 {
		t.Fatalf("other saw %d requests, want no continuation attempt", n)
	}
	_, resumes := resumeLine(t, p)
	if len(resumes) != 1 || resumes[0]["outcome"] != "ineligible" {
		t.Fatalf("resume entries %v, want one ineligible", resumes)
	}
}

// The provider that cut the stream is charged with the cut even though the
// client got its whole answer: its breaker opens after as many cuts as
// failures allows.
func TestResumeCutStillCountsAgainstTheProvider(t *testing.T) {
	cut := newUpstream(t, sim.Config{Tokens: 60, Text: longText, Faults: []sim.Fault{{Kind: sim.FaultCut, After: 40, Header: "X-Cut"}}})
	other := newUpstream(t, sim.Config{Tokens: 60, Text: longText})
	p := startProxy(t, provider("cut", cut, "priority 1", "api anthropic")+provider("other", other, "priority 2", "api anthropic")+
		"hedge off\ncooldown {\n failures 2\n duration 30s\n}\n")
	for range 2 {
		req, _ := http.NewRequest("POST", p.URL+"/v1/messages", strings.NewReader(`{"model":"claude-test","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("X-Cut", "1")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(resp)
		if !strings.Contains(body, "message_stop") || strings.Contains(body, "event: error") {
			t.Fatalf("continued stream: %s", body)
		}
	}
	v := healthWaitAdmin(t, p, "cut", cut, "the cut streams to settle", func(v *healthView) bool { return v != nil && v.InFlight == 0 })
	if v.State != "open" {
		t.Fatalf("after 2 cut (and continued) streams with failures 2: %+v, want open", *v)
	}
}

// Every continuation attempt pairs its bookkeeping like any other: one end
// per begin and one verdict, whether it completed the stream, diverged, or
// was refused its prefill.
func TestResumeBookkeepingPairs(t *testing.T) {
	reports := watchBookkeeping(t)
	cut := newUpstream(t, sim.Config{Tokens: 60, Text: longText, Faults: []sim.Fault{{Kind: sim.FaultCut, After: 40, Header: "X-Cut"}}})
	sampled := newUpstream(t, sim.Config{Tokens: 60, Text: longText, Sampling: sim.SamplingSampled, Prefill: sim.PrefillOff})
	same := newUpstream(t, sim.Config{Tokens: 60, Text: longText, Prefill: sim.PrefillOff})
	p := startProxy(t, provider("cut", cut, "priority 1", "api anthropic")+provider("sampled", sampled, "priority 2", "api anthropic")+
		provider("same", same, "priority 3", "api anthropic")+"hedge off\ncooldown {\n failures 100\n}\n")
	for i := range 3 {
		req, _ := http.NewRequest("POST", p.URL+"/v1/messages", strings.NewReader(`{"model":"claude-test","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("X-Cut", "1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if body := readAll(resp); !strings.Contains(body, "message_stop") {
			t.Fatalf("request %d not continued: %s", i, body)
		}
		select {
		case rep := <-reports:
			for _, pr := range rep.Problems {
				t.Errorf("request %d: %s", i, pr)
			}
			if rep.Attempts < 3 {
				t.Errorf("request %d: %d attempts, want the cut one and its continuations", i, rep.Attempts)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the request never finished")
		}
	}
}

// A continuation is raced like any streaming attempt: when its target is
// slow to its first token, a hedge goes to the next one, which wins; the
// slow one is cancelled.
func TestResumeHedged(t *testing.T) {
	cut := cutOnce(t)
	slow := newUpstream(t, sim.Config{Tokens: 60, Text: longText, FirstToken: caddy.Duration(5 * time.Second)})
	fast := newUpstream(t, sim.Config{Tokens: 60, Text: longText})
	p := startProxy(t, provider("cut", cut, "priority 1", "api anthropic", "vendor a")+provider("slow", slow, "priority 2", "api anthropic", "vendor b")+
		provider("fast", fast, "priority 3", "api anthropic", "vendor c")+"hedge {\n after 100ms\n budget 100\n}\n")
	m, err := streamAnthropic(ctxTimeout(t, 10*time.Second), anthropicClient(p, "k"), anthropicParams("claude-test"))
	if err != nil || messageText(m) != longText {
		t.Fatalf("continued stream: %v, text %q", err, messageText(m))
	}
	line, resumes := resumeLine(t, p)
	if len(resumes) != 1 || resumes[0]["outcome"] != "completed" || line["hedged"] != true {
		t.Fatalf("hedged %v, resume entries %v", line["hedged"], resumes)
	}
	var hedge bool
	for _, e := range line["chain"].([]any) {
		if m := e.(map[string]any); m["provider"] == "fast" && m["event"] == "hedge_triggered" {
			hedge = true
		}
	}
	if !hedge {
		t.Fatalf("no hedge to fast in the chain %v", line["chain"])
	}
	streamWait(t, 5*time.Second, "the slow continuation to be cancelled", func() bool {
		recs := slow.Requests()
		return len(recs) == 1 && recs[0].Canceled
	})
}

// A stream cut after its message_delta (the stop reason and the usage) but
// before message_stop only lacks its terminal event: the proxy writes it,
// with no other attempt.
func TestResumeOnlyTerminalMissing(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_f\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-test\",\"stop_reason\":null,\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n"+
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"+
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Done.\"}}\n\n"+
			"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"+
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":2}}\n\n")
	}))
	t.Cleanup(up.Close)
	other := newUpstream(t, sim.Config{})
	p := startProxy(t, fmt.Sprintf("\t\tprovider only %s {\n\t\t\tpriority 1\n\t\t}\n", up.URL)+provider("other", other, "priority 2")+"hedge off\n")
	m, err := streamAnthropic(ctxTimeout(t, 10*time.Second), anthropicClient(p, "k"), anthropicParams("claude-test"))
	if err != nil || messageText(m) != "Done." || m.StopReason != "end_turn" || m.Usage.OutputTokens != 2 {
		t.Fatalf("stream: %v, %+v", err, m)
	}
	if n := len(other.Requests()); n != 0 {
		t.Fatalf("other saw %d requests, want none", n)
	}
	_, resumes := resumeLine(t, p)
	if len(resumes) != 1 || resumes[0]["strategy"] != "finish" || resumes[0]["outcome"] != "completed" {
		t.Fatalf("resume entries %v", resumes)
	}
}

// A client that leaves while its stream is being continued: the
// continuation is cancelled and the request is logged as the client's
// abort, not a stream error.
func TestResumeClientLeaves(t *testing.T) {
	cut := cutOnce(t)
	slow := newUpstream(t, sim.Config{Tokens: 60, Text: longText, FirstToken: caddy.Duration(10 * time.Second)})
	p := startProxy(t, provider("cut", cut, "priority 1", "api anthropic")+provider("slow", slow, "priority 2", "api anthropic")+"hedge off\n")
	if _, err := streamAnthropic(ctxTimeout(t, time.Second), anthropicClient(p, "k"), anthropicParams("claude-test")); err == nil {
		t.Fatal("a client that left got a clean end")
	}
	streamWait(t, 5*time.Second, "the continuation to be cancelled", func() bool {
		recs := slow.Requests()
		return len(recs) == 1 && recs[0].Canceled
	})
	line, _ := resumeLine(t, p)
	if line["outcome"] != "client_abort" {
		t.Fatalf("log outcome %v, want client_abort", line["outcome"])
	}
}
