package e2e

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

const wantText = "The quick brown fox jumps over the lazy dog."

// Every failure a primary can have before its first byte must end with the
// answer of the secondary, through both official SDKs, streaming or not.
func TestFailoverBeforeFirstByte(t *testing.T) {
	cases := []struct {
		name    string
		primary sim.Config
		refused bool
		block   string
	}{
		{name: "503", primary: sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 503}}}},
		{name: "connection refused", refused: true},
		// 2 s: the healthy secondary answers well within it on a loaded machine
		// under -race; the primary would take 30 s.
		{name: "first-byte timeout", primary: sim.Config{FirstToken: caddyDur(30 * time.Second)}, block: "timeouts {\n first_byte 2s\n response 2s\n }"},
		{name: "fake-200 error event", primary: sim.Config{Faults: []sim.Fault{{Kind: sim.FaultFake200}}}},
		{name: "reset", primary: sim.Config{Faults: []sim.Fault{{Kind: sim.FaultReset}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			primary := newUpstream(t, tc.primary)
			if tc.refused {
				primary.URL = "http://127.0.0.1:" + fmt.Sprint(freePort(t))
			}
			secondary := newUpstream(t, sim.Config{})
			p := startProxy(t, provider("primary", primary, "priority 0")+provider("secondary", secondary, "priority 1")+
				"hedge off\n cooldown {\n failures 100\n }\n"+tc.block)

			for _, mode := range []string{"anthropic-stream", "anthropic", "openai-stream", "openai"} {
				ctx := ctxTimeout(t, 10*time.Second)
				var text string
				var err error
				switch mode {
				case "anthropic-stream":
					var m anthropic.Message
					m, err = streamAnthropic(ctx, anthropicClient(p, "sk-client"), anthropicParams("claude-test"))
					text = messageText(m)
				case "anthropic":
					var m *anthropic.Message
					m, err = anthropicClient(p, "sk-client").Messages.New(ctx, anthropicParams("claude-test"))
					if m != nil {
						text = messageText(*m)
					}
				case "openai-stream":
					var acc openai.ChatCompletionAccumulator
					acc, err = streamOpenAI(ctx, openaiClient(p, "sk-client"), openaiParams("gpt-test"))
					if len(acc.Choices) > 0 {
						text = acc.Choices[0].Message.Content
					}
				case "openai":
					var c *openai.ChatCompletion
					c, err = openaiClient(p, "sk-client").Chat.Completions.New(ctx, openaiParams("gpt-test"))
					if c != nil && len(c.Choices) > 0 {
						text = c.Choices[0].Message.Content
					}
				}
				if err != nil {
					t.Fatalf("%s: %v", mode, err)
				}
				if text != wantText {
					t.Fatalf("%s: text %q, want %q", mode, text, wantText)
				}
			}
			if n := completions(secondary); n != 4 {
				t.Fatalf("secondary served %d requests, want 4", n)
			}
		})
	}
}

// A request-level error (400) is the client's problem: it passes through
// unchanged after exactly one upstream attempt.
func TestRequestErrorPassesThrough(t *testing.T) {
	primary := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 400}}})
	secondary := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("primary", primary, "priority 0")+provider("secondary", secondary, "priority 1"))

	_, err := anthropicClient(p, "k").Messages.New(ctxTimeout(t, 5*time.Second), anthropicParams("claude-test"))
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 {
		t.Fatalf("want a 400 API error, got %v", err)
	}
	_, err = streamAnthropic(ctxTimeout(t, 5*time.Second), anthropicClient(p, "k"), anthropicParams("claude-test"))
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 {
		t.Fatalf("stream: want a 400 API error, got %v", err)
	}
	if n := completions(primary) + completions(secondary); n != 2 {
		t.Fatalf("upstream attempts = %d, want exactly 1 per request (2)", n)
	}
}

// A stream cut before its terminal event must reach the SDK as an error,
// never as a clean finish.
func TestCutStreamIsAnError(t *testing.T) {
	up := newUpstream(t, sim.Config{Tokens: 60, Faults: []sim.Fault{{Kind: sim.FaultCut, After: 40}}})
	p := startProxy(t, provider("only", up))

	m, err := streamAnthropic(ctxTimeout(t, 5*time.Second), anthropicClient(p, "k"), anthropicParams("claude-test"))
	if err == nil {
		t.Fatalf("anthropic: cut stream finished cleanly with %q", messageText(m))
	}
	_, err = streamOpenAI(ctxTimeout(t, 5*time.Second), openaiClient(p, "k"), openaiParams("gpt-test"))
	if err == nil {
		t.Fatal("openai: cut stream finished cleanly")
	}
}

// The client's key never reaches a provider that has a key of its own; a
// provider without one gets the client's key.
func TestClientKeyNotForwarded(t *testing.T) {
	keyed := newUpstream(t, sim.Config{Key: "sk-provider"})
	p := startProxy(t, provider("keyed", keyed, "key sk-provider"))
	if _, err := anthropicClient(p, "sk-client-secret").Messages.New(ctxTimeout(t, 5*time.Second), anthropicParams("claude-test")); err != nil {
		t.Fatal(err)
	}
	if _, err := openaiClient(p, "sk-client-secret").Chat.Completions.New(ctxTimeout(t, 5*time.Second), openaiParams("gpt-test")); err != nil {
		t.Fatal(err)
	}
	for _, r := range keyed.Requests() {
		if strings.Contains(r.APIKey+r.Authorization, "sk-client-secret") {
			t.Fatalf("client key forwarded: x-api-key=%q authorization=%q", r.APIKey, r.Authorization)
		}
	}

	open := newUpstream(t, sim.Config{Key: "sk-client-secret"})
	p = startProxy(t, provider("passthrough", open))
	if _, err := anthropicClient(p, "sk-client-secret").Messages.New(ctxTimeout(t, 5*time.Second), anthropicParams("claude-test")); err != nil {
		t.Fatalf("pass-through key: %v", err)
	}
}

// Bad input gets an error in the client's dialect, with the right status.
func TestBadInput(t *testing.T) {
	up := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("only", up)+"max_body 1KiB")
	cases := []struct {
		name, method, path, body string
		status                   int
		want                     string
	}{
		{"malformed json", "POST", "/v1/messages", `{"model":`, 400, `"type":"invalid_request_error"`},
		{"missing model", "POST", "/v1/messages", `{"max_tokens":5,"messages":[]}`, 400, `model`},
		{"too large", "POST", "/v1/chat/completions", `{"model":"x","pad":"` + strings.Repeat("a", 2048) + `"}`, 413, `"code":"request_too_large"`},
		{"GET on messages", "GET", "/v1/messages", ``, 405, `"type":"error"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, p.URL+tc.path, strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var b strings.Builder
			_, _ = fmt.Fprint(&b, readAll(resp))
			if resp.StatusCode != tc.status || !strings.Contains(b.String(), tc.want) {
				t.Fatalf("status %d body %s; want %d containing %s", resp.StatusCode, b.String(), tc.status, tc.want)
			}
		})
	}
	if n := completions(up); n != 0 {
		t.Fatalf("bad input reached the provider %d times", n)
	}
}
