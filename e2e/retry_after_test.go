package e2e

import (
	"encoding/json"
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

// When every provider failed with a Retry-After, each is open for its own
// wait, and the client is told the earliest: first's 30 s, not the 40 s
// of the provider tried last (its SDK would wait 10 s past first's
// return). A second request, which probes first, says the same.
func TestRetryAfterEarliestProvider(t *testing.T) {
	for _, status := range []int{429, 503, 529} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			fault := func(ra string) sim.Config {
				return sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: status, RetryAfter: ra}}}
			}
			first, last := newUpstream(t, fault("30")), newUpstream(t, fault("40"))
			want := http.StatusServiceUnavailable // every provider failed
			if status == http.StatusTooManyRequests {
				want = status // the status every provider agreed on
			}
			p := startProxy(t, provider("first", first, "priority 1", "key sk-first")+
				provider("last", last, "priority 2", "key sk-last"))
			ctx := ctxTimeout(t, 10*time.Second)

			_, err := anthropicClient(p, "k").Messages.New(ctx, anthropicParams("claude-test"))
			var aerr *anthropic.Error
			if !errors.As(err, &aerr) || aerr.StatusCode != want {
				t.Fatalf("anthropic: want %d, got %v", want, err)
			}
			if got := aerr.Response.Header.Get("Retry-After"); got != "30" {
				t.Errorf("anthropic: Retry-After %q, want 30 (first is back then; last said 40)", got)
			}
			if completions(first) != 1 || completions(last) != 1 {
				t.Fatalf("attempts first %d last %d, want one each", completions(first), completions(last))
			}

			_, err = streamOpenAI(ctx, openaiClient(p, "k"), openaiParams("gpt-test"))
			var oerr *openai.Error
			if !errors.As(err, &oerr) || oerr.StatusCode != want {
				t.Fatalf("openai: want %d, got %v", want, err)
			}
			if got := oerr.Response.Header.Get("Retry-After"); got != "30" {
				t.Errorf("openai: Retry-After %q, want 30", got)
			}
		})
	}
}

// A provider alone keeps its own word: its Retry-After of 600 s reaches
// the client, not the 5 min its breaker is capped at.
func TestRetryAfterOneProviderKeepsItsOwn(t *testing.T) {
	only := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 429, RetryAfter: "600"}}})
	p := startProxy(t, provider("only", only, "key sk-only"))
	_, err := anthropicClient(p, "k").Messages.New(ctxTimeout(t, 10*time.Second), anthropicParams("claude-test"))
	var aerr *anthropic.Error
	if !errors.As(err, &aerr) || aerr.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("want 429, got %v", err)
	}
	if got := aerr.Response.Header.Get("Retry-After"); got != "600" {
		t.Errorf("Retry-After %q, want the provider's 600", got)
	}
}

// A provider whose 429 said when to come back is not asked before then,
// even when every candidate is open and the all-open probe would pick it:
// each later request gets 429 and the time left, with no upstream request
// (SPEC 14: a provider whose keys are cooling is skipped; one key behaves
// as a pool of one; before, every request sent it one). A 503 or 529's
// Retry-After opens the breaker, which the probe may force (SPEC 4,
// TestHealthAllOpenProbesEarliest); a client's own key's 429 is that
// client's and cools nothing.
func TestRetryAfterHonouredWhenEveryCandidateIsOpen(t *testing.T) {
	only := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 429, RetryAfter: "30"}}})
	p := startProxy(t, provider("only", only, "key sk-only"))
	for i := range 3 {
		_, err := anthropicClient(p, "k").Messages.New(ctxTimeout(t, 10*time.Second), anthropicParams("claude-test"))
		var aerr *anthropic.Error
		if !errors.As(err, &aerr) || aerr.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("request %d: want 429, got %v", i+1, err)
		}
		if got := aerr.Response.Header.Get("Retry-After"); got != "30" && got != "29" {
			t.Errorf("request %d: Retry-After %q, want the time left of the provider's 30 s", i+1, got)
		}
	}
	if n := completions(only); n != 1 {
		t.Fatalf("the provider got %d requests within its Retry-After, want 1", n)
	}
}

// The last provider's Retry-After binds only itself: when another
// candidate could be tried at once (its breaker closed after a plain 503),
// the client's answer carries none, and its SDK's own backoff applies, not
// a 30 s wait for a provider it does not need.
func TestRetryAfterNotGivenWhileAnotherCandidateIsClosed(t *testing.T) {
	plain := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 503}}})
	limited := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 429, RetryAfter: "30"}}})
	p := startProxy(t, provider("plain", plain, "priority 1", "key sk-plain")+
		provider("limited", limited, "priority 2", "key sk-limited"))
	_, err := anthropicClient(p, "k").Messages.New(ctxTimeout(t, 10*time.Second), anthropicParams("claude-test"))
	var aerr *anthropic.Error
	if !errors.As(err, &aerr) || aerr.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("want 503, got %v", err)
	}
	if completions(plain) == 0 || completions(limited) != 1 {
		t.Fatalf("attempts plain %d limited %d, want both tried, the limited one last", completions(plain), completions(limited))
	}
	if got := aerr.Response.Header.Get("Retry-After"); got != "" {
		t.Errorf("Retry-After %q, want none: the plain provider may be tried at once", got)
	}
}

// A Gemini client's 429 carries the Retry-After in its body too, as a
// google.rpc.RetryInfo detail: Gemini CLI reads the delay only there
// (TestGeminiCLIRetryAfterLong runs the CLI). The header and the detail
// say the same.
func TestRetryAfterGeminiRetryInfo(t *testing.T) {
	only := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 429, RetryAfter: "600"}}})
	p := startProxy(t, provider("only", only, "key sk-only"))
	for i := range 2 { // the failure itself, then the cooling provider skipped
		req, _ := http.NewRequest(http.MethodPost, p.URL+"/v1beta/models/gemini-2.5-flash:generateContent",
			strings.NewReader(`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Error struct {
				Details []map[string]string `json:"details"`
			} `json:"error"`
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		ra := resp.Header.Get("Retry-After")
		if err != nil || resp.StatusCode != http.StatusTooManyRequests || ra == "" {
			t.Fatalf("request %d: status %d, Retry-After %q, decode %v; want 429 with a Retry-After", i, resp.StatusCode, ra, err)
		}
		d := body.Error.Details
		if len(d) != 1 || d[0]["@type"] != "type.googleapis.com/google.rpc.RetryInfo" || d[0]["retryDelay"] != ra+"s" {
			t.Errorf("request %d: details %v, want one RetryInfo with retryDelay %ss", i, d, ra)
		}
	}
}
