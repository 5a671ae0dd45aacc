package llmhedge

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func parseHandler(input string) (*Handler, error) {
	h := new(Handler)
	err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(input))
	return h, err
}

func TestCaddyfileGood(t *testing.T) {
	h, err := parseHandler(`llm_hedge {
		provider anthropic https://api.anthropic.com {
			api anthropic
			key {env.ANTHROPIC_API_KEY}
			vendor anthropic
			priority 0
			weight 3
			models claude-* 
			model claude-opus-* claude-opus-4-1
			model * claude-sonnet-4-5
			header_up +X-Team ai
			header_up -X-Debug
			max_in_flight 64
			first_byte_timeout 20s
		}
		provider openai https://api.openai.com/ {
			api openai
			priority 1
		}
		timeouts {
			connect 3s
			first_byte 30s
			response 5m
			idle 45s
			total 10m
		}
		hedge {
			after p95
			min 200ms
			max 4s
			max_attempts 3
			budget 5
		}
		retry {
			attempts 5
			same_provider 0
			backoff 250ms 4s
			retry_after_max 10s
			budget 15%
			fallback_model claude-opus-* claude-sonnet-4-5
		}
		cooldown {
			failures 5
			duration 10s
			max 2m
		}
		stream {
			reject "I cannot help" "As an AI"
			drop_malformed off
			max_buffer 512KiB
		}
		affinity header X-Session ttl 30m
		lb_policy weighted_random
		max_body 8MiB
	}`)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Providers) != 2 {
		t.Fatalf("providers = %d", len(h.Providers))
	}
	a := h.Providers[0]
	checks := []struct {
		name      string
		got, want any
	}{
		{"api", a.API, "anthropic"},
		{"key", a.Key, "{env.ANTHROPIC_API_KEY}"},
		{"weight", a.Weight, 3},
		{"models", strings.Join(a.Models, ","), "claude-*"},
		{"model rules", len(a.ModelMap), 2},
		{"catch-all last", a.ModelMap[1], ModelRule{From: "*", To: "claude-sonnet-4-5"}},
		{"header_up add", a.HeadersUp.Add.Get("X-Team"), "ai"},
		{"header_up delete", strings.Join(a.HeadersUp.Delete, ","), "X-Debug"},
		{"max_in_flight", a.MaxInFlight, 64},
		{"first_byte_timeout", a.FirstByteTimeout, caddy.Duration(20 * time.Second)},
		{"priority", h.Providers[1].Priority, 1},
		{"connect", h.Timeouts.Connect, caddy.Duration(3 * time.Second)},
		{"idle", h.Timeouts.Idle, caddy.Duration(45 * time.Second)},
		{"hedge percentile", h.Hedge.Percentile, 95.0},
		{"hedge max_attempts", h.Hedge.MaxAttempts, 3},
		{"hedge budget", *h.Hedge.Budget, 5.0},
		{"retry attempts", h.Retry.Attempts, 5},
		{"same_provider", *h.Retry.SameProvider, 0},
		{"backoff base", h.Retry.BackoffBase, caddy.Duration(250 * time.Millisecond)},
		{"retry budget", *h.Retry.Budget, 15.0},
		{"fallback", h.Retry.FallbackModels[0].To, "claude-sonnet-4-5"},
		{"cooldown failures", h.Cooldown.Failures, 5},
		{"cooldown max", h.Cooldown.Max, caddy.Duration(2 * time.Minute)},
		{"reject", strings.Join(h.Stream.Reject, "|"), "I cannot help|As an AI"},
		{"drop_malformed", *h.Stream.DropMalformed, false},
		{"max_buffer", h.Stream.MaxBuffer, int64(512 << 10)},
		{"affinity header", h.Affinity.Header, "X-Session"},
		{"affinity ttl", h.Affinity.TTL, caddy.Duration(30 * time.Minute)},
		{"lb_policy", h.LBPolicy, "weighted_random"},
		{"max_body", h.MaxBody, int64(8 << 20)},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if err := h.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}

	h, err = parseHandler("llm_hedge {\n provider a http://127.0.0.1:1\n hedge off\n affinity off\n}")
	if err != nil || !h.Hedge.Off || !h.Affinity.Off {
		t.Fatalf("one-line forms: %v %+v %+v", err, h.Hedge, h.Affinity)
	}
	h, err = parseHandler("llm_hedge {\n provider a http://127.0.0.1:1\n hedge {\n after 300ms\n }\n}")
	if err != nil || h.Hedge.Delay != caddy.Duration(300*time.Millisecond) || h.Hedge.Percentile != 0 {
		t.Fatalf("fixed hedge delay: %v %+v", err, h.Hedge)
	}
}

// Every mistake names its line and says what is wrong.
func TestCaddyfileBad(t *testing.T) {
	const p = "provider a http://127.0.0.1:1\n"
	cases := []struct {
		name, body string
		line       int
		want       string
	}{
		{"no provider", "", 2, "at least one provider"},
		{"unknown subdirective", p + "retyr 2\n", 3, `unknown subdirective "retyr"`},
		{"price without output", p + "price claude-* input 3\n", 3, "price: want <model-glob> input"},
		{"price missing output", p + "price claude-* input 3 cache_read 1\n", 3, "input and output are required"},
		{"price negative", p + "price claude-* input -3 output 1\n", 3, `"-3" is not a price`},
		{"price unknown field", p + "price claude-* input 3 outptu 1\n", 3, `unknown field "outptu"`},
		{"price twice a field", p + "price * input 3 input 4 output 1\n", 3, "input given twice"},
		{"price bad glob", p + "price claude-[ input 3 output 1\n", 3, "model glob"},
		{"provider price", "provider a http://x {\n price x input 1\n}\n", 3, "price: want"},
		{"hedge budget tokens typo", p + "hedge {\n budget 10% token\n}\n", 4, "want <percent>% [tokens]"},
		{"hedge large_prompt", p + "hedge {\n large_prompt 100k\n}\n", 4, "want <tokens> <delay>"},
		{"hedge large_prompt zero", p + "hedge {\n large_prompt 0 20s\n}\n", 4, "is not a token count"},
		{"hedge off with large_prompt", p + "hedge {\n large_prompt 100k 20s\n off\n}\n", 5, "off conflicts with large_prompt"},
		{"duplicate provider", p + p, 3, "duplicate name"},
		{"provider args", "provider a\n", 2, "want <name> <base_url>"},
		{"bad scheme", "provider a ftp://x\n", 2, "http:// or https://"},
		{"unknown provider option", "provider a http://x {\n wieght 2\n}\n", 3, `unknown option "wieght"`},
		{"bad api", "provider a http://x {\n api gcp\n}\n", 3, `api: "gcp" is not one of anthropic, gemini, openai, responses, chat, azure, bedrock, vertex`},
		{"weight zero", "provider a http://x {\n weight 0\n}\n", 3, "below the minimum"},
		{"model one arg", "provider a http://x {\n model gpt-4\n}\n", 3, "want <from|*> <to>"},
		{"bad duration", p + "timeouts {\n idle soon\n}\n", 4, "not a duration"},
		{"negative duration", p + "timeouts {\n idle -5s\n}\n", 4, "must be positive"},
		{"unknown timeout", p + "timeouts {\n read 5s\n}\n", 4, `unknown option "read"`},
		{"max_attempts 0", p + "hedge {\n max_attempts 0\n}\n", 4, "below the minimum"},
		{"max_attempts 6", p + "hedge {\n max_attempts 6\n}\n", 4, "above 5"},
		{"hedge after", p + "hedge {\n after p100\n}\n", 4, "percentile"},
		{"budget > 100", p + "hedge {\n budget 150\n}\n", 4, "between 0 and 100"},
		{"retry budget", p + "retry {\n budget -1\n}\n", 4, "between 0 and 100"},
		{"backoff", p + "retry {\n backoff 5s 1s\n}\n", 4, "base <= max"},
		{"fallback args", p + "retry {\n fallback_model a\n}\n", 4, "want <from> <to>"},
		{"cooldown", p + "cooldown {\n failures x\n}\n", 4, "not an integer"},
		{"stream", p + "stream {\n drop_malformed maybe\n}\n", 4, "want on or off"},
		{"resume word", p + "stream {\n resume always\n}\n", 4, "want a count >= 0 or off"},
		{"resume negative", p + "stream {\n resume -1\n}\n", 4, "want a count >= 0 or off"},
		{"resume args", p + "stream {\n resume 1 2\n}\n", 4, "wrong argument count"},
		{"prefill", "provider a http://x {\n prefill maybe\n}\n", 3, "prefill: want on or off"},
		{"size", p + "max_body lots\n", 3, "not a size"},
		{"affinity", p + "affinity sticky\n", 3, "affinity: want"},
		{"lb_policy unknown", p + "lb_policy least_conn\n", 3, `lb_policy "least_conn": want adaptive, weighted_random or first`},
		{"lb_policy args", p + "lb_policy first adaptive\n", 3, "wrong argument count"},
		{"lb_policy twice", p + "lb_policy first\nlb_policy adaptive\n", 4, "lb_policy: given twice"},
		{"extra args", p + "max_body 1MiB 2MiB\n", 3, "exactly one argument"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msg := refusedAt(t, tc.body, tc.want)
			if !strings.Contains(msg, "Testfile:"+itoa(tc.line)) {
				t.Errorf("error %q does not name line %d", msg, tc.line)
			}
		})
	}
}

// refusedAt parses an llm_hedge block whose body must be refused with an
// error that says want, and returns the error's text.
func refusedAt(t *testing.T, body, want string) string {
	t.Helper()
	_, err := parseHandler("llm_hedge {\n" + body + "}")
	if err == nil {
		t.Fatal("accepted")
	}
	msg := err.Error()
	if !strings.Contains(msg, want) {
		t.Errorf("error %q does not say %q", msg, want)
	}
	return msg
}

func itoa(n int) string { return strconv.Itoa(n) }

// context_fallback is repeatable; a line without <from> <to> is refused
// with its line number.
func TestCaddyfileContextFallback(t *testing.T) {
	const p = "provider a http://127.0.0.1:1\n"
	h, err := parseHandler("llm_hedge {\n" + p + "retry {\n context_fallback claude-haiku-* claude-sonnet-4-5\n context_fallback gpt-4o-mini gpt-4.1\n}\n}")
	if err != nil {
		t.Fatal(err)
	}
	want := []ModelRule{{From: "claude-haiku-*", To: "claude-sonnet-4-5"}, {From: "gpt-4o-mini", To: "gpt-4.1"}}
	if !slices.Equal(h.Retry.ContextFallbacks, want) {
		t.Fatalf("context_fallbacks %+v, want %+v", h.Retry.ContextFallbacks, want)
	}
	for _, body := range []string{"context_fallback a\n", "context_fallback a b c\n", "context_fallback\n"} {
		_, err := parseHandler("llm_hedge {\n" + p + "retry {\n attempts 3\n " + body + "}\n}")
		if err == nil {
			t.Fatalf("%q accepted", body)
		}
		if msg := err.Error(); !strings.Contains(msg, "context_fallback: want <from> <to>") || !strings.Contains(msg, "Testfile:5") {
			t.Errorf("%q: error %q, want the option and line 5 named", body, msg)
		}
	}
	c := RetryConfig{ContextFallbacks: []ModelRule{{From: "a"}}}
	c.setDefaults()
	if err := c.validate(); err == nil || !strings.Contains(err.Error(), "context_fallback") {
		t.Error("a context_fallback without <to> validated")
	}
}

// stream.resume takes a count or off; a provider's prefill is on or off,
// and defaults by api.
func TestCaddyfileResume(t *testing.T) {
	h, err := parseHandler("llm_hedge {\nprovider a http://127.0.0.1:1 {\n prefill on\n}\nprovider b http://127.0.0.1:2\nstream {\n resume 2\n}\n}")
	if err != nil {
		t.Fatal(err)
	}
	if *h.Stream.Resume != 2 || h.Providers[0].Prefill == nil || !*h.Providers[0].Prefill || h.Providers[1].Prefill != nil {
		t.Fatalf("resume %v, prefill %v %v", *h.Stream.Resume, h.Providers[0].Prefill, h.Providers[1].Prefill)
	}
	h, err = parseHandler("llm_hedge {\nprovider a http://127.0.0.1:1\nstream {\n resume off\n}\n}")
	if err != nil || *h.Stream.Resume != 0 {
		t.Fatalf("resume off: %v %v", err, h.Stream.Resume)
	}
	var d StreamConfig
	d.setDefaults()
	if *d.Resume != 1 {
		t.Fatalf("default resume %d, want 1", *d.Resume)
	}
}

// price lines, at the handler and in a provider, and the hedge budget
// counted in tokens with a large-prompt delay.
func TestCaddyfileCost(t *testing.T) {
	h, err := parseHandler(`llm_hedge {
		price claude-* input 3 output 15 cache_read 0.3 cache_write 3.75
		price * input 1 output 4
		provider a http://x {
			price claude-* input 3.3 output 16.5
		}
		hedge {
			budget 10% tokens
			large_prompt 100k 20s
		}
	}`)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Prices) != 2 || h.Prices[0].Model != "claude-*" || h.Prices[0].Input != 3 || h.Prices[0].Output != 15 ||
		*h.Prices[0].CacheRead != 0.3 || *h.Prices[0].CacheWrite != 3.75 || h.Prices[1].CacheRead != nil {
		t.Fatalf("handler prices %+v", h.Prices)
	}
	if pp := h.Providers[0].Prices; len(pp) != 1 || pp[0].Input != 3.3 || pp[0].Output != 16.5 {
		t.Fatalf("provider prices %+v", pp)
	}
	if !h.Hedge.BudgetTokens || *h.Hedge.Budget != 10 || h.Hedge.LargePrompt == nil ||
		h.Hedge.LargePrompt.Tokens != 100_000 || time.Duration(h.Hedge.LargePrompt.After) != 20*time.Second {
		t.Fatalf("hedge %+v", h.Hedge)
	}
	e := h.Hedge.engine()
	if !e.BudgetTokens || e.LargeTokens != 100_000 || e.LargeAfter != 20*time.Second {
		t.Fatalf("engine hedge %+v", e)
	}
	ps := newPrices(h)
	for _, tc := range []struct {
		provider, model string
		want            float64 // input price found; 0: none
	}{
		{"a", "claude-sonnet-4-5", 3.3}, {"b", "claude-sonnet-4-5", 3}, {"b", "gpt-5", 1}, {"a", "gpt-5", 1},
	} {
		p, ok := ps.of(tc.provider, tc.model)
		if !ok || p.Input != tc.want {
			t.Errorf("price of %s on %s: %+v %v, want input %v", tc.model, tc.provider, p, ok, tc.want)
		}
	}
	if newPrices(&Handler{Providers: []*Provider{{Name: "a"}}}) != nil {
		t.Error("prices without any price line")
	}
}
