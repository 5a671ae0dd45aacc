package engine

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/llmhedge/caddy-llm-hedge/internal/stream"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// The registry answers what the uint8 switches answered: path to dialect,
// `api` option to dialect, a forwarded call's guessed dialect and the
// forwarded paths.
func TestDialectRegistry(t *testing.T) {
	for _, tt := range []struct {
		api  string
		want wire.Dialect
		ok   bool
	}{
		{"anthropic", dialectAnthropic, true},
		{"OpenAI", dialectOpenAI, true},
		{"responses", dialectResponses, true},
		{"", wire.DialectNone, true},
		{"Gemini", dialectGemini, true},
		{"bedrock", wire.DialectNone, false},
	} {
		if got, ok := parseDialect(tt.api); got != tt.want || ok != tt.ok {
			t.Errorf("parseDialect(%q) = %v, %v; want %v, %v", tt.api, got, ok, tt.want, tt.ok)
		}
	}
	for path, want := range map[string]wire.Dialect{
		"/v1/messages": dialectAnthropic, "/messages/": dialectAnthropic,
		"/v1/chat/completions": dialectOpenAI, "/chat/completions": dialectOpenAI,
		"/v1/models": wire.DialectNone, "/v1/messages/count_tokens": wire.DialectNone,
		"/v1/responses": dialectResponses, "/responses/compact": dialectResponses,
		"/v1/responses/input_tokens": wire.DialectNone, "/v1/responses/resp_1": wire.DialectNone,
		"/v1beta/models/gemini-2.5-pro:streamGenerateContent": dialectGemini,
		"/v1/models/gemini-2.5-pro:generateContent/":          dialectGemini,
		"/v1beta/models/gemini-2.5-pro:countTokens":           wire.DialectNone,
		// A Gemini model path with a model that is not path-safe is still
		// Gemini's, so that parsing it answers 400 (issue 21 item 5).
		"/v1beta/models/a%2Fb:generateContent": dialectGemini,
		"/v1beta/models/..:generateContent":    dialectGemini,
	} {
		if got := dialectOfPath(path); got != want {
			t.Errorf("dialectOfPath(%q) = %v, want %v", path, got, want)
		}
	}
	for _, tt := range []struct {
		path    string
		header  http.Header
		want    wire.Dialect
		guessed bool
	}{
		{"/v1/messages/count_tokens", http.Header{}, dialectAnthropic, false},
		{"/v1/models", http.Header{"Anthropic-Version": {"2023-06-01"}}, dialectAnthropic, false},
		{"/v1/models", http.Header{"X-Api-Key": {"k"}}, dialectAnthropic, false},
		{"/v1/models", http.Header{"Authorization": {"Bearer k"}}, dialectOpenAI, false},
		{"/v1/models/gpt-x/", http.Header{}, dialectOpenAI, false},
		{"/v1/files", http.Header{}, dialectOpenAI, true},
		{"/v1/files", http.Header{"X-Api-Key": {"k"}}, dialectAnthropic, false},
		{"/v1/responses/resp_1", http.Header{"Authorization": {"Bearer k"}}, dialectResponses, false},
		{"/v1beta/models", http.Header{}, dialectGemini, false},
		{"/v1/models/gemini-x:countTokens", http.Header{}, dialectGemini, false},
		{"/v1/models", http.Header{"X-Goog-Api-Key": {"k"}}, dialectGemini, false},
	} {
		if got, guessed := dialectOfAuxPath(tt.path, tt.header); got != tt.want || guessed != tt.guessed {
			t.Errorf("dialectOfAuxPath(%q, %v) = %v, %v; want %v, %v", tt.path, tt.header, got, guessed, tt.want, tt.guessed)
		}
	}
	for _, tt := range []struct {
		method, path string
		listed       bool
		allow        string
	}{
		{"GET", "/v1/models", true, ""},
		{"GET", "/v1/models/claude-x/", true, ""},
		{"POST", "/v1/models", false, "GET"},
		{"POST", "/v1/messages/count_tokens", true, ""},
		{"GET", "/v1/messages/count_tokens", false, "POST"},
		{"POST", "/v1/responses/input_tokens", true, ""},
		{"GET", "/v1/responses/resp_1", true, ""},
		{"DELETE", "/v1/responses/resp_1", true, ""},
		{"POST", "/v1/responses/resp_1", false, "DELETE"},
		{"POST", "/v1/responses/resp_1/cancel", true, ""},
		{"GET", "/v1/responses/resp_1/input_items", true, ""},
		{"GET", "/v1/responses/resp_1/other", false, ""},
		{"GET", "/v1/responses//input_items", false, ""},
		{"GET", "/v1/models/a/b", false, ""},
		{"POST", "/v1/files", false, ""},
		{"GET", "/v1beta/models", true, ""},
		{"GET", "/v1beta/models/gemini-2.5-pro", true, ""},
		{"POST", "/v1beta/models/gemini-2.5-pro:countTokens", true, ""},
		{"POST", "/v1/models/gemini-2.5-pro:countTokens", true, ""},
		{"POST", "/v1beta/models/:countTokens", false, "GET"},
		{"POST", "/v1beta/models/gemini-2.5-pro:embedContent", false, "GET"},
	} {
		if listed, allow := auxListed(tt.method, tt.path); listed != tt.listed || allow != tt.allow {
			t.Errorf("auxListed(%s %s) = %v %q, want %v %q", tt.method, tt.path, listed, allow, tt.listed, tt.allow)
		}
	}
}

// Every registered dialect is whole: its name round-trips through the
// `api` option, its completion path routes to it, the key it sets is one
// a keyed provider removes from the client, and the errors it renders are
// ones it (and the SDKs) read as errors.
func TestDialectsComplete(t *testing.T) {
	names := map[string]bool{}
	for _, d := range dialects {
		t.Run(d.String(), func(t *testing.T) {
			if d.String() == "" || names[d.String()] {
				t.Fatalf("name %q empty or taken", d.String())
			}
			names[d.String()] = true
			if got, ok := parseDialect(strings.ToUpper(d.String())); !ok || got != d {
				t.Errorf("parseDialect(%q) = %v, %v", strings.ToUpper(d.String()), got, ok)
			}
			if got := dialectOfPath(d.CompletionPath("")); got != d {
				t.Errorf("dialectOfPath(%q) = %v", d.CompletionPath(""), got)
			}

			h := http.Header{}
			d.SetAuth(h, "sk-operator")
			for k := range h {
				removed := false
				for _, c := range d.CredentialHeaders() {
					removed = removed || http.CanonicalHeaderKey(c) == k
				}
				if !removed {
					t.Errorf("setAuth sets %s, which is not among credentialHeaders %v", k, d.CredentialHeaders())
				}
			}

			body := d.ErrorJSON(529, "overloaded")
			if !json.Valid(body) {
				t.Fatalf("errorJSON = %s: not JSON", body)
			}
			if reason, err := d.CheckBody(body); reason != "error_body" || err == nil {
				t.Errorf("checkBody(errorJSON) = %q, %v; want error_body", reason, err)
			}
			if got := wire.UpstreamMessage(body); !strings.Contains(got, "overloaded") {
				t.Errorf("wire.UpstreamMessage(errorJSON) = %q", got)
			}
			evs := parseEvents(t, string(d.ErrorEvent(502, "cut")))
			if len(evs) != 1 {
				t.Fatalf("errorEvent is %d events", len(evs))
			}
			if info := d.Inspect(evs[0], false, nil); info.Class != wire.EvError {
				t.Errorf("errorEvent classifies as %v", info.Class)
			}
		})
	}
}

// Each dialect recognises its own "no such model" answer, and classifying
// an upstream 404 still hears every dialect's words.
func TestDialectModelMissing(t *testing.T) {
	for _, tt := range []struct {
		d    wire.Dialect
		body string
		want bool
	}{
		{dialectAnthropic, `{"type":"error","error":{"type":"not_found_error","message":"model: claude-nope"}}`, true},
		{dialectAnthropic, `{"type":"error","error":{"type":"not_found_error","message":"Not found"}}`, false},
		{dialectOpenAI, `{"error":{"message":"no","type":"invalid_request_error","code":"model_not_found"}}`, true},
		{dialectOpenAI, `{"error":{"message":"The model ` + "`gpt-x`" + ` does not exist or you do not have access to it.","code":null}}`, true},
		{dialectOpenAI, `{"error":{"message":"Unknown path","code":"not_found"}}`, false},
	} {
		if got := tt.d.ModelMissing([]byte(tt.body)); got != tt.want {
			t.Errorf("%v.modelMissing(%s) = %v, want %v", tt.d, tt.body, got, tt.want)
		}
		if got := modelMissing([]byte(tt.body)); got != tt.want {
			t.Errorf("modelMissing(%s) = %v, want %v", tt.body, got, tt.want)
		}
	}
}

// A gate failure maps to the attempt failure class and the logged name the
// string switch of attempt.go gave it.
func TestGateFailureClass(t *testing.T) {
	for _, tt := range []struct {
		f     stream.GateFailure
		name  string
		class wire.FailClass
	}{
		{stream.GateOK, "", wire.ClassMalformed},
		{stream.GateErrorEvent, "error_event", wire.ClassFake200},
		{stream.GateMalformed, "malformed_first_event", wire.ClassMalformed},
		{stream.GateTerminalBeforeContent, "terminal_before_content", wire.ClassClosedEarly},
		{stream.GateRejectedPhrase, "rejected_phrase", wire.ClassRejected},
		{stream.GateBufferFull, "buffer_overflow", wire.ClassMalformed},
	} {
		if tt.f.String() != tt.name || tt.f.Class() != tt.class {
			t.Errorf("gateFailure %d = %q %q, want %q %q", tt.f, tt.f.String(), tt.f.Class(), tt.name, tt.class)
		}
	}
}

// Classifying and observing an event through the interface allocates
// nothing, for every dialect.
func TestDialectEventAllocs(t *testing.T) {
	for d, data := range map[wire.Dialect]string{
		dialectAnthropic: anthropicEvent("content_block_delta", aTextDelta),
		dialectOpenAI:    openAIChunk(oContent),
		dialectResponses: responsesEvent(rTextDelta),
		dialectGemini:    "data: " + gText1,
	} {
		ev := parseEvents(t, sseStream(data))[0]
		u := wire.Usage{Model: "m"}
		var cs wire.ChoiceSet
		g := stream.NewGate(d, nil, 0, 0)
		allocs := testing.AllocsPerRun(100, func() {
			_ = d.Inspect(ev, true, &cs)
			u.ObserveEvent(d, ev)
			g.Reset(d, nil, 0, 0)
			_ = g.Feed(ev)
		})
		if allocs != 0 {
			t.Errorf("%v: %v allocs per event", d, allocs)
		}
	}
}

// The Responses dialect is only method wrappers over the pure functions of
// dialect_responses.go, and the gate runs it unchanged.
func TestDialectResponsesGate(t *testing.T) {
	d := dialectResponses
	g := stream.NewGate(d, [][]byte{[]byte("I cannot")}, 0, 0)
	var got stream.GateDecision
	for _, ev := range parseEvents(t, responsesStream(rCreated, rTextDelta)) {
		got = g.Feed(ev)
	}
	if got != stream.GateCommit || g.CommittedBy() != "response.output_text.delta" {
		t.Fatalf("gate = %v by %q, want commit by response.output_text.delta", got, g.CommittedBy())
	}
	g.Reset(d, nil, 0, 0)
	for _, ev := range parseEvents(t, responsesStream(rCreated, rCompleted)) {
		got = g.Feed(ev)
	}
	if got != stream.GateFail || g.Failed() != stream.GateTerminalBeforeContent {
		t.Fatalf("gate = %v (%v), want terminal_before_content", got, g.Failed())
	}
}

// The session keys each dialect reads with no `affinity header` set:
// Anthropic's metadata.user_id, else Claude Code's session header; the
// Responses API's prompt_cache_key, else Codex's session-id and
// conversation_id headers.
func TestDialectSessionKeys(t *testing.T) {
	for _, tt := range []struct {
		d      wire.Dialect
		body   string
		header http.Header
		want   string
	}{
		{dialectAnthropic, `{"metadata":{"user_id":"u1"}}`, http.Header{"X-Claude-Code-Session-Id": {"s1"}}, "u1"},
		{dialectAnthropic, `{"model":"m"}`, http.Header{"X-Claude-Code-Session-Id": {" s1 "}}, "s1"},
		{dialectAnthropic, `{"model":"m"}`, http.Header{}, ""},
		{dialectResponses, `{"prompt_cache_key":"k1"}`, http.Header{"Session-Id": {"s1"}}, "k1"},
		{dialectResponses, `{"model":"m"}`, http.Header{"Session-Id": {"s1"}, "Conversation_id": {"c1"}}, "s1"},
		{dialectResponses, `{"model":"m"}`, http.Header{"Conversation_id": {"c1"}}, "c1"},
	} {
		if got := sessionKey(tt.d, []byte(tt.body), nil, tt.header, ""); got != tt.want {
			t.Errorf("%v session key of %s %v = %q, want %q", tt.d, tt.body, tt.header, got, tt.want)
		}
	}
}

// A provider's `api` says which client dialects it serves: openai serves
// Chat Completions and Responses clients, responses only Responses ones.
func TestDialectAPIServes(t *testing.T) {
	for _, tt := range []struct {
		api, client wire.Dialect
		want        bool
	}{
		{dialectOpenAI, dialectOpenAI, true},
		{dialectOpenAI, dialectResponses, true},
		{dialectResponses, dialectResponses, true},
		{dialectResponses, dialectOpenAI, false},
		{dialectAnthropic, dialectResponses, false},
		{dialectOpenAI, dialectAnthropic, false},
		{wire.DialectNone, dialectResponses, true},
	} {
		if got := apiServes(tt.api, tt.client); got != tt.want {
			t.Errorf("apiServes(%v, %v) = %v, want %v", tt.api, tt.client, got, tt.want)
		}
	}
}
