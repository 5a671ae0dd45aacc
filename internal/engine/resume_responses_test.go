package engine

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/responses"

	dresponses "github.com/llmhedge/caddy-llm-hedge/internal/dialect/responses"
	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// Events of a Responses stream, shaped as OpenAI sends them (seq is the
// sequence_number).
func rsEvent(data string) string {
	typ, _ := jsonscan.Lookup([]byte(data), "type")
	return "event: " + wire.JSONStringValue(typ) + "\ndata: " + data + "\n\n"
}

const (
	rsCreated    = `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","created_at":1700000000,"status":"in_progress","completed_at":null,"error":null,"incomplete_details":null,"model":"gpt-test","output":[],"store":false,"usage":null,"metadata":{}}}`
	rsInProgress = `{"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_1","object":"response","created_at":1700000000,"status":"in_progress","model":"gpt-test","output":[]}}`
	rsMessage    = `{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","content":[],"role":"assistant"}}`
	rsPart       = `{"type":"response.content_part.added","sequence_number":3,"item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""}}`
	rsDelta1     = `{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hello, ","logprobs":[]}`
	rsDelta2     = `{"type":"response.output_text.delta","sequence_number":5,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"w\u00f6rld","logprobs":[]}`
	rsTextDone   = `{"type":"response.output_text.done","sequence_number":6,"item_id":"msg_1","output_index":0,"content_index":0,"text":"Hello, wörld","logprobs":[]}`
	rsPartDone   = `{"type":"response.content_part.done","sequence_number":7,"item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":"Hello, wörld"}}`
	rsReasoning  = `{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]}}`
	rsSummary    = `{"type":"response.reasoning_summary_text.delta","sequence_number":3,"item_id":"rs_1","output_index":0,"summary_index":0,"delta":"Thinking"}`
	rsCall       = `{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_1","name":"get_weather"}}`
	rsCallArgs   = `{"type":"response.function_call_arguments.delta","sequence_number":3,"item_id":"fc_1","output_index":0,"delta":"{\"city\""}`
	rsRefusal    = `{"type":"response.content_part.added","sequence_number":3,"item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"refusal","refusal":""}}`
	rsRefusalD   = `{"type":"response.refusal.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"I can't"}`
	rsMessage2   = `{"type":"response.output_item.added","sequence_number":6,"output_index":1,"item":{"id":"msg_2","type":"message","status":"in_progress","content":[],"role":"assistant"}}`
)

func rsStream(datas ...string) string {
	var b strings.Builder
	for _, d := range datas {
		b.WriteString(rsEvent(d))
	}
	return b.String()
}

// rsTracked is a resumer that followed the stream, as commit and the relay
// feed it.
func rsTracked(t *testing.T, stream string) *dresponses.Resumer {
	t.Helper()
	rs := wire.NewResumer(dialectResponses, &wire.Request{Body: []byte(`{"model":"gpt-test","input":"hi","stream":true,"store":false}`)})
	if rs == nil {
		t.Fatal("no resumer for store false")
	}
	rd := sse.NewReader(strings.NewReader(stream), 1<<20)
	for {
		ev, err := rd.Next()
		if err != nil {
			break
		}
		rs.Track(ev, dialectResponses.Inspect(ev, true, nil))
	}
	return rs.(*dresponses.Resumer)
}

// A stream is continued while the client has one message of output_text;
// any other output makes it ineligible.
func TestResponsesResumerTrack(t *testing.T) {
	head := []string{rsCreated, rsInProgress}
	cases := []struct {
		name     string
		events   []string
		bad      string // part of the reason it is ineligible, "" if it is not
		text     string
		finished bool
	}{
		{name: "text", events: []string{rsMessage, rsPart, rsDelta1, rsDelta2}, text: "Hello, wörld"},
		{name: "text done", events: []string{rsMessage, rsPart, rsDelta1, rsDelta2, rsTextDone}, text: "Hello, wörld", finished: true},
		{name: "part done", events: []string{rsMessage, rsPart, rsDelta1, rsDelta2, rsTextDone, rsPartDone}, text: "Hello, wörld", finished: true},
		{name: "reasoning item", events: []string{rsReasoning, rsSummary}, bad: "not a message (reasoning)"},
		{name: "reasoning then message", events: []string{rsReasoning, strings.Replace(rsMessage, `"output_index":0`, `"output_index":1`, 1)}, bad: "reasoning"},
		{name: "function call", events: []string{rsCall, rsCallArgs}, bad: "function_call"},
		{name: "refusal part", events: []string{rsMessage, rsRefusal, rsRefusalD}, bad: "refusal"},
		{name: "refusal delta", events: []string{rsMessage, rsPart, rsDelta1, rsRefusalD}, bad: "response.refusal.delta"},
		{name: "second item", events: []string{rsMessage, rsPart, rsDelta1, rsDelta2, rsMessage2}, bad: "a second output item"},
		{name: "no part", events: []string{rsMessage}, bad: "no output_text part"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rs := rsTracked(t, rsStream(append(head, tc.events...)...))
			why := rs.Ineligible()
			if tc.bad == "" {
				if why != "" {
					t.Fatalf("ineligible: %s", why)
				}
				if rs.Text() != tc.text || rs.Finished() != tc.finished {
					t.Fatalf("text %q finished %v, want %q %v", rs.Text(), rs.Finished(), tc.text, tc.finished)
				}
				return
			}
			if !strings.Contains(why, tc.bad) {
				t.Fatalf("ineligible() = %q, want it to say %q", why, tc.bad)
			}
		})
	}
}

// A stream whose response.created the resumer cannot read cannot be ended
// in the client's response: it is not continued.
func TestResponsesResumerNoCreated(t *testing.T) {
	broken := strings.Replace(rsCreated, `"model":"gpt-test"`, `"model":gpt-test`, 1)
	for _, head := range []string{broken, rsInProgress} {
		rs := rsTracked(t, rsStream(head, rsMessage, rsPart, rsDelta1))
		if why := rs.Ineligible(); why != "no response.created" {
			t.Errorf("ineligible() = %q, want no response.created", why)
		}
	}
}

// Only a response the provider does not store is continued.
func TestResponsesResumerStore(t *testing.T) {
	for body, want := range map[string]bool{
		`{"input":"hi"}`:                              false,
		`{"input":"hi","store":true}`:                 false,
		`{"input":"hi","store":false}`:                true,
		`{"input":"hi","store":false,"store":true}`:   false,
		`{"input":"hi","store":true,"store":false}`:   true,
		`{"input":"hi","metadata":{"store":false}}`:   false,
		`{"input":"hi","store":null}`:                 false,
		`{"input":"hi","stream":true,"store":false} `: true,
	} {
		if got := wire.NewResumer(dialectResponses, &wire.Request{Body: []byte(body)}) != nil; got != want {
			t.Errorf("%s: resumer %v, want %v", body, got, want)
		}
	}
}

func TestResponsesResumerPrefill(t *testing.T) {
	cases := []struct{ name, body, want string }{
		{"string input", `{"model":"m","input":"hi","store":false}`,
			`{"model":"m","input":[{"role":"user","content":"hi"},{"role":"assistant","content":"Hello"}],"store":false}`},
		{"user last", `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]}]}`,
			`{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]},{"role":"assistant","content":"Hello"}]}`},
		{"assistant string last", `{"model":"m","input":[{"role":"user","content":"hi"},{"type":"message","role":"assistant","content":"Sure: "}]}`,
			`{"model":"m","input":[{"role":"user","content":"hi"},{"type":"message","role":"assistant","content":"Sure: Hello"}]}`},
		{"assistant parts last", `{"model":"m","input":[{"role":"assistant","content":[{"type":"output_text","text":"x"}]}]}`,
			`{"model":"m","input":[{"role":"assistant","content":[{"type":"output_text","text":"x"}]},{"role":"assistant","content":"Hello"}]}`},
		{"function output last", `{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":"42"}]}`,
			`{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":"42"},{"role":"assistant","content":"Hello"}]}`},
	}
	rs := &dresponses.Resumer{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := rs.Prefill([]byte(tc.body), "Hello")
			if err != nil {
				t.Fatal(err)
			}
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatal(err)
			}
			_ = json.Unmarshal([]byte(tc.want), &w)
			if !reflect.DeepEqual(g, w) {
				t.Fatalf("prefill = %s\nwant      %s", got, tc.want)
			}
		})
	}
	if _, err := rs.Prefill([]byte(`{"model":"m"}`), "Hello"); err == nil {
		t.Error("a body without input was extended")
	}
}

func TestResponsesResumerRead(t *testing.T) {
	cases := []struct {
		data   string
		kind   wire.ContKind
		text   string
		finish string
	}{
		{rsCreated, wire.ContSkip, "", ""},
		{rsInProgress, wire.ContSkip, "", ""},
		{rsMessage, wire.ContSkip, "", ""},
		{rsPart, wire.ContSkip, "", ""},
		{rsDelta2, wire.ContText, "wörld", ""},
		{rsTextDone, wire.ContSkip, "", ""},
		{rsPartDone, wire.ContSkip, "", ""},
		{`{"type":"response.output_item.done","sequence_number":8,"output_index":0,"item":{"id":"msg_1","type":"message","status":"completed","content":[],"role":"assistant"}}`, wire.ContSkip, "", ""},
		{rsReasoning, wire.ContOther, "", ""},
		{rsSummary, wire.ContOther, "", ""},
		{rsCall, wire.ContOther, "", ""},
		{rsCallArgs, wire.ContOther, "", ""},
		{rsRefusal, wire.ContOther, "", ""},
		{rsRefusalD, wire.ContOther, "", ""},
		{`{"type":"response.completed","sequence_number":9,"response":{"id":"resp_2","status":"completed"}}`, wire.ContTerminal, "", "completed"},
		{`{"type":"response.incomplete","sequence_number":9,"response":{"id":"resp_2","status":"incomplete","incomplete_details":{"reason":"content_filter"}}}`, wire.ContTerminal, "", "incomplete"},
		{`{"type":"response.failed","sequence_number":9,"response":{"id":"resp_2","status":"failed","error":{"code":"server_error","message":"boom"}}}`, wire.ContError, "", ""},
		{`{"type":"error","sequence_number":9,"code":"server_error","message":"boom"}`, wire.ContError, "", ""},
	}
	for _, tc := range cases {
		rs := &dresponses.Resumer{}
		rd := sse.NewReader(strings.NewReader(rsEvent(tc.data)), 1<<20)
		ev, err := rd.Next()
		if err != nil {
			t.Fatal(err)
		}
		c := rs.Read(ev, dialectResponses.Inspect(ev, true, nil))
		if c.Kind != tc.kind || c.Text != tc.text || c.Finish != tc.finish {
			t.Errorf("%s: read = %+v, want kind %d text %q finish %q", tc.data, c, tc.kind, tc.text, tc.finish)
		}
		if tc.finish == "incomplete" && string(rs.IncompleteReason) != `"content_filter"` {
			t.Errorf("incomplete reason %s, want content_filter", rs.IncompleteReason)
		}
	}
}

// rsClientStream is what a client of the spliced stream reads, checked
// event by event: every event decodes as openai-go's stream event, the
// sequence numbers go on one by one, and openai-go's accumulator takes
// them all; it returns the accumulated response.
func rsClientStream(t *testing.T, stream string) (*responses.Response, string) {
	t.Helper()
	var acc responses.ResponseAccumulator
	rd := sse.NewReader(strings.NewReader(stream), 1<<20)
	next := int64(0)
	for {
		ev, err := rd.Next()
		if err != nil {
			break
		}
		var se responses.ResponseStreamEventUnion
		if err := json.Unmarshal(ev.Data, &se); err != nil {
			t.Fatalf("event %s: %v", ev.Data, err)
		}
		if string(ev.Name) != se.Type {
			t.Fatalf("event name %q, type %q", ev.Name, se.Type)
		}
		if se.SequenceNumber != next {
			t.Fatalf("%s: sequence_number %d, want %d", se.Type, se.SequenceNumber, next)
		}
		next++
		var server responses.ResponsesServerEventUnion
		if err := json.Unmarshal(ev.Data, &server); err != nil {
			t.Fatalf("event %s: %v", ev.Data, err)
		}
		if err := acc.AddEvent(server); err != nil {
			t.Fatalf("accumulating %s: %v", ev.Data, err)
		}
	}
	resp, err := acc.ReconstructedResponse()
	if err != nil {
		t.Fatalf("accumulated response: %v", err)
	}
	return resp, acc.Snapshot().OutputText()
}

// writeText and writeEnd go on in the client's item, part and sequence,
// and end with the client's own response, completed (or incomplete).
func TestResponsesResumerWrite(t *testing.T) {
	cases := []struct {
		name      string
		delivered []string
		more      []string
		end       wire.ContEnd
		reason    string // of the continuation's response.incomplete
		status    string
		text      string
		usage     bool
	}{
		{name: "completed", delivered: []string{rsMessage, rsPart, rsDelta1}, more: []string{"w\u00f6rld", "! <&>\n"},
			end: wire.ContEnd{Finish: "completed", Input: 12, Output: 60}, status: "completed", text: "Hello, wörld! <&>\n", usage: true},
		{name: "incomplete", delivered: []string{rsMessage, rsPart, rsDelta1}, more: []string{"wör"},
			end: wire.ContEnd{Finish: "incomplete", Input: 12, Output: 60}, reason: `"max_output_tokens"`, status: "incomplete", text: "Hello, wör", usage: true},
		{name: "text done", delivered: []string{rsMessage, rsPart, rsDelta1, rsDelta2, rsTextDone, rsPartDone},
			status: "completed", text: "Hello, wörld"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			delivered := rsStream(append([]string{rsCreated, rsInProgress}, tc.delivered...)...)
			rs := rsTracked(t, delivered)
			if why := rs.Ineligible(); why != "" {
				t.Fatalf("ineligible: %s", why)
			}
			rs.IncompleteReason = []byte(tc.reason)
			if tc.reason == "" {
				rs.IncompleteReason = nil
			}
			var out bytes.Buffer
			for _, s := range tc.more {
				if err := rs.WriteText(&out, s); err != nil {
					t.Fatal(err)
				}
			}
			if err := rs.WriteEnd(&out, tc.end); err != nil {
				t.Fatal(err)
			}
			resp, text := rsClientStream(t, delivered+out.String())
			if text != tc.text || resp.OutputText() != tc.text {
				t.Fatalf("accumulated text %q, response text %q, want %q", text, resp.OutputText(), tc.text)
			}
			if resp.ID != "resp_1" || resp.Model != "gpt-test" || resp.CreatedAt != 1700000000 || string(resp.Status) != tc.status {
				t.Fatalf("response id %q model %q created_at %v status %q", resp.ID, resp.Model, resp.CreatedAt, resp.Status)
			}
			if len(resp.Output) != 1 || resp.Output[0].ID != "msg_1" || resp.Output[0].Type != "message" {
				t.Fatalf("output = %+v", resp.Output)
			}
			if tc.status == "incomplete" && resp.IncompleteDetails.Reason != "max_output_tokens" {
				t.Errorf("incomplete_details = %+v", resp.IncompleteDetails)
			}
			u := resp.Usage
			if tc.usage && (u.InputTokens != 12 || u.OutputTokens != 60 || u.TotalTokens != 72) {
				t.Errorf("usage = %+v, want 12 in, 60 out, 72 total", u)
			}
			if !tc.usage && resp.JSON.Usage.Raw() != "null" {
				t.Errorf("usage %s, want null when it is unknown", resp.JSON.Usage.Raw())
			}
			for _, done := range []string{"response.output_text.done", "response.content_part.done", "response.output_item.done"} {
				if n := strings.Count(delivered+out.String(), "event: "+done+"\n"); n != 1 {
					t.Errorf("%s sent %d times, want once", done, n)
				}
			}
		})
	}
}

// Following the client's text deltas allocates nothing per delta.
func TestResponsesResumerTrackAllocs(t *testing.T) {
	rs := rsTracked(t, rsStream(rsCreated, rsInProgress, rsMessage, rsPart))
	rd := sse.NewReader(strings.NewReader(rsEvent(rsDelta1)), 1<<20)
	ev, err := rd.Next()
	if err != nil {
		t.Fatal(err)
	}
	ev = sse.Event{Raw: bytes.Clone(ev.Raw), Name: bytes.Clone(ev.Name), Data: bytes.Clone(ev.Data)}
	info := dialectResponses.Inspect(ev, true, nil)
	if n := testing.AllocsPerRun(1000, func() { rs.Track(ev, info) }); n != 0 {
		t.Errorf("track allocates %v times per delta", n)
	}
	if rs.Seq != 4 || rs.Ineligible() != "" {
		t.Errorf("seq %d, ineligible %q", rs.Seq, rs.Ineligible())
	}
}

// Item 8 (issue 21): a Responses continuation keeps no more text than the
// other dialects: past maxResumeText the text is dropped, the splice ends
// (its end would repeat the whole text) without writing more, and the
// stream can no longer be continued.
func TestResponsesContinuationMemoryBounded(t *testing.T) {
	rs := rsTracked(t, rsStream(rsCreated, rsInProgress, rsMessage, rsPart, rsDelta1))
	sp := wire.ReplaySplicer("")
	var client bytes.Buffer
	run := &spliceRun{d: dialectResponses, rs: rs, sp: &sp, w: &client, flush: func() error { return nil }}
	delta := strings.Repeat("x", 64<<10)
	ev := rsEvent(`{"type":"response.output_text.delta","sequence_number":9,"item_id":"m","output_index":0,"content_index":0,"delta":"` + delta + `","logprobs":[]}`)
	events := parseEvents(t, ev)
	n := 0
	for ; n < 2*wire.MaxResumeText/len(delta); n++ {
		if run.handle(events[0]) {
			break
		}
		if len(rs.Buf) > wire.MaxResumeText {
			t.Fatalf("after %d deltas the resumer holds %d bytes, over %d", n+1, len(rs.Buf), wire.MaxResumeText)
		}
	}
	if run.res.reason != wire.ReasonTextBound || run.res.complete || run.finishing() && run.end(&wire.Usage{Output: 1}) {
		t.Fatalf("after %d deltas the splice %+v, want it ended at the bound", n, run.res)
	}
	if rs.Buf != nil || rs.Ineligible() == "" {
		t.Fatalf("resumer keeps %d bytes, ineligible %q", len(rs.Buf), rs.Ineligible())
	}
	if client.Len() > wire.MaxResumeText+(64<<10)+(1<<20) {
		t.Fatalf("the client got %d bytes past the bound", client.Len())
	}
}
