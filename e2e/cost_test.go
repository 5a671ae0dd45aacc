package e2e

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// What reliability costs (docs/cost.md): every attempt's tokens by
// purpose, priced at the operator's price lines. The collectors are shared
// by every proxy of the test binary, so each test names its providers
// apart and reads its own series.

// costSeries is one series of the purpose metrics in the text exposition
// (labels sorted by name).
func costTokens(provider, purpose, kind string) string {
	return fmt.Sprintf(`caddy_llm_hedge_purpose_tokens_total{kind=%q,provider=%q,purpose=%q}`, kind, provider, purpose)
}

func costSpend(provider, purpose string) string {
	return fmt.Sprintf(`caddy_llm_hedge_spend_usd_total{provider=%q,purpose=%q}`, provider, purpose)
}

// costNear reports whether two dollar amounts agree to a billionth (the
// counters add float64s).
func costNear(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// A hedged stream: the slow primary sent its message_start (with its
// input tokens) before the hedge won, so its input counts under the hedge
// purpose, read from its own usage event, not estimated; the answer's
// tokens under the answer; each priced; the log line carries the
// request's spend and the part reliability cost.
func TestCostHedgeLoserInput(t *testing.T) {
	primary := newUpstream(t, sim.Config{FirstToken: caddyDur(30 * time.Second)})
	alt := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("cost-hedge-primary", primary, "priority 0")+provider("cost-hedge-alt", alt, "priority 1")+
		"hedge {\n after 200ms\n }\nprice claude-* input 3 output 15\n")

	m, err := streamAnthropic(ctxTimeout(t, 20*time.Second), anthropicClient(p, "k"), anthropicParams("claude-test"))
	if err != nil {
		t.Fatal(err)
	}
	in, out := float64(m.Usage.InputTokens), float64(m.Usage.OutputTokens)
	if in == 0 || out == 0 {
		t.Fatalf("the answer reported no usage: %+v", m.Usage)
	}
	// The loser's input is the same prompt's, as its own message_start said.
	if got := metricReaches(t, p, costTokens("cost-hedge-primary", "hedge", "input"), in); got != in {
		t.Fatalf("hedge input tokens %v, want the loser's own %v", got, in)
	}
	if got := metricValue(t, p, costTokens("cost-hedge-primary", "hedge", "input_estimated")); got != 0 {
		t.Fatalf("hedge input estimated %v, want none: the loser reported its usage", got)
	}
	if got := metricValue(t, p, costTokens("cost-hedge-alt", "answer", "output")); got != out {
		t.Fatalf("answer output tokens %v, want %v", got, out)
	}
	hedgeUSD, answerUSD := in*3/1e6, (in*3+out*15)/1e6
	if got := metricValue(t, p, costSpend("cost-hedge-primary", "hedge")); !costNear(got, hedgeUSD) {
		t.Fatalf("hedge spend $%v, want $%v", got, hedgeUSD)
	}
	if got := metricValue(t, p, costSpend("cost-hedge-alt", "answer")); !costNear(got, answerUSD) {
		t.Fatalf("answer spend $%v, want $%v", got, answerUSD)
	}
	l := logLines(t, p, "llm request", 1)[0]
	if got, _ := l["spend_usd"].(float64); !costNear(got, math.Round((hedgeUSD+answerUSD)*1e6)/1e6) {
		t.Fatalf("log spend_usd %v, want %v", l["spend_usd"], hedgeUSD+answerUSD)
	}
	if got, _ := l["overhead_usd"].(float64); !costNear(got, math.Round(hedgeUSD*1e6)/1e6) {
		t.Fatalf("log overhead_usd %v, want %v", l["overhead_usd"], hedgeUSD)
	}
}

// A stream cut after commit and continued on another provider: the
// continuation's tokens (its whole prompt again, and its output) count
// under the continuation purpose, priced; the cut winner's under the
// answer.
func TestCostContinuation(t *testing.T) {
	cut := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultCut, After: 3}}})
	rest := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("cost-cont-cut", cut, "priority 0")+provider("cost-cont-rest", rest, "priority 1")+
		"price * input 1 output 4\n")

	m, err := streamAnthropic(ctxTimeout(t, 20*time.Second), anthropicClient(p, "k"), anthropicParams("claude-test"))
	if err != nil {
		t.Fatal(err)
	}
	if got := messageText(m); got != wantText {
		t.Fatalf("text %q, want %q", got, wantText)
	}
	cin := metricReaches(t, p, costTokens("cost-cont-rest", "continuation", "input"), 1)
	cout := metricValue(t, p, costTokens("cost-cont-rest", "continuation", "output"))
	if cin == 0 || cout == 0 {
		t.Fatalf("continuation tokens: input %v, output %v; want both", cin, cout)
	}
	if got, want := metricValue(t, p, costSpend("cost-cont-rest", "continuation")), (cin*1+cout*4)/1e6; !costNear(got, want) {
		t.Fatalf("continuation spend $%v, want $%v", got, want)
	}
	if got := metricValue(t, p, costTokens("cost-cont-cut", "answer", "input")); got == 0 {
		t.Fatal("the cut winner's input is not counted under the answer")
	}
}

// Spend is tokens times price for every dialect, stream and non-stream:
// the input price on the uncached prompt (OpenAI and Gemini fold the cached
// part into their prompt count), the cache-read price on the cached part,
// the output price on the output, each as the official SDK read the usage.
func TestCostEveryDialect(t *testing.T) {
	const inP, outP, readP = 2.0, 10.0, 0.5
	for _, tc := range []struct {
		dialect string
		ask     func(t *testing.T, p *proxy, stream bool) (uncached, cached, out float64)
	}{
		{"anthropic", func(t *testing.T, p *proxy, stream bool) (float64, float64, float64) {
			var m anthropic.Message
			var err error
			if stream {
				m, err = streamAnthropic(ctxTimeout(t, 10*time.Second), anthropicClient(p, "k"), anthropicParams("claude-test"))
			} else {
				var r *anthropic.Message
				r, err = anthropicClient(p, "k").Messages.New(ctxTimeout(t, 10*time.Second), anthropicParams("claude-test"))
				if r != nil {
					m = *r
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			return float64(m.Usage.InputTokens), float64(m.Usage.CacheReadInputTokens), float64(m.Usage.OutputTokens)
		}},
		{"openai", func(t *testing.T, p *proxy, stream bool) (float64, float64, float64) {
			params := openaiParams("gpt-test")
			var u openai.CompletionUsage
			if stream {
				params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
				acc, err := streamOpenAI(ctxTimeout(t, 10*time.Second), openaiClient(p, "k"), params)
				if err != nil {
					t.Fatal(err)
				}
				u = acc.Usage
			} else {
				r, err := openaiClient(p, "k").Chat.Completions.New(ctxTimeout(t, 10*time.Second), params)
				if err != nil {
					t.Fatal(err)
				}
				u = r.Usage
			}
			cached := u.PromptTokensDetails.CachedTokens
			return float64(u.PromptTokens - cached), float64(cached), float64(u.CompletionTokens)
		}},
		{"responses", func(t *testing.T, p *proxy, stream bool) (float64, float64, float64) {
			var u responses.ResponseUsage
			if stream {
				s := openaiClient(p, "k").Responses.NewStreaming(ctxTimeout(t, 10*time.Second), responsesParams("gpt-test"))
				for s.Next() {
					if ev := s.Current(); ev.Type == "response.completed" {
						u = ev.Response.Usage
					}
				}
				if err := s.Err(); err != nil {
					t.Fatal(err)
				}
				s.Close()
			} else {
				r, err := openaiClient(p, "k").Responses.New(ctxTimeout(t, 10*time.Second), responsesParams("gpt-test"))
				if err != nil {
					t.Fatal(err)
				}
				u = r.Usage
			}
			cached := u.InputTokensDetails.CachedTokens
			return float64(u.InputTokens - cached), float64(cached), float64(u.OutputTokens)
		}},
		{"gemini", func(t *testing.T, p *proxy, stream bool) (float64, float64, float64) {
			_, um, err := geminiGenerate(ctxTimeout(t, 10*time.Second), geminiClient(t, p, "k"), "gemini-test", stream)
			if err != nil {
				t.Fatal(err)
			}
			if um == nil {
				t.Fatal("no usage metadata")
			}
			cached := um.CachedContentTokenCount
			return float64(um.PromptTokenCount - cached), float64(cached), float64(um.CandidatesTokenCount + um.ThoughtsTokenCount)
		}},
	} {
		for _, stream := range []bool{false, true} {
			name := fmt.Sprintf("%s/stream=%v", tc.dialect, stream)
			t.Run(name, func(t *testing.T) {
				u := newUpstream(t, sim.Config{CacheRead: 5})
				prov := fmt.Sprintf("cost-%s-%v", tc.dialect, stream)
				p := startProxy(t, provider(prov, u, "api "+tc.dialect)+
					fmt.Sprintf("price * input %v output %v cache_read %v\n", inP, outP, readP))
				uncached, cached, out := tc.ask(t, p, stream)
				if uncached <= 0 || out <= 0 || cached != 5 {
					t.Fatalf("the SDK read uncached %v, cached %v, output %v", uncached, cached, out)
				}
				want := (uncached*inP + cached*readP + out*outP) / 1e6
				metricReaches(t, p, costTokens(prov, "answer", "output"), out)
				if got := metricValue(t, p, costTokens(prov, "answer", "input")); got != uncached {
					t.Errorf("input tokens %v, want the uncached %v", got, uncached)
				}
				if got := metricValue(t, p, costTokens(prov, "answer", "cache_read")); got != cached {
					t.Errorf("cache_read tokens %v, want %v", got, cached)
				}
				if got := metricValue(t, p, costSpend(prov, "answer")); !costNear(got, want) {
					t.Errorf("spend $%v, want $%v", got, want)
				}
			})
		}
	}
}

// Without a price nothing is money: the tokens are counted by purpose, no
// spend series exists for the provider, and the log line has no spend.
func TestCostNoPriceNoSpend(t *testing.T) {
	u := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("cost-unpriced", u)+"price gpt-* input 1 output 1\n")
	if _, err := streamAnthropic(ctxTimeout(t, 10*time.Second), anthropicClient(p, "k"), anthropicParams("claude-test")); err != nil {
		t.Fatal(err)
	}
	metricReaches(t, p, costTokens("cost-unpriced", "answer", "output"), 1)
	_, _, body := healthAdmin(t, p, "GET", "/metrics")
	if strings.Contains(body, `caddy_llm_hedge_spend_usd_total{provider="cost-unpriced"`) {
		t.Fatal("a spend series for a model no price matches")
	}
	l := logLines(t, p, "llm request", 1)[0]
	if _, ok := l["spend_usd"]; ok {
		t.Fatalf("log line has spend_usd without a price: %v", l)
	}
}
