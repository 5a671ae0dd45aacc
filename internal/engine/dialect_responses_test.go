package engine

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf8"

	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	dresponses "github.com/llmhedge/caddy-llm-hedge/internal/dialect/responses"
	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse/ssetest"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// Responses API events as api.openai.com sends them (field order and
// members as in openai-go's ResponseStreamEventUnion variants).
const (
	rCreated    = `{"type":"response.created","sequence_number":0,"response":{"id":"resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b","object":"response","created_at":1741476542,"status":"in_progress","background":false,"error":null,"incomplete_details":null,"instructions":null,"max_output_tokens":null,"model":"gpt-4.1-2025-04-14","output":[],"parallel_tool_calls":true,"previous_response_id":null,"reasoning":{"effort":null,"summary":null},"store":true,"temperature":1.0,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],"top_p":1.0,"truncation":"disabled","usage":null,"user":null,"metadata":{}}}`
	rInProgress = `{"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b","object":"response","created_at":1741476542,"status":"in_progress","error":null,"model":"gpt-4.1-2025-04-14","output":[],"usage":null}}`
	rItemAdded  = `{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"msg_67ccd2bf17f0819081ff3bb2cf6508e6","type":"message","status":"in_progress","content":[],"role":"assistant"}}`
	rPartAdded  = `{"type":"response.content_part.added","sequence_number":3,"item_id":"msg_67ccd2bf17f0819081ff3bb2cf6508e6","output_index":0,"content_index":0,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""}}`
	rTextDelta  = `{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_67ccd2bf17f0819081ff3bb2cf6508e6","output_index":0,"content_index":0,"delta":"Hi","logprobs":[],"obfuscation":"xK3"}`
	rTextDelta2 = `{"type":"response.output_text.delta","sequence_number":5,"item_id":"msg_67ccd2bf17f0819081ff3bb2cf6508e6","output_index":0,"content_index":0,"delta":" there","logprobs":[],"obfuscation":"q"}`
	rTextDone   = `{"type":"response.output_text.done","sequence_number":6,"item_id":"msg_67ccd2bf17f0819081ff3bb2cf6508e6","output_index":0,"content_index":0,"text":"Hi there","logprobs":[]}`
	rPartDone   = `{"type":"response.content_part.done","sequence_number":7,"item_id":"msg_67ccd2bf17f0819081ff3bb2cf6508e6","output_index":0,"content_index":0,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":"Hi there"}}`
	rItemDone   = `{"type":"response.output_item.done","sequence_number":8,"output_index":0,"item":{"id":"msg_67ccd2bf17f0819081ff3bb2cf6508e6","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"Hi there"}],"role":"assistant"}}`
	rCompleted  = `{"type":"response.completed","sequence_number":9,"response":{"id":"resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b","object":"response","created_at":1741476542,"status":"completed","error":null,"incomplete_details":null,"model":"gpt-4.1-2025-04-14","output":[{"id":"msg_67ccd2bf17f0819081ff3bb2cf6508e6","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"Hi there"}],"role":"assistant"}],"usage":{"input_tokens":37,"input_tokens_details":{"cached_tokens":12},"output_tokens":11,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":48},"user":null,"metadata":{}}}`
	rIncomplete = `{"type":"response.incomplete","sequence_number":9,"response":{"id":"resp_1","object":"response","created_at":1,"status":"incomplete","error":null,"incomplete_details":{"reason":"max_output_tokens"},"model":"o4-mini-2025-04-16","output":[],"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":0},"output_tokens":16,"output_tokens_details":{"reasoning_tokens":16},"total_tokens":26}}}`
	rFailed     = `{"type":"response.failed","sequence_number":2,"response":{"id":"resp_1","object":"response","created_at":1,"status":"failed","error":{"code":"server_error","message":"The model failed to generate a response."},"incomplete_details":null,"model":"gpt-4.1-2025-04-14","output":[],"usage":null}}`
	rError      = `{"type":"error","code":"rate_limit_exceeded","message":"Rate limit reached for gpt-4.1","param":null,"sequence_number":2}`
	rErrorObj   = `{"type":"error","error":{"type":"invalid_request_error","code":"context_length_exceeded","message":"Your input exceeds the context window of this model.","param":"input"},"sequence_number":2}`
	rFnAdded    = `{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"fc_67ca09c6bedc8190a7abfec07b1a1332","type":"function_call","status":"in_progress","arguments":"","call_id":"call_unLAR8MvFNptuiZK6K6HCy5k","name":"get_current_weather"}}`
	rFnDelta    = `{"type":"response.function_call_arguments.delta","sequence_number":3,"item_id":"fc_67ca09c6bedc8190a7abfec07b1a1332","output_index":0,"delta":"{\"location\":","obfuscation":"bS"}`
	rRsAdded    = `{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"rs_6820f383d7c08191846711c5df8233bc","type":"reasoning","summary":[]}}`
	rRsPart     = `{"type":"response.reasoning_summary_part.added","sequence_number":3,"item_id":"rs_6820f383d7c08191846711c5df8233bc","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":""}}`
	rRsDelta    = `{"type":"response.reasoning_summary_text.delta","sequence_number":4,"item_id":"rs_6820f383d7c08191846711c5df8233bc","output_index":0,"summary_index":0,"delta":"**Answering a simple question**","obfuscation":"Wc"}`
	rRsDone     = `{"type":"response.output_item.done","sequence_number":3,"output_index":0,"item":{"id":"rs_6820f383d7c08191846711c5df8233bc","type":"reasoning","summary":[],"encrypted_content":"gAAAAABoIPOE"}}`
	rRefusal    = `{"type":"response.refusal.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"I can't help with that"}`
	rKeepalive  = `{"type":"keepalive","sequence_number":5}`
)

func responsesEvent(data string) string {
	var typ struct{ Type string }
	if err := json.Unmarshal([]byte(data), &typ); err != nil || typ.Type == "" {
		panic("test event without a type: " + data)
	}
	return "event: " + typ.Type + "\ndata: " + data
}

func responsesStream(datas ...string) string {
	events := make([]string, len(datas))
	for i, d := range datas {
		events[i] = responsesEvent(d)
	}
	return sseStream(events...)
}

func TestResponsesEventClass(t *testing.T) {
	tests := []struct {
		name    string
		event   string
		want    wire.EventClass
		by      string
		text    string // raw JSON string taken for the reject check
		errHas  string // in upstreamErrorMessage(errVal, data)
		noError bool   // errVal must be nil (upstreamErrorMessage falls back to the data)
	}{
		{name: "created", event: responsesEvent(rCreated), want: wire.EvPrelude},
		{name: "in_progress", event: responsesEvent(rInProgress), want: wire.EvPrelude},
		{name: "queued", event: responsesEvent(`{"type":"response.queued","sequence_number":0,"response":{"id":"resp_1","status":"queued"}}`), want: wire.EvPrelude},
		{name: "output_item.added", event: responsesEvent(rItemAdded), want: wire.EvPrelude},
		{name: "content_part.added", event: responsesEvent(rPartAdded), want: wire.EvPrelude},
		{name: "reasoning_summary_part.added", event: responsesEvent(rRsPart), want: wire.EvPrelude},
		{name: "keepalive", event: responsesEvent(rKeepalive), want: wire.EvPrelude},
		{name: "comment", event: ": keepalive", want: wire.EvPrelude},
		{name: "empty data", event: "event: response.completed\ndata:", want: wire.EvPrelude},
		{name: "output_text.delta", event: responsesEvent(rTextDelta), want: wire.EvOutput, by: "response.output_text.delta", text: `"Hi"`},
		{name: "output_text.delta unnamed", event: "data: " + rTextDelta, want: wire.EvOutput, by: "response.output_text.delta", text: `"Hi"`},
		{name: "output_text.delta with an escaped type", event: `data: {"type":"response.output_text.delt\u0061","delta":"x"}`, want: wire.EvOutput, by: "response.output_text.delta", text: `"x"`},
		{name: "empty output_text.delta", event: responsesEvent(`{"type":"response.output_text.delta","sequence_number":4,"item_id":"m","output_index":0,"content_index":0,"delta":""}`), want: wire.EvOutput, by: "response.output_text.delta", text: `""`},
		{name: "function_call_arguments.delta", event: responsesEvent(rFnDelta), want: wire.EvOutput, by: "response.function_call_arguments.delta"},
		{name: "reasoning_summary_text.delta", event: responsesEvent(rRsDelta), want: wire.EvOutput, by: "response.reasoning_summary_text.delta"},
		{name: "refusal.delta", event: responsesEvent(rRefusal), want: wire.EvOutput, by: "response.refusal.delta"},
		{name: "shell output delta (object delta)", event: responsesEvent(`{"type":"response.shell_call_output_content.delta","sequence_number":1,"item_id":"sh_123","output_index":0,"command_index":0,"delta":{"stdout":"hello\n","stderr":""}}`), want: wire.EvOutput, by: "response.*.delta"},
		{name: "a future delta", event: responsesEvent(`{"type":"response.new_thing.delta","delta":"x"}`), want: wire.EvOutput, by: "response.*.delta"},
		{name: "image partial", event: responsesEvent(`{"type":"response.image_generation_call.partial_image","sequence_number":3,"item_id":"ig_1","output_index":0,"partial_image_index":0,"partial_image_b64":"iVBORw0KGgo="}`), want: wire.EvOutput, by: "response.image_generation_call.partial_image"},
		{name: "output_item.done", event: responsesEvent(rItemDone), want: wire.EvOutput, by: "response.output_item.done"},
		{name: "reasoning output_item.done", event: responsesEvent(rRsDone), want: wire.EvOutput, by: "response.output_item.done"},
		{name: "output_text.done", event: responsesEvent(rTextDone), want: wire.EvPrelude},
		{name: "delta word in an item id", event: responsesEvent(`{"type":"response.output_item.added","item":{"id":"response.x.delta"}}`), want: wire.EvPrelude},
		{name: "completed", event: responsesEvent(rCompleted), want: wire.EvTerminal},
		{name: "incomplete", event: responsesEvent(rIncomplete), want: wire.EvTerminal, by: "response.incomplete"}, // an answer even before output
		{name: "completed unnamed", event: "data: " + rCompleted, want: wire.EvTerminal},
		{name: "the data's type decides over the name", event: "event: response.output_text.delta\ndata: " + rCompleted, want: wire.EvTerminal},
		{name: "the name stands in for a missing type", event: "event: response.output_text.delta\ndata: {\"delta\":\"x\"}", want: wire.EvOutput, by: "response.output_text.delta", text: `"x"`},
		{name: "error event", event: responsesEvent(rError), want: wire.EvError, errHas: "rate_limit_exceeded: Rate limit reached for gpt-4.1"},
		{name: "error event, error object", event: responsesEvent(rErrorObj), want: wire.EvError, errHas: "invalid_request_error: Your input exceeds"},
		{name: "error type unnamed", event: "data: " + rError, want: wire.EvError, errHas: "Rate limit reached"},
		{name: "error name, garbage data", event: "event: error\ndata: upstream broke", want: wire.EvError, errHas: "upstream broke"},
		{name: "error name, no data", event: "event: error", want: wire.EvError},
		{name: "error key in a delta", event: responsesEvent(`{"type":"response.output_text.delta","delta":"x","error":{"message":"quota"}}`), want: wire.EvError, errHas: "quota"},
		{name: "null error is no error", event: responsesEvent(`{"type":"keepalive","error":null}`), want: wire.EvPrelude},
		{name: "failed", event: responsesEvent(rFailed), want: wire.EvError, errHas: "server_error: The model failed to generate a response."},
		{name: "failed without error", event: responsesEvent(`{"type":"response.failed","response":{"status":"failed","error":null}}`), want: wire.EvError, noError: true},
		{name: "not JSON", event: "event: response.output_text.delta\ndata: <html>502 Bad Gateway</html>", want: wire.EvMalformed},
		{name: "truncated JSON", event: "event: response.output_text.delta\ndata: " + rTextDelta[:40], want: wire.EvMalformed},
		{name: "JSON but not an object", event: "event: response.output_text.delta\ndata: \"Hi\"", want: wire.EvMalformed},
		{name: "trailing garbage", event: "event: response.completed\ndata: " + rCompleted + " x", want: wire.EvMalformed},
		{name: "done marker", event: "data: [DONE]", want: wire.EvMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs := parseEvents(t, sseStream(tt.event))
			if len(evs) != 1 {
				t.Fatalf("%d events", len(evs))
			}
			info := dresponses.InspectResponses(evs[0], true)
			if info.Class != tt.want || info.By != tt.by || string(info.Text) != tt.text {
				t.Errorf("inspectResponses = %v by %q text %s, want %v by %q text %s", info.Class, info.By, info.Text, tt.want, tt.by, tt.text)
			}
			if without := dresponses.InspectResponses(evs[0], false); without.Class != info.Class || without.Text != nil {
				t.Errorf("without text: %v text %s", without.Class, without.Text)
			}
			if info.Class == wire.EvTerminal && !strings.Contains(string(evs[0].Data), `"type":"`+dresponses.TerminalName(evs[0])+`"`) {
				t.Errorf("terminal named %q", dresponses.TerminalName(evs[0]))
			}
			if info.Class != wire.EvError && info.ErrVal != nil {
				t.Errorf("errVal %s on a %v event", info.ErrVal, info.Class)
			}
			if tt.noError && info.ErrVal != nil {
				t.Errorf("errVal %s, want none", info.ErrVal)
			}
			if msg := wire.UpstreamErrorMessage(info.ErrVal, evs[0].Data); !strings.Contains(msg, tt.errHas) {
				t.Errorf("error message %q, want it to contain %q", msg, tt.errHas)
			}
		})
	}
}

// The test events are the shapes the SDK decodes: the union's type is the
// event's type.
func TestResponsesEventShapes(t *testing.T) {
	for _, data := range []string{rCreated, rInProgress, rItemAdded, rPartAdded, rTextDelta, rTextDone, rPartDone, rItemDone, rCompleted,
		rIncomplete, rFailed, rError, rFnAdded, rFnDelta, rRsAdded, rRsPart, rRsDelta, rRsDone, rRefusal} {
		var ev responses.ResponseStreamEventUnion
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("%.60s: %v", data, err)
		}
		var typ struct{ Type string }
		_ = json.Unmarshal([]byte(data), &typ)
		if ev.Type != typ.Type || ev.AsAny() == nil {
			t.Errorf("%.60s: SDK type %q (%T)", data, ev.Type, ev.AsAny())
		}
	}
}

// responsesOutcome is what the first-event gate and the relay learn from
// a stream: each event's class, where the first decisive one is, the usage
// and the response id.
type responsesOutcome struct {
	classes  string // one letter per event
	decided  int    // index of the first event that is not prelude, -1 if none
	class    wire.EventClass
	by, text string
	u        wire.Usage
	id       string
	err      error
}

func responsesRead(r io.Reader) responsesOutcome {
	out := responsesOutcome{decided: -1}
	rd := sse.NewReader(r, 1<<20)
	for i := 0; ; i++ {
		ev, err := rd.Next()
		if err != nil {
			if err != io.EOF {
				out.err = err
			}
			return out
		}
		info := dresponses.InspectResponses(ev, true)
		out.classes += info.Class.String()[:1]
		if out.decided < 0 && info.Class != wire.EvPrelude {
			out.decided, out.class, out.by = i, info.Class, info.By
			out.text = string(jsonscan.AppendString(nil, info.Text))
		}
		dresponses.ObserveResponsesEvent(&out.u, ev)
		if id := dresponses.CreatedID(ev); id != "" && out.id == "" {
			out.id = id
		}
	}
}

// Every stream, cut into two reads at every byte offset and read one byte
// at a time, gives the same classes, gate decision, usage and id as read
// whole, and those are the expected ones.
func TestResponsesGateEverySplit(t *testing.T) {
	const id = "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b"
	full := wire.Usage{Input: 37, Output: 11, CacheRead: 12, Model: "gpt-4.1-2025-04-14"}
	tests := []struct {
		name    string
		stream  string
		classes string
		decided int
		class   wire.EventClass
		by      string
		text    string
		u       wire.Usage
		id      string
	}{
		{
			name:    "text answer",
			stream:  responsesStream(rCreated, rInProgress, rItemAdded, rPartAdded, rTextDelta, rTextDelta2, rTextDone, rPartDone, rItemDone, rCompleted),
			classes: "ppppooppot",
			decided: 4, class: wire.EvOutput, by: "response.output_text.delta", text: "Hi",
			u: full, id: id,
		},
		{
			name:    "text answer, unnamed events, CRLF, a comment",
			stream:  strings.ReplaceAll(sseStream("data: "+rCreated, ": ping", "data: "+rItemAdded, "data: "+rTextDelta, "data: "+rCompleted), "\n", "\r\n"),
			classes: "pppot",
			decided: 3, class: wire.EvOutput, by: "response.output_text.delta", text: "Hi",
			u: full, id: id,
		},
		{
			name:    "tool call",
			stream:  responsesStream(rCreated, rFnAdded, rFnDelta, rCompleted),
			classes: "ppot",
			decided: 2, class: wire.EvOutput, by: "response.function_call_arguments.delta",
			u: full, id: id,
		},
		{
			name:    "reasoning summary first",
			stream:  responsesStream(rCreated, rInProgress, rRsAdded, rRsPart, rRsDelta, rCompleted),
			classes: "ppppot",
			decided: 4, class: wire.EvOutput, by: "response.reasoning_summary_text.delta",
			u: full, id: id,
		},
		{
			name:    "encrypted reasoning, no summary: the item's done commits",
			stream:  responsesStream(rCreated, rRsAdded, rRsDone, rItemAdded, rTextDelta, rCompleted),
			classes: "ppopot",
			decided: 2, class: wire.EvOutput, by: "response.output_item.done",
			u: full, id: id,
		},
		{
			name:    "error event before output",
			stream:  responsesStream(rCreated, rInProgress, rError),
			classes: "ppe",
			decided: 2, class: wire.EvError,
			u: wire.Usage{Model: "gpt-4.1-2025-04-14"}, id: id,
		},
		{
			name:    "failed before output",
			stream:  responsesStream(rCreated, rFailed),
			classes: "pe",
			decided: 1, class: wire.EvError,
			u: wire.Usage{Model: "gpt-4.1-2025-04-14"}, id: id,
		},
		{
			name:    "incomplete before output: an answer, committed",
			stream:  responsesStream(rCreated, rIncomplete),
			classes: "pt",
			decided: 1, class: wire.EvTerminal, by: "response.incomplete",
			u: wire.Usage{Input: 10, Output: 16, Model: "gpt-4.1-2025-04-14"}, id: id,
		},
		{
			name:    "HTML for a first event",
			stream:  "event: response.created\ndata: <html>502</html>\n\n" + responsesStream(rTextDelta),
			classes: "mo",
			decided: 0, class: wire.EvMalformed,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := responsesOutcome{classes: tt.classes, decided: tt.decided, class: tt.class, by: tt.by, text: tt.text, u: tt.u, id: tt.id}
			if got := responsesRead(strings.NewReader(tt.stream)); got != want {
				t.Fatalf("whole stream:\n got %+v\nwant %+v", got, want)
			}
			for cut := 0; cut <= len(tt.stream); cut++ {
				if got := responsesRead(&ssetest.SplitReader{Data: []byte(tt.stream), Cuts: []int{cut}}); got != want {
					t.Fatalf("cut at %d:\n got %+v\nwant %+v", cut, got, want)
				}
			}
			if got := responsesRead(iotest.OneByteReader(strings.NewReader(tt.stream))); got != want {
				t.Fatalf("one byte at a time:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestResponsesUsage(t *testing.T) {
	t.Run("stream", func(t *testing.T) {
		tests := []struct {
			name   string
			stream []string
			want   wire.Usage
		}{
			{
				name:   "completed",
				stream: []string{rCreated, rInProgress, rItemAdded, rTextDelta, rItemDone, rCompleted},
				want:   wire.Usage{Input: 37, Output: 11, CacheRead: 12, Model: "gpt-4.1-2025-04-14"},
			},
			{
				name:   "incomplete",
				stream: []string{rIncomplete},
				want:   wire.Usage{Input: 10, Output: 16, Model: "o4-mini-2025-04-16"},
			},
			{
				name: "usage and model words inside output text are not usage",
				stream: []string{
					`{"type":"response.output_text.delta","delta":"\"usage\":{\"input_tokens\":999},\"model\":\"x\""}`,
					`{"type":"response.output_item.done","item":{"type":"message","content":[{"type":"output_text","text":"{\"response\":{\"model\":\"y\",\"usage\":{\"output_tokens\":5}}}"}]}}`,
					rCompleted,
				},
				want: wire.Usage{Input: 37, Output: 11, CacheRead: 12, Model: "gpt-4.1-2025-04-14"},
			},
			{
				name:   "the first model seen stays",
				stream: []string{`{"type":"response.created","response":{"id":"resp_1","model":"gpt-5-2025-08-07","usage":null}}`, rCompleted},
				want:   wire.Usage{Input: 37, Output: 11, CacheRead: 12, Model: "gpt-5-2025-08-07"},
			},
			{
				name:   "no usage",
				stream: []string{rCreated, rTextDelta, `{"type":"response.completed","response":{"id":"resp_1","status":"completed","usage":null}}`},
				want:   wire.Usage{Model: "gpt-4.1-2025-04-14"},
			},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				var u wire.Usage
				for _, e := range parseEvents(t, responsesStream(tt.stream...)) {
					dresponses.ObserveResponsesEvent(&u, e)
				}
				if u != tt.want {
					t.Errorf("usage %+v, want %+v", u, tt.want)
				}
			})
		}
	})
	t.Run("body", func(t *testing.T) {
		var body struct{ Response json.RawMessage }
		_ = json.Unmarshal([]byte(rCompleted), &body)
		var u wire.Usage
		dresponses.ObserveResponsesBody(&u, body.Response)
		if want := (wire.Usage{Input: 37, Output: 11, CacheRead: 12, Model: "gpt-4.1-2025-04-14"}); u != want {
			t.Errorf("usage %+v, want %+v", u, want)
		}
		var nilU *wire.Usage
		dresponses.ObserveResponsesBody(nilU, body.Response)
		dresponses.ObserveResponsesEvent(nilU, parseEvents(t, responsesStream(rCompleted))[0])
	})
}

func TestResponsesCheckBody(t *testing.T) {
	var completed struct{ Response json.RawMessage }
	_ = json.Unmarshal([]byte(rCompleted), &completed)
	tests := []struct {
		name   string
		body   string
		reason string
		errHas string
	}{
		{"completed", string(completed.Response), "", ""},
		{"incomplete", `{"id":"resp_1","object":"response","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"error":null,"output":[]}`, "", ""},
		{"background queued", `{"id":"resp_1","object":"response","status":"queued","error":null,"output":[]}`, "", ""},
		{"compaction", `{"id":"cmp_1","object":"response.compaction","output":[{"type":"compaction","encrypted_content":"x"}],"usage":{"input_tokens":1}}`, "", ""},
		{"failed", `{"id":"resp_1","object":"response","status":"failed","error":{"code":"server_error","message":"The model failed"},"output":[]}`, "error_body", "server_error: The model failed"},
		{"failed without error", `{"id":"resp_1","status":"failed","error":null}`, "error_body", "failed response"},
		{"top-level error", `{"error":{"message":"Rate limit","type":"rate_limit_error","code":"rate_limit_exceeded"}}`, "error_body", "rate_limit_error: Rate limit"},
		{"completed with no output", `{"id":"resp_1","status":"completed","error":null,"output":[]}`, "empty_output", "no output"},
		{"completed without output", `{"id":"resp_1","status":"completed"}`, "empty_output", "no output"},
		{"not JSON", `<html>oops</html>`, "malformed_body", "not a JSON object"},
		{"truncated", string(completed.Response[:100]), "malformed_body", "not valid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reason, err := dresponses.CheckResponsesBody([]byte(tt.body))
			if reason != tt.reason || (err != nil) != (tt.reason != "") || err != nil && !strings.Contains(err.Error(), tt.errHas) {
				t.Errorf("checkResponsesBody = %q, %v; want %q containing %q", reason, err, tt.reason, tt.errHas)
			}
		})
	}
}

func TestResponsesBodyReject(t *testing.T) {
	reject := [][]byte{[]byte("I CANNOT help")}
	tests := []struct {
		name string
		body string
		fail bool
	}{
		{"output_text", `{"output":[{"type":"message","content":[{"type":"output_text","text":"Sorry, I cannot\u0020help."}]}]}`, true},
		{"second message", `{"output":[{"type":"message","content":[]},{"type":"message","content":[{"type":"output_text","text":"ok"},{"type":"output_text","text":"i cannot help"}]}]}`, true},
		{"clean", `{"output":[{"type":"message","content":[{"type":"output_text","text":"Of course"}]}]}`, false},
		{"reasoning text", `{"output":[{"type":"reasoning","content":[{"type":"reasoning_text","text":"I cannot help"}]},{"type":"message","content":[{"type":"output_text","text":"Sure"}]}]}`, false},
		{"refusal part", `{"output":[{"type":"message","content":[{"type":"refusal","refusal":"I cannot help"}]}]}`, false},
		{"phrase only in a key", `{"I cannot help":1,"output":[]}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := dresponses.CheckResponsesBodyReject([]byte(tt.body), reject); (err != nil) != tt.fail {
				t.Errorf("checkResponsesBodyReject = %v, want failure %v", err, tt.fail)
			}
		})
	}
	if err := dresponses.CheckResponsesBodyReject([]byte(tests[0].body), nil); err != nil {
		t.Errorf("no phrases: %v", err)
	}
}

func TestResponsesIDs(t *testing.T) {
	evs := parseEvents(t, responsesStream(rCreated, rInProgress, rTextDelta, rCompleted))
	for i, e := range evs {
		want := ""
		if i == 0 {
			want = "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b"
		}
		if got := dresponses.CreatedID(e); got != want {
			t.Errorf("event %d: id %q, want %q", i, got, want)
		}
	}
	long := strings.Repeat("a", dresponses.MaxResponseIDLen)
	for _, tc := range []struct {
		raw, want string
	}{
		{`"resp_1"`, "resp_1"},
		{`"resp_\u0031"`, "resp_1"},
		{`"` + long + `"`, long},
		{`"` + long + `b"`, ""},
		{`""`, ""},
		{`null`, ""},
		{`1`, ""},
		{`"../admin"`, ""},
		{`"resp 1"`, ""},
		{`"resp\n1"`, ""},
		{`"resp%2F1"`, ""},
		{`"résp"`, ""},
	} {
		body := `{"model":"gpt-4.1","previous_response_id":` + tc.raw + `,"input":"hi"}`
		if got := dresponses.PreviousResponseID([]byte(body), nil); got != tc.want {
			t.Errorf("previousResponseID(%s) = %q, want %q", tc.raw, got, tc.want)
		}
		if got := dresponses.BodyID([]byte(`{"id":` + tc.raw + `}`)); got != tc.want {
			t.Errorf("responsesBodyID(%s) = %q, want %q", tc.raw, got, tc.want)
		}
		ev := parseEvents(t, sseStream(`data: {"type":"response.created","response":{"id":`+tc.raw+`}}`))[0]
		if got := dresponses.CreatedID(ev); got != tc.want {
			t.Errorf("responsesCreatedID(%s) = %q, want %q", tc.raw, got, tc.want)
		}
	}
	for body, want := range map[string]string{
		`{"input":[{"role":"user","content":"previous_response_id"}],"metadata":{"previous_response_id":"resp_inner"}}`: "",
		`{"previous_response_id":"resp_a","previous_response_id":"resp_b"}`:                                             "resp_b",
		`{"previous_respons\u0065_id":"resp_esc"}`:                                                                      "resp_esc",
		`{"previous_response_id":"resp_a"`:                                                                              "",
	} {
		if got := dresponses.PreviousResponseID([]byte(body), nil); got != want {
			t.Errorf("previousResponseID(%s) = %q, want %q", body, got, want)
		}
	}
}

func TestResponsesSessionKey(t *testing.T) {
	codex := http.Header{}
	codex.Set("session-id", "0199a213-81c0-7800-8aa1-bbab2a035a53")
	codex.Set("conversation_id", "conv-1")
	convOnly := http.Header{}
	convOnly.Set("conversation_id", " conv-1 ")
	for _, tc := range []struct {
		name       string
		body       string
		h          http.Header
		headerName string
		want       string
	}{
		{"prompt_cache_key first", `{"model":"m","prompt_cache_key":"pck","input":"x"}`, codex, "", "pck"},
		{"escaped key", `{"prompt_cache_k\u0065y":"pck"}`, codex, "", "pck"},
		{"last duplicate", `{"prompt_cache_key":"a","prompt_cache_key":"b"}`, nil, "", "b"},
		{"session-id header", `{"model":"m","input":"x"}`, codex, "", "0199a213-81c0-7800-8aa1-bbab2a035a53"},
		{"empty prompt_cache_key", `{"prompt_cache_key":""}`, codex, "", "0199a213-81c0-7800-8aa1-bbab2a035a53"},
		{"conversation_id header", `{"model":"m"}`, convOnly, "", "conv-1"},
		{"none", `{"model":"m","user":"u","input":[{"prompt_cache_key":"inner"}]}`, http.Header{}, "", ""},
		{"configured header only", `{"prompt_cache_key":"pck"}`, codex, "Conversation_id", "conv-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.h
			if h == nil {
				h = http.Header{}
			}
			if got := dresponses.SessionKey([]byte(tc.body), nil, h, tc.headerName); got != tc.want {
				t.Errorf("responsesSessionKey = %q, want %q", got, tc.want)
			}
		})
	}
	// The headers as Codex sends them on the wire reach the key.
	r, err := http.ReadRequest(bufio.NewReader(strings.NewReader("POST /v1/responses HTTP/1.1\r\nHost: x\r\nconversation_id: conv-wire\r\nContent-Length: 2\r\n\r\n{}")))
	if err != nil {
		t.Fatal(err)
	}
	if got := dresponses.SessionKey([]byte(`{}`), nil, r.Header, ""); got != "conv-wire" {
		t.Errorf("from the wire: %q", got)
	}
}

// An error before commit is OpenAI's error body: the SDK reads its message
// and code.
func TestResponsesErrorJSON(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write(dresponses.ErrorJSON(http.StatusServiceUnavailable, "every provider failed"))
	}))
	defer srv.Close()
	_, err := responsesTestClient(srv).Responses.New(context.Background(), responsesTestParams())
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("error %v (%T), want *openai.Error", err, err)
	}
	if apiErr.StatusCode != 503 || apiErr.Message != "every provider failed" || apiErr.Code != "service_unavailable" || apiErr.Type != "server_error" {
		t.Errorf("SDK error %d %q %q %q", apiErr.StatusCode, apiErr.Message, apiErr.Code, apiErr.Type)
	}
}

// What the openai-go Responses stream (NewStreaming) reports for each way a
// committed stream can end. Its decoder raises an error only for data with
// a top-level "error" member or a broken transport: an error event without
// one, or a stream that just stops before response.completed, is a clean
// end to it. So the proxy's error event carries "error", and a cut stream
// must get that event (or an aborted connection), never a clean close.
func TestResponsesErrorEventSDK(t *testing.T) {
	head := responsesStream(rCreated, rInProgress, rItemAdded, rPartAdded, rTextDelta)
	ours := string(dresponses.ErrorEvent(http.StatusBadGateway, "the upstream ended the stream before it was complete", 5))
	tests := []struct {
		name    string
		tail    string
		abort   bool
		wantErr string // "" for a clean end
		events  int
	}{
		{"completed", responsesStream(rCompleted), false, "", 6},
		{"the proxy's error event", ours, false, "the upstream ended the stream before it was complete", 5},
		{"the proxy's error event without a sequence number", string(dresponses.ErrorEvent(http.StatusGatewayTimeout, "no upstream event for 30s", -1)), false, "no upstream event for 30s", 5},
		{"an upstream error event with an error object", responsesStream(rErrorObj), false, "context_length_exceeded", 5},
		{"an error event of only code and message is no SDK error", responsesStream(rError), false, "", 6},
		{"a clean end before response.completed is no SDK error", "", false, "", 5},
		{"an aborted connection", "", true, "unexpected EOF", 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, head+tt.tail)
				w.(http.Flusher).Flush()
				if tt.abort {
					panic(http.ErrAbortHandler)
				}
			}))
			defer srv.Close()
			stream := responsesTestClient(srv).Responses.NewStreaming(context.Background(), responsesTestParams())
			n := 0
			var text strings.Builder
			for stream.Next() {
				n++
				if d, ok := stream.Current().AsAny().(responses.ResponseTextDeltaEvent); ok {
					text.WriteString(d.Delta)
				}
			}
			err := stream.Err()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("stream error %v, want a clean end", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("stream error %v, want one containing %q", err, tt.wantErr)
			}
			if n != tt.events || text.String() != "Hi" {
				t.Errorf("%d events, text %q; want %d, %q", n, text.String(), tt.events, "Hi")
			}
		})
	}
	// The proxy's own event is an error event to the proxy too.
	ev := parseEvents(t, ours)[0]
	if info := dresponses.InspectResponses(ev, false); info.Class != wire.EvError || !strings.Contains(wire.UpstreamErrorMessage(info.ErrVal, ev.Data), "before it was complete") {
		t.Errorf("own error event: %v %q", info.Class, wire.UpstreamErrorMessage(info.ErrVal, ev.Data))
	}
	var shape map[string]any
	if err := json.Unmarshal(ev.Data, &shape); err != nil || shape["type"] != "error" || shape["code"] != "502" || shape["sequence_number"] != 5.0 {
		t.Errorf("error event data %s", ev.Data)
	}
}

func responsesTestClient(srv *httptest.Server) *openai.Client {
	c := openai.NewClient(ooption.WithBaseURL(srv.URL+"/v1"), ooption.WithAPIKey("k"), ooption.WithMaxRetries(0), ooption.WithHTTPClient(srv.Client()))
	return &c
}

func responsesTestParams() responses.ResponseNewParams {
	return responses.ResponseNewParams{Model: "gpt-4.1", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")}}
}

// A delta event, the one nearly every event of a stream is, costs nothing
// on the heap to classify (with the text for the reject check) and to
// skip for usage.
func TestResponsesDeltaAllocs(t *testing.T) {
	for _, data := range []string{rTextDelta, rFnDelta, rRsDelta, rItemAdded} {
		for _, named := range []bool{true, false} {
			stream := sseStream("data: " + data)
			if named {
				stream = responsesStream(data)
			}
			ev := parseEvents(t, stream)[0]
			u := wire.Usage{Model: "gpt-4.1"}
			allocs := testing.AllocsPerRun(100, func() {
				_ = dresponses.InspectResponses(ev, true)
				dresponses.ObserveResponsesEvent(&u, ev)
				_ = dresponses.CreatedID(ev)
			})
			if allocs != 0 {
				t.Errorf("%.50s (named %v): %v allocs per event", data, named, allocs)
			}
		}
	}
}

// BenchmarkResponsesDelta is the per-event cost of a Responses stream
// after the prelude: classify (with text) and observe usage.
func BenchmarkResponsesDelta(b *testing.B) {
	ev := parseEvents(b, responsesStream(rTextDelta))[0]
	u := wire.Usage{Model: "gpt-4.1"}
	b.ReportAllocs()
	b.SetBytes(int64(len(ev.Raw)))
	for b.Loop() {
		if dresponses.InspectResponses(ev, true).Class != wire.EvOutput {
			b.Fatal("misclassified")
		}
		dresponses.ObserveResponsesEvent(&u, ev)
	}
}

// BenchmarkResponsesStream runs a whole text answer (prelude, two deltas,
// the done events, response.completed with usage) per op.
func BenchmarkResponsesStream(b *testing.B) {
	evs := parseEvents(b, responsesStream(rCreated, rInProgress, rItemAdded, rPartAdded, rTextDelta, rTextDelta2, rTextDone, rPartDone, rItemDone, rCompleted))
	var n int64
	for _, e := range evs {
		n += int64(len(e.Raw))
	}
	b.ReportAllocs()
	b.SetBytes(n)
	for b.Loop() {
		u := wire.Usage{}
		for _, e := range evs {
			_ = dresponses.InspectResponses(e, true)
			dresponses.ObserveResponsesEvent(&u, e)
		}
		if u.Output != 11 {
			b.Fatal("no usage")
		}
	}
}

// FuzzResponsesEvent feeds arbitrary events to the Responses classifier:
// it never panics, its class is the one an encoding/json reading of the
// event gives, the text it returns is the delta of an output_text.delta,
// and usage and ids never panic and stay bounded.
func FuzzResponsesEvent(f *testing.F) {
	for _, d := range []string{rCreated, rTextDelta, rFnDelta, rItemDone, rCompleted, rIncomplete, rFailed, rError, rErrorObj, rKeepalive,
		`{"type":"response.output_text.delt\u0061","delta":"x"}`, `{"ty\u0070e":"error"}`, `{"type":1,"error":null}`, `[1]`, `"x"`, ``, `{"type":"response.created","response":{"id":"a\u0000b"}}`} {
		f.Add("", []byte(d))
		f.Add("response.output_text.delta", []byte(d))
	}
	f.Add("error", []byte("not json"))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		ev := sse.Event{Data: data}
		if name != "" {
			ev.Name = []byte(name)
		}
		info := dresponses.InspectResponses(ev, true)
		if want := responsesReferenceClass(name, data); info.Class != want {
			t.Fatalf("event %q %q: class %v, encoding/json reading says %v", name, data, info.Class, want)
		}
		if info.Text != nil {
			var m map[string]json.RawMessage
			var delta string
			if info.Class != wire.EvOutput || json.Unmarshal(data, &m) != nil || json.Unmarshal(m["delta"], &delta) != nil {
				t.Fatalf("text %s from a %v event %q", info.Text, info.Class, data)
			}
			if got := string(jsonscan.AppendString(nil, info.Text)); got != delta && utf8.Valid(data) {
				t.Fatalf("text %q, delta %q", got, delta)
			}
		}
		_ = wire.UpstreamErrorMessage(info.ErrVal, data)
		var u wire.Usage
		dresponses.ObserveResponsesEvent(&u, ev)
		dresponses.ObserveResponsesBody(&u, data)
		for _, id := range []string{dresponses.CreatedID(ev), dresponses.BodyID(data), dresponses.PreviousResponseID(data, nil)} {
			if id != "" && !dresponses.ValidResponseID([]byte(id)) {
				t.Fatalf("id %q", id)
			}
		}
		_, _ = dresponses.CheckResponsesBody(data)
		_ = dresponses.CheckResponsesBodyReject(data, [][]byte{[]byte("x")})
		_ = dresponses.SessionKey(data, nil, http.Header{}, "")
	})
}

// responsesReferenceClass is the event class by the SPEC's rules, read with
// encoding/json (the last of duplicate keys wins, as for the Go clients).
func responsesReferenceClass(name string, data []byte) wire.EventClass {
	payload := bytes.Trim(data, " \t\r\n")
	if name == "error" {
		return wire.EvError
	}
	if len(payload) == 0 {
		return wire.EvPrelude
	}
	var m map[string]json.RawMessage
	if !json.Valid(payload) || payload[0] != '{' || json.Unmarshal(payload, &m) != nil {
		return wire.EvMalformed
	}
	if e, ok := m["error"]; ok && string(e) != "null" {
		return wire.EvError
	}
	kind := name
	if raw, ok := m["type"]; ok && len(raw) > 0 && raw[0] == '"' {
		_ = json.Unmarshal(raw, &kind)
	}
	switch {
	case kind == "error", kind == "response.failed":
		return wire.EvError
	case kind == "response.completed", kind == "response.incomplete":
		return wire.EvTerminal
	case kind == "response.output_item.done", kind == "response.image_generation_call.partial_image",
		strings.HasPrefix(kind, "response.") && strings.HasSuffix(kind, ".delta"):
		return wire.EvOutput
	}
	return wire.EvPrelude
}
