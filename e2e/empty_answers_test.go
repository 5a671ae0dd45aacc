package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3/responses"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// A Responses stream that ends in response.incomplete before any output is
// the model's answer (a content filter; max_output_tokens spent on hidden
// reasoning, as an o4-mini stream with a small limit does), as the
// non-stream body with status incomplete already is: the client gets it
// whole, the next provider is never asked (it would bill the prompt
// again), and the provider is not cooled down. A response.completed with
// no output stays a fake 200 that fails over.
func TestResponsesIncompleteBeforeOutputIsDelivered(t *testing.T) {
	created := `{"type":"response.created","sequence_number":0,"response":{"id":"resp_i","object":"response","created_at":1,"status":"in_progress","model":"gpt-x","output":[]}}`
	ended := func(typ, status, details string) string {
		return `{"type":"` + typ + `","sequence_number":1,"response":{"id":"resp_i","object":"response","created_at":1,"status":"` + status + `",` + details +
			`"model":"gpt-x","output":[],"usage":{"input_tokens":7,"input_tokens_details":{"cached_tokens":0},"output_tokens":16,"output_tokens_details":{"reasoning_tokens":16},"total_tokens":23}}}`
	}
	cases := []struct {
		name, last string
		delivered  bool
		reason     string
	}{
		{name: "content_filter", last: ended("response.incomplete", "incomplete", `"incomplete_details":{"reason":"content_filter"},`), delivered: true, reason: "content_filter"},
		{name: "max_output_tokens", last: ended("response.incomplete", "incomplete", `"incomplete_details":{"reason":"max_output_tokens"},`), delivered: true, reason: "max_output_tokens"},
		{name: "completed with nothing", last: ended("response.completed", "completed", "")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int64
			var events []string
			for _, ev := range []string{created, tc.last} {
				typ := ev[len(`{"type":"`):strings.Index(ev, `","`)]
				events = append(events, "event: "+typ+"\ndata: "+ev)
			}
			first := cannedUpstream(t, &calls, "", events...)
			backup := newUpstream(t, sim.Config{})
			p := startProxy(t, fmt.Sprintf("\t\tprovider first %s {\n\t\t\tapi openai\n\t\t\tkey sk-first\n\t\t}\n", first)+
				provider("backup", backup, "api openai", "key sk-backup", "priority 1")+
				"\t\thedge {\n\t\t\toff\n\t\t}\n\t\tretry {\n\t\t\tsame_provider 0\n\t\t}\n\t\tcooldown {\n\t\t\tfailures 1\n\t\t}\n")
			c := openaiClient(p, "sk-client")
			const asks = 2
			for i := range asks {
				ctx := ctxTimeout(t, 10*time.Second)
				stream := c.Responses.NewStreaming(ctx, responsesParams("gpt-x"))
				var incomplete *responses.Response
				var types []string
				for stream.Next() {
					ev := stream.Current()
					types = append(types, ev.Type)
					if ev.Type == "response.incomplete" {
						r := ev.AsResponseIncomplete().Response
						incomplete = &r
					}
				}
				err := stream.Err()
				stream.Close()
				if err != nil {
					t.Fatalf("ask %d: %v", i, err)
				}
				if !tc.delivered {
					if incomplete != nil || len(types) == 0 || types[len(types)-1] != "response.completed" {
						t.Errorf("ask %d: events %v, want the backup's answer", i, types)
					}
					continue
				}
				if incomplete == nil || string(incomplete.IncompleteDetails.Reason) != tc.reason || incomplete.Usage.OutputTokens != 16 {
					t.Fatalf("ask %d: events %v, want response.incomplete for %s with its usage", i, types, tc.reason)
				}
				if len(types) != 2 || types[0] != "response.created" {
					t.Errorf("ask %d: events %v, want response.created then response.incomplete", i, types)
				}
			}
			switch n := responsesCalls(backup); {
			case tc.delivered && n != 0:
				t.Errorf("an incomplete answer failed over: the backup was asked %d times", n)
			case !tc.delivered && n != asks:
				t.Errorf("a completed stream with no output reached the backup %d times, want %d", n, asks)
			}
			// Delivered answers leave the provider healthy, so it serves
			// every ask; an empty completed stream cools it down (failures 1).
			if n, want := calls.Load(), map[bool]int64{true: asks, false: 1}[tc.delivered]; n != want {
				t.Errorf("the first provider was asked %d times, want %d", n, want)
			}
		})
	}
}

// The same answer reached by translation: an Anthropic provider refusing
// with no content (stop_reason refusal), serving a Responses client, gives
// it response.incomplete for content_filter, and the backup is never asked.
func TestTranslatedRefusalToResponsesIsDelivered(t *testing.T) {
	refusal := []string{
		"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_r\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-x\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":7,\"output_tokens\":1}}}",
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"refusal\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":1}}",
		"event: message_stop\ndata: {\"type\":\"message_stop\"}",
	}
	var calls atomic.Int64
	refusing := cannedUpstream(t, &calls, "", refusal...)
	backup := newUpstream(t, sim.Config{})
	p := startProxy(t, fmt.Sprintf("\t\tprovider refusing %s {\n\t\t\tapi anthropic\n\t\t\tkey sk-target\n\t\t\ttranslate responses\n\t\t}\n", refusing)+
		provider("backup", backup, "api openai", "key sk-backup", "priority 1")+
		"\t\thedge {\n\t\t\toff\n\t\t}\n\t\tretry {\n\t\t\tsame_provider 0\n\t\t}\n")
	ctx := ctxTimeout(t, 10*time.Second)
	stream := openaiClient(p, "sk-client").Responses.NewStreaming(ctx, responsesParams("gpt-x"))
	var reason string
	var types []string
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		if ev.Type == "response.incomplete" {
			reason = string(ev.AsResponseIncomplete().Response.IncompleteDetails.Reason)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	stream.Close()
	if reason != "content_filter" {
		t.Errorf("events %v, want response.incomplete for content_filter", types)
	}
	if n := responsesCalls(backup); n != 0 {
		t.Errorf("the refusal failed over: the backup was asked %d times", n)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the refusing provider was asked %d times, want 1", n)
	}
}

// An Anthropic answer that reached a limit before any content (max_tokens,
// the context window) is the model's answer, native or translated (Chat
// finish_reason length, Gemini MAX_TOKENS, Responses incomplete for
// max_output_tokens, each with no content): delivered with its stop_reason,
// streamed or not, and the backup is never asked (it would reach the same
// limit, billing the prompt again). An end_turn with nothing still fails
// over.
func TestAnthropicLimitBeforeContentIsDelivered(t *testing.T) {
	anthropicAnswer := func(stop string) (stream []string, body string) {
		return []string{
				"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_l\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-x\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":7,\"output_tokens\":0}}}",
				"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"" + stop + "\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":0}}",
				"event: message_stop\ndata: {\"type\":\"message_stop\"}",
			},
			`{"id":"msg_l","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":"` + stop + `","stop_sequence":null,"usage":{"input_tokens":7,"output_tokens":0}}`
	}
	chatLength := []string{
		`data: {"id":"chatcmpl-l","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
		`data: {"id":"chatcmpl-l","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":{},"finish_reason":"length"}]}`,
		`data: {"id":"chatcmpl-l","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":0,"total_tokens":7}}`,
		`data: [DONE]`,
	}
	chatLengthBody := `{"id":"chatcmpl-l","object":"chat.completion","created":1,"model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant","content":""},"finish_reason":"length"}],"usage":{"prompt_tokens":7,"completion_tokens":0,"total_tokens":7}}`
	type answer struct {
		api, stop string
		stream    []string
		body      string
		delivered bool
	}
	var cases []answer
	for _, stop := range []string{"max_tokens", "model_context_window_exceeded", "end_turn"} {
		st, body := anthropicAnswer(stop)
		cases = append(cases, answer{api: "anthropic", stop: stop, stream: st, body: body, delivered: stop != "end_turn"})
	}
	geminiMax := `{"candidates":[{"content":{"role":"model"},"finishReason":"MAX_TOKENS","index":0}],"usageMetadata":{"promptTokenCount":7,"totalTokenCount":7},"modelVersion":"gemini-x"}`
	respMax := `{"id":"resp_l","object":"response","created_at":1,"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"model":"gpt-x","output":[],"usage":{"input_tokens":7,"output_tokens":1,"total_tokens":8}}`
	cases = append(cases,
		answer{api: "openai", stop: "max_tokens", stream: chatLength, body: chatLengthBody, delivered: true},
		answer{api: "gemini", stop: "max_tokens", stream: []string{"data: " + geminiMax}, body: geminiMax, delivered: true},
		answer{api: "responses", stop: "max_tokens", stream: []string{
			`event: response.created` + "\n" + `data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_l","object":"response","created_at":1,"status":"in_progress","model":"gpt-x","output":[]}}`,
			"event: response.incomplete\ndata: " + `{"type":"response.incomplete","sequence_number":1,"response":` + respMax + `}`,
		}, body: respMax, delivered: true})
	for _, tc := range cases {
		t.Run(tc.api+"/"+tc.stop, func(t *testing.T) {
			var calls atomic.Int64
			first := cannedUpstream(t, &calls, tc.body, tc.stream...)
			backup := newUpstream(t, sim.Config{})
			translate := ""
			if tc.api != "anthropic" {
				translate = "\t\t\ttranslate anthropic\n"
			}
			p := startProxy(t, fmt.Sprintf("\t\tprovider first %s {\n\t\t\tapi %s\n\t\t\tkey sk-first\n%s\t\t}\n", first, tc.api, translate)+
				provider("backup", backup, "api anthropic", "key sk-backup", "priority 1")+
				"\t\thedge {\n\t\t\toff\n\t\t}\n\t\tretry {\n\t\t\tsame_provider 0\n\t\t}\n\t\tcooldown {\n\t\t\tfailures 5\n\t\t}\n")
			c := anthropicClient(p, "sk-client")
			for _, stream := range []bool{false, true} {
				params := anthropic.MessageNewParams{
					Model: "claude-sonnet-4-5", MaxTokens: 64,
					Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("a prompt"))},
				}
				var hdr http.Header
				msg := xlSend(t, c, params, stream, &hdr)
				switch {
				case tc.delivered && (string(msg.StopReason) != tc.stop || len(msg.Content) != 0):
					t.Errorf("stream=%v: stop_reason %q content %s, want %s with no content", stream, msg.StopReason, msg.RawJSON(), tc.stop)
				case !tc.delivered && len(msg.Content) == 0:
					t.Errorf("stream=%v: %s, want the backup's answer", stream, msg.RawJSON())
				}
			}
			if n, want := completions(backup), map[bool]int{true: 0, false: 2}[tc.delivered]; n != want {
				t.Errorf("the backup was asked %d times, want %d", n, want)
			}
			if n := calls.Load(); n != 2 {
				t.Errorf("the first provider was asked %d times, want 2 (once per request)", n)
			}
		})
	}
}

// cannedUpstream answers every request the same way, counting them: body
// (JSON) to a non-stream request, and to a streaming one (a "stream":true
// body, or Gemini's streamGenerateContent) the SSE events, each written
// as given and ended by a blank line.
func cannedUpstream(t *testing.T, calls *atomic.Int64, body string, events ...string) string {
	t.Helper()
	_, url := newPathsUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		calls.Add(1)
		b, _ := io.ReadAll(req.Body)
		if body != "" && !strings.Contains(req.URL.Path, "streamGenerateContent") && !strings.Contains(string(b), `"stream":true`) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, body)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range events {
			fmt.Fprintf(w, "%s\n\n", ev)
		}
	}))
	return url
}

// A provider that answers (response.created, response.in_progress) and then
// writes nothing until first_byte passes is failed over as before, but its
// error says what an operator needs to tell a hung provider from a model
// that reasons silently before its first output: in the admin view's
// last_error and the breaker's log line.
func TestFirstByteTimeoutAfterPreludeSaysSo(t *testing.T) {
	_, silent := newPathsUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		io.Copy(io.Discard, req.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_s\",\"object\":\"response\",\"status\":\"in_progress\",\"model\":\"gpt-x\",\"output\":[]}}\n\n"+
			"event: response.in_progress\ndata: {\"type\":\"response.in_progress\",\"sequence_number\":1,\"response\":{\"id\":\"resp_s\",\"object\":\"response\",\"status\":\"in_progress\",\"model\":\"gpt-x\",\"output\":[]}}\n\n")
		w.(http.Flusher).Flush()
		<-req.Context().Done()
	}))
	backup := newUpstream(t, sim.Config{})
	p := startProxy(t, fmt.Sprintf("\t\tprovider silent %s {\n\t\t\tapi openai\n\t\t\tkey sk-s\n\t\t\tfirst_byte_timeout 300ms\n\t\t}\n", silent)+
		provider("backup", backup, "api openai", "key sk-backup", "priority 1")+
		"\t\thedge {\n\t\t\toff\n\t\t}\n\t\tretry {\n\t\t\tsame_provider 0\n\t\t}\n\t\tcooldown {\n\t\t\tfailures 1\n\t\t}\n")
	got := streamResponses(ctxTimeout(t, 10*time.Second), openaiClient(p, "sk-client"), responsesParams("gpt-x"))
	if got.err != nil || got.completed == nil {
		t.Fatalf("stream: %+v, want the backup's answer", got)
	}
	observeRequestLines(t, p.LogFile, 1)
	_, _, admin := healthAdmin(t, p, http.MethodGet, "/llm_hedge/providers")
	logs, _ := os.ReadFile(p.LogFile)
	const want = "no output within 300ms, after 2 events without any: the provider was answering"
	for where, s := range map[string]string{"the admin view": admin, "the log": string(logs)} {
		if !strings.Contains(s, want) {
			t.Errorf("%s does not say %q:\n%s", where, want, s)
		}
	}
}
