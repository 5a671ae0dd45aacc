package e2e

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"google.golang.org/genai"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// contextClient is one SDK of a dialect: ask sends one request, streamed
// or not, and returns the answer's text, or the HTTP status of the SDK's
// API error (0 for another error, in err).
type contextClient struct {
	name  string
	ask   func(t *testing.T, p *proxy, model string, stream bool) (text string, status int, err error)
	calls func(u *upstream) int
}

var contextClients = []contextClient{
	{"anthropic", func(t *testing.T, p *proxy, model string, stream bool) (string, int, error) {
		c := anthropicClient(p, "k")
		var m anthropic.Message
		var err error
		if stream {
			m, err = streamAnthropic(ctxTimeout(t, 10*time.Second), c, anthropicParams(model))
		} else {
			var mp *anthropic.Message
			if mp, err = c.Messages.New(ctxTimeout(t, 10*time.Second), anthropicParams(model)); mp != nil {
				m = *mp
			}
		}
		var apiErr *anthropic.Error
		if errors.As(err, &apiErr) {
			return "", apiErr.StatusCode, err
		}
		return messageText(m), 0, err
	}, completions},
	{"openai", func(t *testing.T, p *proxy, model string, stream bool) (string, int, error) {
		c := openaiClient(p, "k")
		var text string
		var err error
		if stream {
			var acc openai.ChatCompletionAccumulator
			if acc, err = streamOpenAI(ctxTimeout(t, 10*time.Second), c, openaiParams(model)); len(acc.Choices) > 0 {
				text = acc.Choices[0].Message.Content
			}
		} else {
			var cc *openai.ChatCompletion
			if cc, err = c.Chat.Completions.New(ctxTimeout(t, 10*time.Second), openaiParams(model)); cc != nil && len(cc.Choices) > 0 {
				text = cc.Choices[0].Message.Content
			}
		}
		var apiErr *openai.Error
		if errors.As(err, &apiErr) {
			return "", apiErr.StatusCode, err
		}
		return text, 0, err
	}, completions},
	{"responses", func(t *testing.T, p *proxy, model string, stream bool) (string, int, error) {
		c := openaiClient(p, "k")
		var text string
		var err error
		if stream {
			got := streamResponses(ctxTimeout(t, 10*time.Second), c, responsesParams(model))
			text, err = got.text, got.err
		} else {
			r, e := c.Responses.New(ctxTimeout(t, 10*time.Second), responsesParams(model))
			if err = e; r != nil {
				text = r.OutputText()
			}
		}
		var apiErr *openai.Error
		if errors.As(err, &apiErr) {
			return "", apiErr.StatusCode, err
		}
		return text, 0, err
	}, responsesCalls},
	{"gemini", func(t *testing.T, p *proxy, model string, stream bool) (string, int, error) {
		text, _, err := geminiGenerate(ctxTimeout(t, 10*time.Second), geminiClient(t, p, "k"), model, stream)
		var apiErr genai.APIError
		if errors.As(err, &apiErr) {
			return "", apiErr.Code, err
		}
		return text, 0, err
	}, geminiCompletions},
}

// contextProxy fronts two providers: "small" serves small-model and
// answers with the fault, "big" serves big-model; retryBlock goes into the
// retry block.
func contextProxy(t *testing.T, fault sim.Fault, retryBlock string) (p *proxy, small, big *upstream) {
	small = newUpstream(t, sim.Config{Faults: []sim.Fault{fault}})
	big = newUpstream(t, sim.Config{})
	p = startProxy(t, provider("small", small, "models small-*", "key sk-op")+provider("big", big, "models big-model", "key sk-op")+
		"hedge off\n retry {\n attempts 3\n backoff 10ms 20ms\n"+retryBlock+" }\n")
	return p, small, big
}

var tooLong = sim.Fault{Kind: sim.FaultContextLength, Model: "small-*"}

// A prompt too long for the small model is answered by the large one, in
// every dialect, streamed or not: the small provider saw one request, the
// large one one, and the decision chain ends with context_fallback.
func TestContextFallbackAnswersWithLargerModel(t *testing.T) {
	for _, cl := range contextClients {
		t.Run(cl.name, func(t *testing.T) {
			p, small, big := contextProxy(t, tooLong, " context_fallback small-* big-model\n")
			for i, stream := range []bool{false, true} {
				text, status, err := cl.ask(t, p, "small-model", stream)
				if err != nil || text != wantText {
					t.Fatalf("stream=%v: %q, status %d, %v", stream, text, status, err)
				}
				l := retryLastLog(t, p, i+1)
				if len(l.Chain) != 2 || l.Chain[0].Provider != "small" || l.Chain[0].Status != 400 ||
					l.Chain[1].Event != "context_fallback" || l.Chain[1].Provider != "big" {
					t.Fatalf("stream=%v: chain %+v: want small's 400, then context_fallback on big", stream, l.Chain)
				}
			}
			if s, b := cl.calls(small), cl.calls(big); s != 2 || b != 2 {
				t.Fatalf("small got %d requests, big %d: want exactly one of each per request (2, 2)", s, b)
			}
			if cl.name == "gemini" {
				for _, r := range big.Requests() {
					if !strings.HasPrefix(r.Path, "/v1beta/models/big-model:") || r.Model != "big-model" {
						t.Errorf("fallback request %s for %q: want the large model in the path", r.Path, r.Model)
					}
				}
			}
		})
	}
}

// A 400 that is not about the prompt's length passes through after one
// attempt, rule or not; a too-long 400 without a rule for the model, or
// with no provider of its <to>, passes through too.
func TestContextFallbackOnlyForTooLong(t *testing.T) {
	cases := []struct {
		name  string
		fault sim.Fault
		rule  string
	}{
		{"other 400", sim.Fault{Kind: sim.FaultStatus, Status: 400, Message: "messages: roles must alternate"}, " context_fallback small-* big-model\n"},
		{"no rule", tooLong, ""},
		{"rule for another model", tooLong, " context_fallback tiny-* big-model\n"},
		{"no provider of to", tooLong, " context_fallback small-* huge-model\n"},
	}
	for _, cl := range contextClients {
		for _, tc := range cases {
			t.Run(cl.name+"/"+tc.name, func(t *testing.T) {
				p, small, big := contextProxy(t, tc.fault, tc.rule)
				for _, stream := range []bool{false, true} {
					if _, status, err := cl.ask(t, p, "small-model", stream); status != 400 {
						t.Fatalf("stream=%v: status %d, %v: want the 400 passed through", stream, status, err)
					}
				}
				if s, b := cl.calls(small), cl.calls(big); s != 2 || b != 0 {
					t.Fatalf("small got %d requests, big %d: want one attempt per request (2, 0)", s, b)
				}
			})
		}
	}
}

// The large model's own too-long 400 is the answer: the rescue happens
// once, never a second time, and it counts in retry.attempts.
func TestContextFallbackOnce(t *testing.T) {
	small := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultContextLength}}})
	big := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultContextLength}}})
	p := startProxy(t, provider("small", small, "models small-*")+provider("big", big, "models big-*")+
		"hedge off\n retry {\n attempts 5\n context_fallback small-* big-model\n context_fallback big-* big-huge\n }\n")
	_, status, err := contextClients[0].ask(t, p, "small-model", false)
	if status != 400 {
		t.Fatalf("status %d, %v: want the large model's 400", status, err)
	}
	if s, b := completions(small), completions(big); s != 1 || b != 1 {
		t.Fatalf("small got %d requests, big %d: want one each", s, b)
	}
	// With one attempt allowed, there is no rescue.
	p1 := startProxy(t, provider("small", small, "models small-*")+provider("big", newUpstream(t, sim.Config{}), "models big-model")+
		"hedge off\n retry {\n attempts 1\n context_fallback small-* big-model\n }\n")
	if _, status, err := contextClients[0].ask(t, p1, "small-model", false); status != 400 {
		t.Fatalf("attempts 1: status %d, %v: want the 400", status, err)
	}
}

// With hedging on (a streaming request races), the rescue is the same:
// one attempt on the small model, then the large model answers.
func TestContextFallbackHedged(t *testing.T) {
	small := newUpstream(t, sim.Config{Faults: []sim.Fault{tooLong}})
	big := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("small", small, "models small-*")+provider("big", big, "models big-model")+
		"retry {\n attempts 3\n context_fallback small-* big-model\n }\n")
	m, err := streamAnthropic(ctxTimeout(t, 10*time.Second), anthropicClient(p, "k"), anthropicParams("small-model"))
	if err != nil || messageText(m) != wantText || string(m.Model) != "big-model" {
		t.Fatalf("%q from %q, %v: want the large model's answer", messageText(m), m.Model, err)
	}
	if s, b := completions(small), completions(big); s != 1 || b != 1 {
		t.Fatalf("small got %d requests, big %d: want one each", s, b)
	}
}
