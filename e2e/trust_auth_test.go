package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// Trust boundaries of credentials, auth headers and failure messages
// (SPEC 15): nothing a client sends counts against a provider shared with
// other clients, and nothing the proxy knows about its upstreams reaches a
// client.

const trustAuthValidKey = "sk-valid-client-3c9e"

// trustAuthView is one provider as GET /llm_hedge/providers shows it.
type trustAuthView struct {
	Name                string `json:"name"`
	URL                 string `json:"url"`
	State               string `json:"state"`
	ConsecutiveFailures int64  `json:"consecutive_failures"`
	Failures            int64  `json:"failures"`
	LastError           *struct {
		Class string `json:"class"`
	} `json:"last_error"`
	ModelCooldowns []struct {
		Model string `json:"model"`
	} `json:"model_cooldowns"`
}

func trustAuthProvider(t *testing.T, p *proxy, name string) trustAuthView {
	t.Helper()
	status, _, body := healthAdmin(t, p, http.MethodGet, "/llm_hedge/providers")
	if status != http.StatusOK {
		t.Fatalf("GET /llm_hedge/providers: status %d: %s", status, body)
	}
	var views []trustAuthView
	if err := json.Unmarshal([]byte(body), &views); err != nil {
		t.Fatalf("decoding %s: %v", body, err)
	}
	for _, v := range views {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("provider %s is not in the admin list: %s", name, body)
	return trustAuthView{}
}

// trustAuthUntouched fails unless the provider's breaker and model
// cooldowns are as if nothing had failed.
func trustAuthUntouched(t *testing.T, p *proxy, names ...string) {
	t.Helper()
	for _, name := range names {
		v := trustAuthProvider(t, p, name)
		if v.State != "closed" || v.ConsecutiveFailures != 0 || v.Failures != 0 || len(v.ModelCooldowns) != 0 {
			t.Fatalf("provider %s: %+v; want closed, no failure counted, no model cooled", name, v)
		}
	}
}

// trustAuthPost sends one non-streaming completion as raw HTTP in the
// given dialect, with the client's key and extra headers, and returns what
// the client got.
func trustAuthPost(t *testing.T, p *proxy, dialect, key, model string, extra http.Header) (int, http.Header, string) {
	t.Helper()
	path, body := "/v1/messages", fmt.Sprintf(`{"model":%q,"max_tokens":16,"messages":[{"role":"user","content":"hello"}]}`, model)
	if dialect == "openai" {
		path, body = "/v1/chat/completions", fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hello"}]}`, model)
	}
	req, err := http.NewRequestWithContext(ctxTimeout(t, 10*time.Second), http.MethodPost, p.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if dialect == "openai" {
		req.Header.Set("Authorization", "Bearer "+key)
	} else {
		req.Header.Set("X-Api-Key", key)
		req.Header.Set("Anthropic-Version", "2023-06-01")
	}
	for k, v := range extra {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", dialect, model, err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, resp.Header, readAll(resp)
}

// trustAuthValidClientServed sends n requests of a client with a valid key,
// alternating dialects, and fails unless every one is answered 200.
func trustAuthValidClientServed(t *testing.T, p *proxy, n int) {
	t.Helper()
	for i := range n {
		dialect, model := "anthropic", "claude-test"
		if i%2 == 1 {
			dialect, model = "openai", "gpt-test"
		}
		if status, _, body := trustAuthPost(t, p, dialect, trustAuthValidKey, model, nil); status != http.StatusOK {
			t.Fatalf("valid client, request %d of %d (%s): status %d: %s", i+1, n, dialect, status, body)
		}
	}
}

// Case 1: with a pass-through key (no provider `key`), a 401, a 429 and a
// 404 are the client's own answers: passed through as the provider sent
// them, no breaker or model cooldown touched, no failover or retry that
// carries the key elsewhere. A client with a valid key is served after.
func TestTrustPassThroughKeyErrorsAreTheClients(t *testing.T) {
	cases := []struct {
		name       string
		faults     []sim.Fault
		dialect    string
		key, model string
		requests   int
		status     int
		body       string
		retryAfter string
	}{
		{
			name: "401 for a wrong key", dialect: "anthropic", key: "sk-wrong-key-0d1e", model: "claude-test", requests: 3,
			status: 401, body: `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`,
		},
		{
			name:    "429 with Retry-After 120",
			faults:  []sim.Fault{{Kind: sim.FaultStatus, Status: 429, RetryAfter: "120", Count: 1}},
			dialect: "anthropic", key: trustAuthValidKey, model: "claude-test", requests: 1,
			status: 429, body: `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`,
			retryAfter: "120",
		},
		{
			name:    "404 for a model the key cannot see",
			faults:  []sim.Fault{{Kind: sim.FaultStatus, Status: 404, Model: "gpt-hidden"}},
			dialect: "openai", key: trustAuthValidKey, model: "gpt-hidden", requests: 3,
			status: 404, body: "{\"error\":{\"message\":\"The model `gpt-hidden` does not exist or you do not have access to it.\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":\"model_not_found\"}}",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := sim.Config{Key: trustAuthValidKey, Faults: tc.faults}
			a, b := newUpstream(t, cfg), newUpstream(t, cfg)
			p := startProxy(t, provider("pass-a", a, "priority 0")+provider("pass-b", b, "priority 1")+"hedge off\n")

			for i := range tc.requests {
				status, hdr, body := trustAuthPost(t, p, tc.dialect, tc.key, tc.model, nil)
				if status != tc.status || body != tc.body || hdr.Get("Retry-After") != tc.retryAfter {
					t.Fatalf("request %d: status %d Retry-After %q body %s\nwant the provider's own %d Retry-After %q body %s",
						i+1, status, hdr.Get("Retry-After"), body, tc.status, tc.retryAfter, tc.body)
				}
			}
			// One attempt per request, on the first provider only: no
			// failover, no same-provider retry.
			if n := completions(a); n != tc.requests {
				t.Fatalf("pass-a got %d completions for %d requests, want one each", n, tc.requests)
			}
			if n := completions(b); n != 0 {
				t.Fatalf("pass-b got %d completions: the client's key was carried to it", n)
			}
			trustAuthUntouched(t, p, "pass-a", "pass-b")

			trustAuthValidClientServed(t, p, 20)
			if tc.model == "gpt-hidden" {
				// Once the client's key sees the model, it is served at once:
				// the model was never cooled.
				if err := a.SetFaults(nil); err != nil {
					t.Fatal(err)
				}
				if status, _, body := trustAuthPost(t, p, tc.dialect, trustAuthValidKey, tc.model, nil); status != 200 {
					t.Fatalf("gpt-hidden after the key gained access: status %d: %s", status, body)
				}
			}
			for _, r := range b.Requests() {
				if strings.Contains(r.APIKey+r.Authorization, "sk-wrong") {
					t.Fatalf("pass-b saw the wrong key: x-api-key %q authorization %q", r.APIKey, r.Authorization)
				}
			}
			trustAuthUntouched(t, p, "pass-a", "pass-b")
		})
	}
}

// Case 2: with the provider's own key, the client's auth-scoping headers
// (organization, project) are removed, so a client naming another
// organization cannot make the provider refuse the operator's key and open
// every breaker. header_up still sets them: then the provider's 401 is the
// operator's and counts.
func TestTrustClientAuthHeadersStrippedWithProviderKey(t *testing.T) {
	scoping := []string{"OpenAI-Organization", "OpenAI-Project", "Anthropic-Organization", "X-Goog-User-Project"}
	refuseScoped := func(key string) sim.Config {
		cfg := sim.Config{Key: key}
		for _, h := range scoping {
			cfg.Faults = append(cfg.Faults, sim.Fault{Kind: sim.FaultStatus, Status: 401, Header: h})
		}
		return cfg
	}
	a, b := newUpstream(t, refuseScoped("sk-op-a")), newUpstream(t, refuseScoped("sk-op-b"))
	p := startProxy(t, provider("keyed-a", a, "priority 0", "key sk-op-a")+provider("keyed-b", b, "priority 1", "key sk-op-b")+"hedge off\n")

	hostile := http.Header{}
	for _, h := range scoping {
		hostile.Set(h, "other-tenant")
	}
	for i := range 6 {
		dialect, model := "anthropic", "claude-test"
		if i%2 == 1 {
			dialect, model = "openai", "gpt-test"
		}
		if status, _, body := trustAuthPost(t, p, dialect, "sk-anything", model, hostile); status != http.StatusOK {
			t.Fatalf("request %d with another tenant's scoping headers: status %d: %s", i+1, status, body)
		}
	}
	trustAuthUntouched(t, p, "keyed-a", "keyed-b")
	trustAuthValidClientServed(t, p, 20)
	if n := completions(b); n != 0 {
		t.Fatalf("keyed-b got %d completions; the primary should have served all", n)
	}

	// header_up is the operator's word: the header goes out, and the
	// provider's 401 to it counts against the provider.
	c := newUpstream(t, refuseScoped("sk-op-c"))
	p = startProxy(t, provider("keyed-c", c, "key sk-op-c", "header_up OpenAI-Organization org-operator")+"hedge off\nretry {\n same_provider 0\n}\n")
	if status, _, body := trustAuthPost(t, p, "openai", "sk-anything", "gpt-test", nil); status == http.StatusOK {
		t.Fatalf("header_up OpenAI-Organization did not reach the provider: %s", body)
	}
	if v := trustAuthProvider(t, p, "keyed-c"); v.ConsecutiveFailures != 1 || v.LastError == nil || v.LastError.Class != "auth" {
		t.Fatalf("keyed-c: %+v; want one auth failure counted", v)
	}
}

// Case 3 (first half): a 404 whose body does not say the model is missing
// (a wrong path, a gateway's "Not Found") is about the request: passed
// through as is, no model cooled, no failover. A 404 that says the model
// does not exist still cools it on that provider.
func TestTrustModelCooledOnlyWhenItDoesNotExist(t *testing.T) {
	generic := map[string]string{
		"/v1/messages":         `{"type":"error","error":{"type":"not_found_error","message":"Not Found"}}`,
		"/v1/chat/completions": `{"error":{"message":"Invalid URL (POST /v1/chat/completions)","type":"invalid_request_error","param":null,"code":null}}`,
	}
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, generic[r.URL.Path])
	}))
	t.Cleanup(srv.Close)
	b := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("nf-a", &upstream{URL: srv.URL}, "priority 0", "key sk-op-a")+
		provider("nf-b", b, "priority 1", "key sk-op-b")+"hedge off\n")

	for i, tc := range []struct{ dialect, model string }{{"anthropic", "claude-test"}, {"openai", "gpt-test"}, {"anthropic", "claude-test"}, {"openai", "gpt-test"}} {
		want := generic["/v1/messages"]
		if tc.dialect == "openai" {
			want = generic["/v1/chat/completions"]
		}
		if status, _, body := trustAuthPost(t, p, tc.dialect, "sk-client", tc.model, nil); status != 404 || body != want {
			t.Fatalf("request %d (%s): status %d body %s; want the provider's own 404 %s", i+1, tc.dialect, status, body, want)
		}
	}
	if hits.Load() != 4 || completions(b) != 0 {
		t.Fatalf("nf-a got %d requests, nf-b %d; want 4 and 0 (no failover of a request-level 404)", hits.Load(), completions(b))
	}
	trustAuthUntouched(t, p, "nf-a")

	// The provider says the model does not exist: cooled there, and the
	// request fails over.
	gone := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 404, Model: "claude-gone"}}})
	p = startProxy(t, provider("nf-gone", gone, "priority 0", "key sk-op-a")+provider("nf-b", b, "priority 1", "key sk-op-b")+"hedge off\n")
	if status, _, body := trustAuthPost(t, p, "anthropic", "sk-client", "claude-gone", nil); status != 200 {
		t.Fatalf("claude-gone: status %d: %s; want the failover's answer", status, body)
	}
	if v := trustAuthProvider(t, p, "nf-gone"); v.State != "closed" || len(v.ModelCooldowns) != 1 || v.ModelCooldowns[0].Model != "claude-gone" {
		t.Fatalf("nf-gone: %+v; want claude-gone cooled, breaker closed", v)
	}
}

// Case 10: when the proxy's own attempts fail, the client reads a generic
// message with the status and the dialect's error type; which provider
// failed and why (addresses, dial errors) is in the request log line, and
// the admin view has each provider's last error class. A provider's own
// request-level 4xx still passes through as is.
func TestTrustFailureBodiesAreGeneric(t *testing.T) {
	downA := &upstream{URL: fmt.Sprintf("http://127.0.0.1:%d", freePort(t))}
	downB := &upstream{URL: fmt.Sprintf("http://127.0.0.1:%d", freePort(t))}
	p := startProxy(t, provider("down-a", downA, "priority 0")+provider("down-b", downB, "priority 1")+
		"hedge off\nretry {\n same_provider 0\n}\ncooldown {\n failures 100\n}\n")

	leaks := []string{"127.0.0.1", "dial", "refused", "down-a", "down-b", strings.TrimPrefix(downB.URL, "http://127.0.0.1")}
	noLeak := func(what, body string) {
		t.Helper()
		for _, l := range leaks {
			if strings.Contains(body, l) {
				t.Fatalf("%s: the client's body holds %q: %s", what, l, body)
			}
		}
	}
	for _, tc := range []struct{ dialect, model, typ string }{
		{"anthropic", "claude-test", `"type":"overloaded_error"`},
		{"openai", "gpt-test", `"type":"server_error"`},
	} {
		status, _, body := trustAuthPost(t, p, tc.dialect, "sk-client", tc.model, nil)
		if status != http.StatusServiceUnavailable || !strings.Contains(body, "all providers failed: upstream unavailable") || !strings.Contains(body, tc.typ) {
			t.Fatalf("%s: status %d body %s; want 503, a generic message and %s", tc.dialect, status, body, tc.typ)
		}
		noLeak(tc.dialect, body)
	}
	// The operator still sees it all: the log line's chain says which
	// provider failed and why, the admin view the class of each.
	lines := observeRequestLines(t, p.LogFile, 2)
	for _, l := range lines {
		chain := observeChain(t, l)
		if len(chain) != 2 {
			t.Fatalf("chain %v: want both providers", chain)
		}
		for i, name := range []string{"down-a", "down-b"} {
			msg, _ := chain[i]["error"].(string)
			if chain[i]["provider"] != name || !strings.Contains(msg, "provider "+name) || !strings.Contains(msg, "connection refused") {
				t.Fatalf("chain entry %d: %v; want %s's connection error", i, chain[i], name)
			}
		}
	}
	for _, name := range []string{"down-a", "down-b"} {
		if v := trustAuthProvider(t, p, name); v.LastError == nil || v.LastError.Class != "connect" {
			t.Fatalf("%s admin view %+v: want last error class connect", name, v)
		}
	}

	// A forwarded call that finds every provider down says no more.
	req, _ := http.NewRequestWithContext(ctxTimeout(t, 10*time.Second), http.MethodGet, p.URL+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer sk-client")
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		body := readAll(resp)
		resp.Body.Close()
		if resp.StatusCode < 500 {
			t.Fatalf("GET /v1/models with every provider down: status %d: %s", resp.StatusCode, body)
		}
		noLeak("GET /v1/models", body)
	}

	// A total timeout is a 504 that names nothing either; a provider's own
	// 400 is relayed as it sent it.
	slow := newUpstream(t, sim.Config{FirstToken: caddyDur(30 * time.Second)})
	bad := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 400}}})
	p = startProxy(t, provider("slow-a", slow, "models claude-test gpt-test")+provider("bad-a", bad, "models claude-bad")+
		"hedge off\ntimeouts {\n total 2s\n}\n") // bad-a's 400 comes well within it under -race
	leaks = append(leaks, "slow-a", strings.TrimPrefix(slow.URL, "http://127.0.0.1"))
	for _, tc := range []struct{ dialect, model, typ string }{
		{"anthropic", "claude-test", `"type":"timeout_error"`},
		{"openai", "gpt-test", `"type":"timeout"`},
	} {
		status, _, body := trustAuthPost(t, p, tc.dialect, "sk-client", tc.model, nil)
		if status != http.StatusGatewayTimeout || !strings.Contains(body, "upstream timed out") || !strings.Contains(body, tc.typ) {
			t.Fatalf("%s: status %d body %s; want 504, a generic message and %s", tc.dialect, status, body, tc.typ)
		}
		noLeak(tc.dialect+" timeout", body)
	}
	want := `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 250000 tokens \u003e 200000 maximum"}}`
	if status, _, body := trustAuthPost(t, p, "anthropic", "sk-client", "claude-bad", nil); status != 400 || body != want {
		t.Fatalf("provider's 400: status %d body %s; want it as sent: %s", status, body, want)
	}
}
