package e2e

import (
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/genai"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// keyTimes is the part of a key's admin view that says when it serves again.
type keyTimes struct {
	Fingerprint   string `json:"fingerprint"`
	State         string `json:"state"`
	RequestsReset string `json:"requests_reset"`
	CoolingUntil  string `json:"cooling_until"`
}

// providerKeys returns the keys the admin view lists for provider name.
func providerKeys(t *testing.T, p *proxy, name string) []keyTimes {
	t.Helper()
	status, _, body := healthAdmin(t, p, http.MethodGet, "/llm_hedge/providers")
	if status != http.StatusOK {
		t.Fatalf("admin: %d %s", status, body)
	}
	var views []struct {
		Name string     `json:"name"`
		Keys []keyTimes `json:"keys"`
	}
	if err := json.Unmarshal([]byte(body), &views); err != nil {
		t.Fatal(err)
	}
	for _, v := range views {
		if v.Name == name {
			return v.Keys
		}
	}
	t.Fatalf("provider %s not in the admin view: %s", name, body)
	return nil
}

func keyOf(t *testing.T, keys []keyTimes, key string) keyTimes {
	t.Helper()
	for _, k := range keys {
		if k.Fingerprint == fingerprint(key) {
			return k
		}
	}
	t.Fatalf("key %s not in the admin view: %+v", fingerprint(key), keys)
	return keyTimes{}
}

// within fails unless the admin time v is set and at most d after from
// (the view shows whole seconds).
func within(t *testing.T, what, v string, from time.Time, d time.Duration) {
	t.Helper()
	at, err := time.Parse(time.RFC3339, v)
	if err != nil {
		t.Fatalf("%s %q: want a time (a learned limit always ends): %v", what, v, err)
	}
	if at.After(from.Add(d + time.Second)) {
		t.Fatalf("%s %s is %v away, want at most %v", what, v, time.Until(at).Round(time.Second), d)
	}
}

// Item 1: a learned count always expires. A provider that answers with a
// request count and no usable reset (Azure sends none; a bare number of
// seconds; an RFC 3339 reset in the past) never locks its key out for
// good: the count expires within the family's window (past: at once), the
// admin view shows what routing decides, and an admin reset forgets it.
func TestQuotaLearnedCountExpires(t *testing.T) {
	for _, tc := range []struct {
		resets    string
		anthropic bool
		expiry    time.Duration // how long the learned 0 may hold; 0: not at all
	}{
		{"azure", false, time.Minute},
		{"seconds", false, 2 * time.Second},
		{"past", true, 0},
	} {
		t.Run(tc.resets, func(t *testing.T) {
			// A window of 1 ms: the provider always serves, and always says
			// 0 requests are left.
			primary := newUpstream(t, sim.Config{Key: "sk-p", QuotaResets: tc.resets,
				QuotaRequests: &sim.Quota{N: 1, Per: caddyDur(time.Millisecond)}})
			secondary := newUpstream(t, sim.Config{})
			p := startProxy(t, provider("primary", primary, "priority 0", "key sk-p")+
				provider("secondary", secondary, "priority 1")+"hedge off\n")
			ask := func(i int) {
				t.Helper()
				ctx := ctxTimeout(t, 10*time.Second)
				var err error
				if tc.anthropic {
					_, err = anthropicClient(p, "sk-client").Messages.New(ctx, anthropicParams("claude-test"))
				} else {
					_, err = openaiClient(p, "sk-client").Chat.Completions.New(ctx, openaiParams("gpt-test"))
				}
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
			}
			before := time.Now()
			ask(1)
			k := keyOf(t, providerKeys(t, p, "primary"), "sk-p")
			if tc.expiry == 0 {
				if k.State != "ok" {
					t.Fatalf("a reset in the past is now: key %+v, want ok", k)
				}
				// The simulator's own window is 1 ms: a second request
				// within it is refused by the simulator (a 429 and a
				// failover), which is not what this case is about.
				time.Sleep(time.Until(before.Add(5 * time.Millisecond)))
				ask(2)
				if n := completions(primary); n != 2 {
					t.Fatalf("primary served %d, want 2: the expired count must not skip it", n)
				}
				return
			}
			if k.State != "exhausted" {
				t.Fatalf("key %+v, want exhausted (0 requests left)", k)
			}
			within(t, "requests_reset", k.RequestsReset, before, tc.expiry)
			ask(2)
			if completions(primary) != 1 || completions(secondary) != 1 {
				t.Fatalf("primary %d, secondary %d: want the exhausted key skipped", completions(primary), completions(secondary))
			}
			if status, _, body := healthAdmin(t, p, http.MethodPost, "/llm_hedge/providers/primary/reset"); status != http.StatusOK {
				t.Fatalf("reset: %d %s", status, body)
			}
			if k := keyOf(t, providerKeys(t, p, "primary"), "sk-p"); k.State != "ok" || k.RequestsReset != "" {
				t.Fatalf("after an admin reset the key is %+v, want ok with nothing learned", k)
			}
			ask(3)
			if n := completions(primary); n != 2 {
				t.Fatalf("after the admin reset the primary served %d in all, want 2", n)
			}
		})
	}
}

// Item 2: a remaining count of 2^63-1 does not overflow the reserve's
// arithmetic into "exhausted": every request is served by the key.
func TestQuotaCountSaturates(t *testing.T) {
	up := newUpstream(t, sim.Config{Key: "sk-big", QuotaRequests: &sim.Quota{N: math.MaxInt64, Per: caddyDur(time.Minute)}})
	p := startProxy(t, provider("big", up, "key sk-big", "quota_reserve 10")+"hedge off\n")
	c := openaiClient(p, "sk-client")
	for i := range 3 {
		if _, err := c.Chat.Completions.New(ctxTimeout(t, 10*time.Second), openaiParams("gpt-test")); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	if k := keyOf(t, providerKeys(t, p, "big"), "sk-big"); k.State != "ok" {
		t.Fatalf("key %+v, want ok", k)
	}
}

// Item 13: keys removed from the config leave. A key disabled by a 401,
// then a rotation: after the reloads only the configured key is in the
// admin view and the key_state metric.
func TestQuotaRemovedKeysLeave(t *testing.T) {
	up := newUpstream(t, sim.Config{Key: "sk-good", Keys: []string{"sk-r1", "sk-r2"}})
	p := startProxy(t, provider("pool", up, "key sk-bad sk-good")+"hedge off\n")
	if _, err := openaiClient(p, "sk-client").Chat.Completions.New(ctxTimeout(t, 10*time.Second), openaiParams("gpt-test")); err != nil {
		t.Fatal(err)
	}
	if k := keyOf(t, providerKeys(t, p, "pool"), "sk-bad"); k.State != "disabled" {
		t.Fatalf("sk-bad %+v, want disabled", k)
	}
	p.reload(t, provider("pool", up, "key sk-good sk-r1")+"hedge off\n")
	p.reload(t, provider("pool", up, "key sk-r2")+"hedge off\n")
	if _, err := openaiClient(p, "sk-client").Chat.Completions.New(ctxTimeout(t, 10*time.Second), openaiParams("gpt-test")); err != nil {
		t.Fatal(err)
	}
	keys := providerKeys(t, p, "pool")
	if len(keys) != 1 || keys[0].Fingerprint != fingerprint("sk-r2") {
		t.Fatalf("admin view keys %+v, want sk-r2 (%s) alone", keys, fingerprint("sk-r2"))
	}
	_, _, metrics := healthAdmin(t, p, http.MethodGet, "/metrics")
	for _, gone := range []string{"sk-bad", "sk-good", "sk-r1"} {
		if strings.Contains(metrics, `key="`+fingerprint(gone)+`"`) {
			t.Errorf("metrics still show removed key %s (%s)", gone, fingerprint(gone))
		}
	}
	if !strings.Contains(metrics, `caddy_llm_hedge_key_state{key="`+fingerprint("sk-r2")+`",provider="pool"} 0`) {
		t.Error("metrics lack the configured key's state")
	}
}

// Item 14: a key's Retry-After is capped like the breaker's (5 minutes by
// default): a 429 saying a day, in a header or a Gemini body's
// retryDelay, cools the key for 5 minutes at most.
func TestQuotaKeyRetryAfterCapped(t *testing.T) {
	for _, gemini := range []bool{false, true} {
		name := map[bool]string{false: "retry-after", true: "gemini-retryDelay"}[gemini]
		t.Run(name, func(t *testing.T) {
			up := newUpstream(t, sim.Config{Key: "sk-one", Keys: []string{"sk-two"},
				Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 429, Count: 1, RetryAfter: "86400"}}})
			opts := []string{"key sk-one sk-two"}
			if gemini {
				opts = append(opts, "api gemini")
			}
			p := startProxy(t, provider("capped", up, opts...)+"hedge off\n")
			before := time.Now()
			ctx := ctxTimeout(t, 10*time.Second)
			var err error
			if gemini {
				_, err = geminiClient(t, p, "sk-client").Models.GenerateContent(ctx, "gemini-test", genai.Text("hello"), nil)
			} else {
				_, err = anthropicClient(p, "sk-client").Messages.New(ctx, anthropicParams("claude-test"))
			}
			if err != nil {
				t.Fatal(err)
			}
			k := keyOf(t, providerKeys(t, p, "capped"), "sk-one")
			if k.State != "cooling" {
				t.Fatalf("sk-one %+v, want cooling after its 429", k)
			}
			within(t, "cooling_until", k.CoolingUntil, before, 5*time.Minute)
		})
	}
}
