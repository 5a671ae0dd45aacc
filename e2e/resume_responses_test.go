package e2e

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// A Responses stream with store false, cut after 40 deltas, is finished by
// replay-match on a provider that gives the same answer: the openai-go
// client reads the whole text, one response id from response.created to
// response.completed, and the usage of the whole answer. With store true
// (the default), with continuation off, or when the other provider's answer
// differs, the client gets the error after the text it had.
func TestResumeReplayResponses(t *testing.T) {
	cases := []struct {
		name      string
		store     bool
		block     string
		otherText string // the other provider's answer, when not the same
		resumed   bool
	}{
		{name: "store false", resumed: true},
		{name: "store true", store: true},
		{name: "resume off", block: "stream {\n resume off\n }\n"},
		{name: "diverged", otherText: "something else entirely"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cut := newUpstream(t, sim.Config{Tokens: 60, Text: longText, Faults: []sim.Fault{{Kind: sim.FaultCut, After: 40}}})
			otherText := longText
			if tc.otherText != "" {
				otherText = tc.otherText
			}
			other := newUpstream(t, sim.Config{Tokens: 60, Text: otherText})
			p := startProxy(t, provider("cut", cut, "priority 1")+provider("other", other, "priority 2", "prefill off")+tc.block)
			params := responsesParams("gpt-test")
			if !tc.store {
				params.Store = openai.Bool(false)
			}
			got := streamResponses(ctxTimeout(t, 10*time.Second), openaiClient(p, "k"), params)
			if !tc.resumed {
				if got.err == nil || got.completed != nil {
					t.Fatalf("stream finished cleanly without a continuation: %q", got.text)
				}
				if !strings.HasPrefix(longText, got.text) || got.text == longText {
					t.Fatalf("client text %q is not a strict prefix of the answer", got.text)
				}
				if n, want := responsesCalls(other), len(tc.otherText); (n == 0) != (want == 0) {
					t.Fatalf("other saw %d Responses requests; a continuation expected: %v", n, want != 0)
				}
				return
			}
			if got.err != nil || got.completed == nil {
				t.Fatalf("continued stream: err %v, completed %v (text so far %q)", got.err, got.completed != nil, got.text)
			}
			if got.text != longText {
				t.Fatalf("text = %q\nwant %q", got.text, longText)
			}
			c := got.completed
			if c.ID != got.id || got.id == "" {
				t.Errorf("completed id %q, created id %q: want the same", c.ID, got.id)
			}
			if c.Status != "completed" || c.OutputText() != longText || len(c.Output) != 1 {
				t.Errorf("completed response: status %q, %d output items, text %q", c.Status, len(c.Output), c.OutputText())
			}
			if c.Usage.OutputTokens != 60 || c.Usage.InputTokens <= 0 || c.Usage.TotalTokens != c.Usage.InputTokens+60 {
				t.Errorf("usage = %+v, want 60 output tokens and the input's", c.Usage)
			}
			if n := responsesCalls(other); n != 1 {
				t.Errorf("other saw %d Responses requests, want 1", n)
			}
		})
	}
}

// On the wire, the continued stream is one response: one response.created
// and one response.completed, every delta in the client's item, and
// sequence numbers that go on one by one across the splice.
func TestResumeResponsesWire(t *testing.T) {
	cut := newUpstream(t, sim.Config{Tokens: 60, Text: longText, Faults: []sim.Fault{{Kind: sim.FaultCut, After: 40, Count: 1}}})
	other := newUpstream(t, sim.Config{Tokens: 60, Text: longText})
	p := startProxy(t, provider("cut", cut, "priority 1")+provider("other", other, "priority 2", "prefill off"))
	req, _ := http.NewRequestWithContext(ctxTimeout(t, 10*time.Second), http.MethodPost, p.URL+"/v1/responses",
		strings.NewReader(`{"model":"gpt-test","input":"hello","stream":true,"store":false}`))
	req.Header.Set("Authorization", "Bearer k")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	type event struct {
		Type     string `json:"type"`
		Seq      *int64 `json:"sequence_number"`
		ItemID   string `json:"item_id"`
		Delta    string `json:"delta"`
		Response *struct {
			ID string `json:"id"`
		} `json:"response"`
	}
	counts := map[string]int{}
	var ids, items []string
	var text strings.Builder
	next := int64(0)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev event
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		counts[ev.Type]++
		if ev.Seq == nil || *ev.Seq != next {
			t.Fatalf("%s: sequence_number %v, want %d", ev.Type, ev.Seq, next)
		}
		next++
		if ev.Response != nil {
			ids = append(ids, ev.Response.ID)
		}
		if ev.Type == "response.output_text.delta" {
			items = append(items, ev.ItemID)
			text.WriteString(ev.Delta)
		}
	}
	if counts["response.created"] != 1 || counts["response.completed"] != 1 || counts["error"] != 0 ||
		counts["response.output_item.added"] != 1 || counts["response.output_item.done"] != 1 {
		t.Fatalf("events = %v", counts)
	}
	for _, id := range ids[1:] {
		if id != ids[0] {
			t.Fatalf("response ids %v, want one", ids)
		}
	}
	for _, id := range items[1:] {
		if id != items[0] {
			t.Fatalf("delta item ids differ: %q and %q", items[0], id)
		}
	}
	if text.String() != longText {
		t.Fatalf("text = %q", text.String())
	}
}

// Codex (store false, its own retries off) through a stream cut after
// three deltas: a provider with the same answer finishes it and Codex
// prints the whole answer; when the other provider's answer differs (and
// the first cuts again) Codex reports the error and never prints the
// truncated text.
func TestResumeCodex(t *testing.T) {
	cases := []struct {
		name, otherText string
		resumed         bool
	}{
		{name: "same answer", otherText: codexPrimaryText, resumed: true},
		{name: "other answer", otherText: codexSecondaryText},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			primary := newUpstream(t, sim.Config{Text: codexPrimaryText, Faults: []sim.Fault{{Kind: sim.FaultCut, After: 3}}})
			secondary := newUpstream(t, sim.Config{Text: tc.otherText})
			p := startProxy(t, provider("primary", primary, "priority 0")+provider("secondary", secondary, "priority 1", "prefill off")+
				"hedge off\n retry {\n same_provider 0\n }\n cooldown {\n failures 100\n }\n")

			last, res := runCodex(t, p)
			ups := map[string]*upstream{"primary": primary, "secondary": secondary}
			if tc.resumed {
				checkCodexAnswer(t, last, res, codexPrimaryText)
				checkCodexAttempts(t, ups, res, "primary stream", "secondary stream")
				return
			}
			if res.Exit == 0 {
				t.Fatalf("the continuation diverged, yet codex exited 0 with %q\n%s", last, res)
			}
			prefix := strings.Join(strings.Fields(codexPrimaryText)[:3], " ")
			if strings.Contains(res.Stdout, prefix) || strings.Contains(last, prefix) {
				t.Fatalf("codex printed the truncated answer (last message %q)\n%s", last, res)
			}
			checkCodexAttempts(t, ups, res, "primary stream", "secondary stream", "primary stream")
		})
	}
}

// A fallback that accepts an assistant prefill (prefill on) continues the
// cut stream from the delivered text: the client reads the whole text in
// its own response, and the fallback saw the text as the input's last,
// assistant, message.
func TestResumePrefillResponses(t *testing.T) {
	cut := newUpstream(t, sim.Config{Tokens: 60, Text: longText, Faults: []sim.Fault{{Kind: sim.FaultCut, After: 40}}})
	other := newUpstream(t, sim.Config{Tokens: 60, Text: longText})
	p := startProxy(t, provider("cut", cut, "priority 1")+provider("other", other, "priority 2", "prefill on")+"hedge off\n")
	params := responsesParams("gpt-test")
	params.Store = openai.Bool(false)
	got := streamResponses(ctxTimeout(t, 10*time.Second), openaiClient(p, "k"), params)
	if got.err != nil || got.completed == nil || got.text != longText {
		t.Fatalf("continued stream: err %v, completed %v, text %q", got.err, got.completed != nil, got.text)
	}
	if got.completed.ID != got.id || got.completed.OutputText() != longText {
		t.Errorf("completed response %q with text %q, want %q with the whole text", got.completed.ID, got.completed.OutputText(), got.id)
	}
	recs := other.Requests()
	if len(recs) != 1 || !recs[0].Prefilled || !strings.HasPrefix(longText, recs[0].Prefill) || len(recs[0].Prefill) < 100 {
		t.Fatalf("the fallback saw %+v, want one request with the delivered text as its prefill", recs)
	}
	if u := got.completed.Usage; u.OutputTokens < 60 || u.TotalTokens != u.InputTokens+u.OutputTokens {
		t.Errorf("usage %+v: want at least the 60 tokens of the answer", u)
	}
	_, resumes := resumeLine(t, p)
	if len(resumes) != 1 || resumes[0]["strategy"] != "prefill" || resumes[0]["outcome"] != "completed" {
		t.Fatalf("resume entries %v, want one completed prefill", resumes)
	}
}
