package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// Trust boundaries of the request body and the stream (issue 11, cases 4-6;
// SPEC 15): what a client writes in the body is read one way only, a model
// name cannot grow what the proxy keeps, and an OpenAI n>1 stream is not
// complete while one of its choices is mid-sentence.

// trustPost sends a raw completion body to the proxy in a dialect
// ("anthropic" or "openai") and returns the status and the body.
func trustPost(t *testing.T, p *proxy, dialect, body string) (int, string) {
	t.Helper()
	path := "/v1/messages"
	if dialect == "openai" {
		path = "/v1/chat/completions"
	}
	req, _ := http.NewRequestWithContext(ctxTimeout(t, 10*time.Second), http.MethodPost, p.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-api-key", "k")
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("Authorization", "Bearer k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, readAll(resp)
}

// trustDialectError checks that body is a 400 error object in the
// dialect's own shape and returns its message.
func trustDialectError(t *testing.T, dialect, body string) string {
	t.Helper()
	var e struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
			Code    string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("%s: error body is not JSON: %v: %.300s", dialect, err, body)
	}
	ok := e.Error.Type == "invalid_request_error" && e.Error.Message != ""
	if dialect == "anthropic" {
		ok = ok && e.Type == "error"
	} else {
		ok = ok && e.Type == "" && e.Error.Code == "400"
	}
	if !ok {
		t.Fatalf("%s: not a 400 in the client's dialect: %.300s", dialect, body)
	}
	return e.Error.Message
}

// Case 4. A body that parsers read differently is refused before any
// upstream sees it: a second model or stream key in another letter case
// (a Go provider's encoding/json matches keys case-insensitively, last one
// wins), the same key twice, spelled with escapes or with the long s that
// Unicode case folding turns into an s. Without the refusal the
// allow-listed cheap model routes the request and the Go upstream runs
// the expensive one, and stream:false/Stream:true (a JSON answer expected,
// a stream received) fails enough attempts to open the breaker.
func TestTrustAmbiguousBody(t *testing.T) {
	up := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("cheap", up, "models claude-cheap*")+
		"hedge off\nretry {\n same_provider 0\n}\n"+
		"cooldown {\n failures 3\n duration 1m\n}\n")

	const msgs = `"max_tokens":16,"messages":[{"role":"user","content":"hi"}]`
	ambiguous := map[string]string{
		"Model after model":       `{"model":"claude-cheap","Model":"claude-opus-expensive",` + msgs + `}`,
		"MODEL before model":      `{"MODEL":"claude-opus-expensive","model":"claude-cheap",` + msgs + `}`,
		"model twice":             `{"model":"claude-cheap","model":"claude-opus-expensive",` + msgs + `}`,
		"escaped model key":       `{"model":"claude-cheap","mod\u0065l":"claude-opus-expensive",` + msgs + `}`,
		"escaped upper-case key":  `{"model":"claude-cheap","\u004dODEL":"claude-opus-expensive",` + msgs + `}`,
		"stream and Stream":       `{"model":"claude-cheap","stream":false,"Stream":true,` + msgs + `}`,
		"stream twice":            `{"model":"claude-cheap","stream":true,"stream":false,` + msgs + `}`,
		"long s stream":           `{"model":"claude-cheap","stream":false,"ſtream":true,` + msgs + `}`,
		"escaped long s stream":   `{"model":"claude-cheap","stream":false,"\u017fTREAM":true,` + msgs + `}`,
		"non-string second model": `{"model":"claude-cheap","Model":null,` + msgs + `}`,
	}
	for _, d := range streamDialects {
		for name, body := range ambiguous {
			// Three of each: before the fix, enough to open the breaker.
			for range 3 {
				status, resp := trustPost(t, p, d, body)
				if status != http.StatusBadRequest {
					t.Fatalf("%s, %s: status %d, want 400: %.300s", d, name, status, resp)
				}
				trustDialectError(t, d, resp)
			}
		}
	}
	if n := completions(up); n != 0 {
		for _, r := range up.Requests() {
			t.Logf("upstream ran model %q stream %v", r.Model, r.Stream)
		}
		t.Fatalf("ambiguous bodies reached the provider %d times; want none", n)
	}

	// An unambiguous key spelled with escapes is the model; the breaker is
	// closed and the allow-list routes by it.
	for _, d := range streamDialects {
		status, resp := trustPost(t, p, d, `{"mod\u0065l":"claude-cheap-1","str\u0065am":false,`+msgs+`}`)
		if status != http.StatusOK {
			t.Fatalf("%s: escaped-key body: status %d: %.300s", d, status, resp)
		}
		status, resp = trustPost(t, p, d, `{"mod\u0065l":"claude-opus-expensive",`+msgs+`}`)
		if status != http.StatusNotFound {
			t.Fatalf("%s: escaped-key body naming a model not allowed: status %d, want 404: %.300s", d, status, resp)
		}
	}
	recs := up.Requests()
	if len(recs) != 2 || recs[0].Model != "claude-cheap-1" || recs[1].Model != "claude-cheap-1" || recs[0].Stream || recs[1].Stream {
		t.Fatalf("upstream records %+v; want two non-streaming claude-cheap-1 requests", recs)
	}
	if v := healthMustProvider(t, p, "cheap", up); v.State != "closed" || v.Failures != 0 {
		t.Fatalf("provider state %s, %d failures; want closed, none", v.State, v.Failures)
	}
}

// Case 5. A model name over 256 bytes, or with a control character (C0,
// DEL, C1) or invalid UTF-8, is a 400 in the client's dialect before any
// attempt: nothing the proxy keeps (model cooldowns, the admin view), logs
// or answers grows with it. Without the bound a 1 MiB name that a provider
// answers 404 for is stored as a model cooldown (the admin view answers a
// MiB per request) and logged whole.
func TestTrustUnboundedModelNames(t *testing.T) {
	up := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 404, Model: "long-*"}}})
	p := startProxy(t, provider("only", up)+"hedge off\nretry {\n same_provider 0\n}\n")

	const msgs = `"max_tokens":16,"messages":[{"role":"user","content":"hi"}]`
	body := func(modelJSON string) string { return `{"model":` + modelJSON + `,` + msgs + `}` }
	huge := `"long-` + strings.Repeat("a", 1<<20) + `"`
	bad := map[string]string{
		"1 MiB name":         huge,
		"257 bytes":          `"long-` + strings.Repeat("b", 252) + `"`,
		"escaped, 257 bytes": `"long-` + strings.Repeat(`\u0062`, 252) + `"`,
		"escape sequence":    `"long-\u001b[2J\u001b[31mred"`,
		"NUL":                `"long-\u0000"`,
		"newline":            `"long-x\nINFO forged line"`,
		"DEL":                `"long-\u007f"`,
		"C1 control":         `"long-\u0085"`,
		"raw C1 control":     "\"long-\u0085\"",
		"invalid UTF-8":      "\"long-\xff\xfe\"",
	}
	refused := 0
	for _, d := range streamDialects {
		for name, m := range bad {
			status, resp := trustPost(t, p, d, body(m))
			if status != http.StatusBadRequest {
				t.Fatalf("%s, %s: status %d, want 400: %.300s", d, name, status, resp)
			}
			if len(resp) > 1024 {
				t.Fatalf("%s, %s: the error answer is %d bytes: it echoes the name", d, name, len(resp))
			}
			if msg := trustDialectError(t, d, resp); !strings.Contains(msg, "model") {
				t.Fatalf("%s, %s: message %q does not say what is wrong", d, name, msg)
			}
			refused++
		}
	}
	// The bound is inclusive: a 256-byte name is served as is.
	ok256 := "ok-" + strings.Repeat("c", 253)
	for _, d := range streamDialects {
		if status, resp := trustPost(t, p, d, body(`"`+ok256+`"`)); status != http.StatusOK {
			t.Fatalf("%s: 256-byte name: status %d: %.300s", d, status, resp)
		}
	}
	recs := up.Requests()
	if len(recs) != 2 || recs[0].Model != ok256 || recs[1].Model != ok256 {
		t.Fatalf("the provider got %d requests; want only the two with the 256-byte name", len(recs))
	}

	// Nothing kept or logged grows with a name.
	for _, path := range []string{"/llm_hedge/providers", "/llm_hedge/providers?format=text"} {
		status, _, view := healthAdmin(t, p, http.MethodGet, path)
		if status != http.StatusOK || len(view) > 16<<10 {
			t.Fatalf("GET %s: status %d, %d bytes", path, status, len(view))
		}
		if strings.Contains(view, "long-") || strings.ContainsAny(view, "\x1b\x00\x7f\u0085") {
			t.Fatalf("GET %s shows a refused name: %.500s", path, view)
		}
	}
	lines := streamLogLines(t, p, refused+2)
	for _, l := range lines {
		b, _ := json.Marshal(l)
		if len(b) > 4<<10 {
			t.Fatalf("a request log line is %d bytes: %.300s", len(b), b)
		}
	}
	if fi, err := os.Stat(p.LogFile); err != nil || fi.Size() > 1<<20 {
		t.Fatalf("log file: %v, %d bytes; a 1 MiB name was logged", err, fi.Size())
	}
}

// trustOChunk is one OpenAI chunk of choice index.
func trustOChunk(index int, delta, finish string) string {
	return streamSSE("", fmt.Sprintf(`{"id":"chatcmpl-n2","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":%d,"delta":%s,"logprobs":null,"finish_reason":%s}]}`, index, delta, finish))
}

func trustOText(index int, text string) string {
	b, _ := json.Marshal(text)
	return trustOChunk(index, `{"content":`+string(b)+`}`, "null")
}

// Case 6. An OpenAI stream with n=2 whose upstream ends without [DONE]:
// it is complete (the proxy ends it with [DONE] after the finish grace)
// only when every choice seen has its finish_reason. Choice 0 finishing
// while choice 1 is mid-sentence, or has only sent its role chunk (seen
// before the commit, in the gate's buffer), is a cut: the SDK gets the
// error event, never a clean finish.
func TestTrustOpenAINChoicesTruncated(t *testing.T) {
	role := func(i int) string { return trustOChunk(i, `{"role":"assistant","content":""}`, "null") }
	finish := func(i int) string { return trustOChunk(i, `{}`, `"stop"`) }
	cases := []struct {
		name     string
		events   []string
		complete bool
	}{
		{"choice 1 mid-sentence", []string{role(0), role(1), trustOText(0, "Hello there."), trustOText(1, "The quick"), finish(0), trustOText(1, " brown")}, false},
		{"choice 1 seen only before commit", []string{role(0), role(1), trustOText(0, "Hello there."), finish(0)}, false},
		{"every choice finished", []string{role(0), role(1), trustOText(0, "Hello there."), trustOText(1, "The quick brown fox."), finish(0), finish(1)}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sc := newStreamScript(t, func(r *http.Request, send func(...string) bool) {
				send(tc.events...) // then the handler returns: the stream ends without [DONE]
			})
			p := startProxy(t, provider("only", sc.up()))
			tap, _, oc := streamTapped(p)
			params := openaiParams("gpt-test")
			params.N = openai.Int(2)
			acc, err := streamOpenAI(ctxTimeout(t, 10*time.Second), oc, params)
			raw := tap.raw()
			line := streamLogLine(t, p, 1)
			if tc.complete {
				if err != nil || len(acc.Choices) != 2 || acc.Choices[1].Message.Content != "The quick brown fox." || !strings.HasSuffix(raw, "data: [DONE]\n\n") {
					t.Fatalf("SDK %+v, err %v; want a clean finish of both choices:\n%s", acc.Choices, err, raw)
				}
				if line["outcome"] != "success" {
					t.Fatalf("log outcome %v stream_end %v; want success", line["outcome"], line["stream_end"])
				}
				return
			}
			if err == nil {
				t.Fatalf("the SDK got a clean finish of a truncated n=2 stream:\n%s", raw)
			}
			if !strings.Contains(err.Error(), "ended the stream before it was complete") || strings.Contains(raw, "[DONE]") {
				t.Fatalf("SDK error %v; want the proxy's error event and no [DONE]:\n%s", err, raw)
			}
			if line["outcome"] != "stream_error" || line["stream_end"] != "upstream_cut" {
				t.Fatalf("log outcome %v stream_end %v; want stream_error, upstream_cut", line["outcome"], line["stream_end"])
			}
		})
	}
}
