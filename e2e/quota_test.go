package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// quotaKeyView is one key of a provider as the admin view shows it.
type quotaKeyView struct {
	Fingerprint       string `json:"fingerprint"`
	State             string `json:"state"`
	RequestsRemaining *int64 `json:"requests_remaining"`
	RequestsReset     string `json:"requests_reset"`
	InFlight          int64  `json:"in_flight"`
}

type quotaProviderView struct {
	Name  string         `json:"name"`
	URL   string         `json:"url"`
	State string         `json:"state"`
	Keys  []quotaKeyView `json:"keys"`
}

func quotaView(t *testing.T, p *proxy, name string, up *upstream) quotaProviderView {
	t.Helper()
	status, _, body := healthAdmin(t, p, http.MethodGet, "/llm_hedge/providers")
	if status != http.StatusOK {
		t.Fatalf("admin: %d %s", status, body)
	}
	var views []quotaProviderView
	if err := json.Unmarshal([]byte(body), &views); err != nil {
		t.Fatal(err)
	}
	for _, v := range views {
		if v.Name == name && v.URL == up.URL {
			return v
		}
	}
	t.Fatalf("provider %s not in the admin view: %s", name, body)
	return quotaProviderView{}
}

func fingerprint(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:4])
}

func (v quotaProviderView) key(t *testing.T, key string) quotaKeyView {
	t.Helper()
	for _, k := range v.Keys {
		if k.Fingerprint == fingerprint(key) {
			return k
		}
	}
	t.Fatalf("key %s (%s) not in the admin view of %s: %+v", key, fingerprint(key), v.Name, v.Keys)
	return quotaKeyView{}
}

// quotaPost sends one non-streaming completion in the dialect's raw form.
func quotaPost(t *testing.T, p *proxy, openai bool) (int, http.Header, string) {
	t.Helper()
	path, body := "/v1/messages", `{"model":"claude-test","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`
	if openai {
		path, body = "/v1/chat/completions", `{"model":"gpt-test","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`
	}
	req, err := http.NewRequestWithContext(ctxTimeout(t, 10*time.Second), http.MethodPost, p.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	req.Header.Set("X-Api-Key", "sk-client")
	req.Header.Set("Authorization", "Bearer sk-client")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, resp.Header, readAll(resp)
}

// keysSeen counts the completions an upstream received by the key they carried.
func keysSeen(u *upstream) map[string]int {
	out := map[string]int{}
	for _, r := range u.Requests() {
		if r.Path != "/v1/messages" && r.Path != "/v1/chat/completions" {
			continue
		}
		k := r.APIKey
		if k == "" {
			k = strings.TrimPrefix(r.Authorization, "Bearer ")
		}
		out[k]++
	}
	return out
}

func statusCount(u *upstream, status int) int {
	n := 0
	for _, r := range u.Requests() {
		if r.Status == status {
			n++
		}
	}
	return n
}

// A key the provider refuses (401) is disabled alone: the request goes on
// with the pool's other key, every later request uses only that one, the
// provider's breaker stays closed, the admin view shows both fingerprints
// with their states, and an admin reset re-enables the refused key.
func TestQuotaKeyPoolDisablesRefusedKey(t *testing.T) {
	up := newUpstream(t, sim.Config{Key: "sk-good"})
	p := startProxy(t, provider("pool", up, "key sk-bad sk-good")+"hedge off\n cooldown {\n failures 1\n }\n")

	for i := range 5 {
		if status, _, body := quotaPost(t, p, i%2 == 1); status != http.StatusOK {
			t.Fatalf("request %d: status %d: %s", i, status, body)
		}
	}
	seen := keysSeen(up)
	if seen["sk-bad"] != 1 || seen["sk-good"] != 5 {
		t.Fatalf("keys seen by the provider: %v, want sk-bad once (then disabled) and sk-good for all 5", seen)
	}
	v := quotaView(t, p, "pool", up)
	if v.State != "closed" {
		t.Fatalf("provider breaker %s, want closed: a refused key with another one left is not the provider's failure", v.State)
	}
	if s := v.key(t, "sk-bad").State; s != "disabled" {
		t.Fatalf("sk-bad state %q, want disabled", s)
	}
	if s := v.key(t, "sk-good").State; s != "ok" {
		t.Fatalf("sk-good state %q, want ok", s)
	}
	_, _, metrics := healthAdmin(t, p, http.MethodGet, "/metrics")
	for _, want := range []string{
		`caddy_llm_hedge_key_state{key="` + fingerprint("sk-bad") + `",provider="pool"} 3`,
		`caddy_llm_hedge_key_state{key="` + fingerprint("sk-good") + `",provider="pool"} 0`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	status, _, body := healthAdmin(t, p, http.MethodPost, "/llm_hedge/providers/pool/reset")
	if status != http.StatusOK {
		t.Fatalf("reset: %d %s", status, body)
	}
	if s := quotaView(t, p, "pool", up).key(t, "sk-bad").State; s != "ok" {
		t.Fatalf("sk-bad after the admin reset: %q, want ok", s)
	}
	if strings.Contains(body, "sk-bad") || strings.Contains(body, "sk-good") {
		t.Fatalf("the admin view shows a key: %s", body)
	}
}

// A key whose rate-limit headers say it has no request left is skipped with
// no attempt until its reset; the request goes to the next provider, and
// traffic returns once the reset has passed.
func TestQuotaExhaustedKeySkippedUntilReset(t *testing.T) {
	for _, openai := range []bool{false, true} {
		name := "anthropic"
		if openai {
			name = "openai"
		}
		t.Run(name, func(t *testing.T) {
			primary := newUpstream(t, sim.Config{Key: "sk-p", QuotaRequests: &sim.Quota{N: 1, Per: caddyDur(2 * time.Second)}})
			secondary := newUpstream(t, sim.Config{})
			p := startProxy(t, provider("primary", primary, "priority 0", "key sk-p")+
				provider("secondary", secondary, "priority 1")+"hedge off\n")

			if status, _, body := quotaPost(t, p, openai); status != http.StatusOK {
				t.Fatalf("first request: %d %s", status, body)
			}
			k := quotaView(t, p, "primary", primary).key(t, "sk-p")
			if k.RequestsRemaining == nil || *k.RequestsRemaining != 0 || k.State != "exhausted" {
				t.Fatalf("after the first request the key is %+v, want exhausted with 0 requests left", k)
			}
			reset, err := time.Parse(time.RFC3339, k.RequestsReset)
			if err != nil {
				t.Fatalf("requests_reset %q: %v", k.RequestsReset, err)
			}
			for i := range 3 {
				if status, _, body := quotaPost(t, p, openai); status != http.StatusOK {
					t.Fatalf("request %d: %d %s", i, status, body)
				}
			}
			if n := completions(primary); n != 1 {
				t.Fatalf("the exhausted primary got %d requests, want 1: no attempt until its reset", n)
			}
			if n := completions(secondary); n != 3 {
				t.Fatalf("secondary served %d, want 3", n)
			}
			if n := statusCount(primary, http.StatusTooManyRequests); n != 0 {
				t.Fatalf("primary answered %d 429s, want none", n)
			}
			if !strings.Contains(p.logs(t), "quota_skip") {
				t.Fatal("no quota_skip in the decision chain")
			}
			_, _, metrics := healthAdmin(t, p, http.MethodGet, "/metrics")
			for _, want := range []string{
				`caddy_llm_hedge_quota_skips_total{provider="primary"}`,
				`caddy_llm_hedge_quota_remaining{key="` + fingerprint("sk-p") + `",kind="requests",provider="primary"} 0`,
			} {
				if !strings.Contains(metrics, want) {
					t.Errorf("metrics lack %s", want)
				}
			}
			// The reset is a point on the clock (shown to the second): wait
			// for it, then traffic returns.
			<-time.After(time.Until(reset) + time.Second)
			if status, _, body := quotaPost(t, p, openai); status != http.StatusOK {
				t.Fatalf("after the reset: %d %s", status, body)
			}
			if n := completions(primary); n != 2 {
				t.Fatalf("after the reset the primary got %d requests in all, want 2", n)
			}
		})
	}
}

// When every candidate is out of quota the client gets 429 in its dialect
// with Retry-After at the earliest reset, and no provider is tried.
func TestQuotaAllExhausted429(t *testing.T) {
	a := newUpstream(t, sim.Config{Key: "sk-a", QuotaRequests: &sim.Quota{N: 1, Per: caddyDur(time.Minute)}})
	b := newUpstream(t, sim.Config{Key: "sk-b", QuotaRequests: &sim.Quota{N: 1, Per: caddyDur(30 * time.Second)}})
	p := startProxy(t, provider("qa", a, "priority 0", "key sk-a")+provider("qb", b, "priority 1", "key sk-b")+"hedge off\n")
	for i := range 2 {
		if status, _, body := quotaPost(t, p, true); status != http.StatusOK {
			t.Fatalf("request %d: %d %s", i, status, body)
		}
	}
	for _, openai := range []bool{true, false} {
		status, hdr, body := quotaPost(t, p, openai)
		if status != http.StatusTooManyRequests {
			t.Fatalf("every provider out of quota: status %d (%s), want 429", status, body)
		}
		ra, err := strconv.Atoi(hdr.Get("Retry-After"))
		if err != nil || ra < 1 || ra > 31 {
			t.Fatalf("Retry-After %q, want the earliest reset (about 30 s)", hdr.Get("Retry-After"))
		}
		want := `"type":"error"`
		if openai {
			want = `"error":{`
		}
		if !strings.Contains(body, want) {
			t.Fatalf("429 body not in the client's dialect: %s", body)
		}
	}
	if completions(a) != 1 || completions(b) != 1 {
		t.Fatalf("providers tried while out of quota: a %d, b %d, want 1 each", completions(a), completions(b))
	}
}

// 100 requests over a pool of two keys with 50 requests each: the proxy
// spreads them by what each key has left and the provider never answers 429.
func TestQuotaKeyPoolLoadNo429(t *testing.T) {
	up := newUpstream(t, sim.Config{Key: "sk-1", Keys: []string{"sk-2"}, QuotaRequests: &sim.Quota{N: 50, Per: caddyDur(time.Minute)}})
	p := startProxy(t, provider("loaded", up, "key sk-1 sk-2")+"hedge off\n")
	var wg sync.WaitGroup
	jobs := make(chan int)
	var mu sync.Mutex
	var failed []string
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if status, _, body := quotaPost(t, p, i%2 == 0); status != http.StatusOK {
					mu.Lock()
					failed = append(failed, strconv.Itoa(status)+" "+body)
					mu.Unlock()
				}
			}
		}()
	}
	for i := range 100 {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("%d of 100 requests failed, first: %s", len(failed), failed[0])
	}
	if n := statusCount(up, http.StatusTooManyRequests); n != 0 {
		t.Fatalf("the provider answered %d 429s, want 0", n)
	}
	if seen := keysSeen(up); seen["sk-1"] != 50 || seen["sk-2"] != 50 {
		t.Fatalf("keys used: %v, want 50 each", seen)
	}
}

// A 429 on one key of a pool cools that key alone (for its Retry-After):
// the request goes on with the other key at once, later requests use only
// the other key, and the provider's breaker stays closed.
func TestQuotaKeyPoolCoolsRateLimitedKey(t *testing.T) {
	up := newUpstream(t, sim.Config{Key: "sk-one", Keys: []string{"sk-two"},
		Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 429, Count: 1, RetryAfter: "30"}}})
	p := startProxy(t, provider("cooled", up, "key sk-one sk-two")+"hedge off\n cooldown {\n failures 1\n }\n")
	for i := range 4 {
		if status, _, body := quotaPost(t, p, i%2 == 0); status != http.StatusOK {
			t.Fatalf("request %d: status %d: %s", i, status, body)
		}
	}
	if seen := keysSeen(up); seen["sk-one"] != 1 || seen["sk-two"] != 4 {
		t.Fatalf("keys seen: %v, want sk-one once (the 429), then sk-two for all 4", seen)
	}
	v := quotaView(t, p, "cooled", up)
	if v.State != "closed" {
		t.Fatalf("breaker %s, want closed", v.State)
	}
	if s := v.key(t, "sk-one").State; s != "cooling" {
		t.Fatalf("sk-one %q, want cooling", s)
	}
	if s := v.key(t, "sk-two").State; s != "ok" {
		t.Fatalf("sk-two %q, want ok", s)
	}
}
