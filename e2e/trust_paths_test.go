package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// Trust boundaries of paths and URLs (issue 11, cases 3, 7, 8, 9, 12):
// what a client's path, query and headers can make the proxy send where.

// pathsSeen records the request line (method and raw request URI) and the
// Authorization of every request an upstream receives, then hands the
// request to next.
type pathsSeen struct {
	mu    sync.Mutex
	lines []string
	auth  []string
	next  http.Handler
}

func (s *pathsSeen) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.lines = append(s.lines, r.Method+" "+r.RequestURI)
	s.auth = append(s.auth, r.Header.Get("Authorization"))
	s.mu.Unlock()
	s.next.ServeHTTP(w, r)
}

func (s *pathsSeen) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.lines...)
}

// newPathsUpstream serves next behind a pathsSeen on a loopback port.
func newPathsUpstream(t *testing.T, next http.Handler) (*pathsSeen, string) {
	t.Helper()
	s := &pathsSeen{next: next}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv.URL
}

// pathsDo sends one raw request to the proxy. rawPath goes on the wire
// exactly as written (url.Parse keeps its escapes and dot-segments).
func pathsDo(t *testing.T, method, url, body string, hdr ...string) (int, http.Header, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

const (
	pathsOpenAIBody    = `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`
	pathsAnthropicBody = `{"model":"claude-x","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`
)

// Case 3 (second half): a completion path without /v1 is that dialect's
// completion and reaches the provider's canonical path, never
// base_url + /chat/completions.
func TestCompletionPathWithoutV1(t *testing.T) {
	u := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("nov1", u))

	// The OpenAI SDK with a base URL without /v1 posts /chat/completions.
	c := openai.NewClient(ooption.WithBaseURL(p.URL), ooption.WithAPIKey("k"), ooption.WithMaxRetries(0))
	got, err := c.Chat.Completions.New(ctxTimeout(t, 10*time.Second), openaiParams("gpt-4o"))
	if err != nil || len(got.Choices) != 1 || got.Choices[0].Message.Content != wantText {
		t.Fatalf("POST /chat/completions: %v %+v", err, got)
	}
	status, _, body := pathsDo(t, http.MethodPost, p.URL+"/messages", pathsAnthropicBody, "anthropic-version", "2023-06-01", "x-api-key", "k")
	if status != http.StatusOK || !strings.Contains(body, `"type":"message"`) {
		t.Fatalf("POST /messages: %d %s", status, body)
	}
	var paths []string
	for _, r := range u.Requests() {
		paths = append(paths, r.Method+" "+r.Path)
	}
	if want := []string{"POST /v1/chat/completions", "POST /v1/messages"}; fmt.Sprint(paths) != fmt.Sprint(want) {
		t.Fatalf("upstream saw %v, want %v", paths, want)
	}
}

// Case 7: a forwarded call is built from the escaped path; dot-segments
// (raw or encoded) and encoded / ? # are a 400 in the client's dialect, so
// nothing leaves the provider's base path with the operator's key.
func TestPathEscapeInForwardedCalls(t *testing.T) {
	seen, url := newPathsUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object":"model","id":"x"}`)
	}))
	p := startProxy(t, fmt.Sprintf("\t\tprovider esc %s/tenant-a/openai {\n\t\t\tkey sk-operator\n\t\t}\n", url))

	for _, path := range []string{
		"/v1/..%2F..%2F..%2Ftenant-b%2Fsecrets",
		"/v1/models/..%2f..%2f..%2ftenant-b",
		"/v1/models%3Fkey=x",
		"/v1/models%3fkey=x",
		"/v1/models%23frag",
		"/v1/models/%2e%2e",
		"/v1/models/.%2E",
		"/v1/models/..",
		"/v1/./models",
		"/v1/models/a%5Cb",
	} {
		status, _, body := pathsDo(t, http.MethodGet, p.URL+path, "", "Authorization", "Bearer client")
		var e struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if status != http.StatusBadRequest || json.Unmarshal([]byte(body), &e) != nil || e.Error.Message == "" {
			t.Errorf("GET %s: %d %s, want a 400 in the OpenAI shape", path, status, body)
		}
	}
	// Anthropic clients get their own error shape.
	status, _, body := pathsDo(t, http.MethodGet, p.URL+"/v1/models/..%2Fx", "", "x-api-key", "client", "anthropic-version", "2023-06-01")
	if status != http.StatusBadRequest || !strings.Contains(body, `"type":"error"`) {
		t.Errorf("anthropic client: %d %s, want a 400 in the Anthropic shape", status, body)
	}
	if s := seen.seen(); len(s) != 0 {
		t.Fatalf("refused paths reached the upstream: %v", s)
	}

	// A legitimate escape is sent as the client wrote it, under the base path.
	status, _, body = pathsDo(t, http.MethodGet, p.URL+"/v1/models/ft%3Agpt-4o%3Aorg%20x", "", "Authorization", "Bearer client")
	if status != http.StatusOK {
		t.Fatalf("escaped model id: %d %s", status, body)
	}
	if s := seen.seen(); len(s) != 1 || s[0] != "GET /tenant-a/openai/v1/models/ft%3Agpt-4o%3Aorg%20x" {
		t.Fatalf("upstream saw %v", s)
	}
}

// Case 8: the transport never replays. An upstream that reads the request
// and closes the connection, on every pooled connection: a completion
// carrying an Idempotency-Key, and a GET of the models list, each reach it
// exactly once per attempt the module decided (here one), not once per
// pooled connection.
func TestTransportReplays(t *testing.T) {
	const pool = 6
	s := sim.New(sim.Config{Tokens: 9})
	var drop atomic.Bool
	var dropped, keyed atomic.Int64
	arrived := make(chan struct{}, pool)
	release := make(chan struct{})
	_, url := newPathsUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if drop.Load() {
			dropped.Add(1)
			if r.Header.Get("Idempotency-Key") != "" {
				keyed.Add(1)
			}
			io.Copy(io.Discard, r.Body)
			c, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				c.Close()
			}
			return
		}
		arrived <- struct{}{}
		<-release
		s.ServeHTTP(w, r)
	}))
	p := startProxy(t, fmt.Sprintf("\t\tprovider replay %s\n", url)+
		"\t\thedge off\n\t\tretry {\n\t\t\tattempts 1\n\t\t}\n\t\tcooldown {\n\t\t\tfailures 100\n\t\t}\n")

	// Warm the pool: pool completions at once, each on its own connection.
	var wg sync.WaitGroup
	errs := make(chan error, pool)
	for range pool {
		wg.Go(func() {
			_, err := openaiClient(p, "k").Chat.Completions.New(ctxTimeout(t, 20*time.Second), openaiParams("gpt-4o"))
			errs <- err
		})
	}
	for range pool {
		<-arrived
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("warm-up: %v", err)
		}
	}

	drop.Store(true)
	status, _, body := pathsDo(t, http.MethodPost, p.URL+"/v1/chat/completions", pathsOpenAIBody,
		"Authorization", "Bearer k", "Idempotency-Key", "idem-1")
	if status < 500 {
		t.Fatalf("completion on a dropping upstream: %d %s", status, body)
	}
	if n := keyed.Load(); n != 1 {
		t.Errorf("the upstream received the Idempotency-Key request %d times, want 1 (one module attempt)", n)
	}

	dropped.Store(0)
	status, _, body = pathsDo(t, http.MethodGet, p.URL+"/v1/models", "", "Authorization", "Bearer k")
	if status < 500 {
		t.Fatalf("models list on a dropping upstream: %d %s", status, body)
	}
	if n := dropped.Load(); n != 1 {
		t.Errorf("the upstream received GET /v1/models %d times, want 1", n)
	}
}

// Case 9: the base URL's query is sent (before the client's), and a base
// URL with credentials is refused at provision, naming the Caddyfile line.
func TestBaseURLDetails(t *testing.T) {
	u := newUpstream(t, sim.Config{})
	seen, url := newPathsUpstream(t, u.Simulator)
	p := startProxy(t, fmt.Sprintf("\t\tprovider q %s?api-version=2024-06-01\n", url))

	if _, err := openaiClient(p, "k").Chat.Completions.New(ctxTimeout(t, 10*time.Second), openaiParams("gpt-4o")); err != nil {
		t.Fatalf("completion: %v", err)
	}
	if status, _, body := pathsDo(t, http.MethodPost, p.URL+"/v1/chat/completions?trace=1", pathsOpenAIBody, "Authorization", "Bearer k"); status != http.StatusOK {
		t.Fatalf("completion with a query: %d %s", status, body)
	}
	if status, _, body := pathsDo(t, http.MethodGet, p.URL+"/v1/models?limit=2", "", "Authorization", "Bearer k"); status != http.StatusOK {
		t.Fatalf("models list: %d %s", status, body)
	}
	want := []string{
		"POST /v1/chat/completions?api-version=2024-06-01",
		"POST /v1/chat/completions?api-version=2024-06-01&trace=1",
		"GET /v1/models?api-version=2024-06-01&limit=2",
	}
	if got := seen.seen(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("upstream saw %v, want %v", got, want)
	}

	// Credentials in the base URL: a Caddyfile error naming the line, and
	// never echoing the password.
	cfg := "http://127.0.0.1:1 {\n\tllm_hedge {\n\t\tprovider cred http://user:s3cret@127.0.0.1:1\n\t}\n}\n"
	_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cfg), nil)
	if err == nil || !strings.Contains(err.Error(), "credentials") || !strings.Contains(err.Error(), ":3") || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("Caddyfile with userinfo: %v; want an error about credentials on line 3 without the password", err)
	}
	// The same in JSON: provisioning fails.
	js := `{"apps":{"http":{"servers":{"s":{"listen":["127.0.0.1:0"],"routes":[{"handle":[{"handler":"llm_hedge",` +
		`"providers":[{"name":"cred","base_url":"http://user:s3cret@127.0.0.1:1"}]}]}]}}}}}`
	var c caddy.Config
	if err := json.Unmarshal([]byte(js), &c); err != nil {
		t.Fatal(err)
	}
	if err := caddy.Validate(&c); err == nil || !strings.Contains(err.Error(), "credentials") || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("JSON with userinfo: %v; want an error about credentials without the password", err)
	}
}

// Case 12: the listed read-only and token-count paths fail over on a 5xx
// and get the request log line and metrics; every other path is 404 in
// the client's dialect unless a forward glob lists it, and a glob-listed
// POST keeps failing over on connection errors only.
func TestForwardedPaths(t *testing.T) {
	t.Run("ListedPathsFailOverAndAreObserved", func(t *testing.T) {
		a := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 500}}})
		b := newUpstream(t, sim.Config{Model: "from-b"})
		p := startProxy(t, provider("fwdp-a", a, "priority 0")+provider("fwdp-b", b, "priority 1"))
		before, _ := observeScrape(t, p)

		status, _, body := pathsDo(t, http.MethodGet, p.URL+"/v1/models", "", "Authorization", "Bearer k")
		if status != http.StatusOK || !strings.Contains(body, "from-b") {
			t.Fatalf("GET /v1/models: %d %s, want the list of fwdp-b", status, body)
		}
		status, _, body = pathsDo(t, http.MethodPost, p.URL+"/v1/messages/count_tokens", pathsAnthropicBody,
			"x-api-key", "k", "anthropic-version", "2023-06-01")
		if status != http.StatusOK || !strings.Contains(body, "input_tokens") {
			t.Fatalf("POST count_tokens: %d %s", status, body)
		}

		// The request's own series is recorded after its attempts', when
		// the handler returns, which may be after the client has the body.
		after := observeScrapeUntil(t, p, func(m observeMetrics) bool {
			return m.delta(before, `caddy_llm_hedge_attempts_total{provider="fwdp-b",result="won"}`) >= 2 &&
				m.delta(before, `caddy_llm_hedge_requests_total{outcome="success"}`) >= 2
		})
		for series, want := range map[string]float64{
			`caddy_llm_hedge_attempts_total{provider="fwdp-a",result="failed_status_5xx"}`: 2,
			`caddy_llm_hedge_attempts_total{provider="fwdp-b",result="won"}`:               2,
		} {
			if d := after.delta(before, series); d != want {
				t.Errorf("%s grew by %g, want %g", series, d, want)
			}
		}
		if d := after.delta(before, `caddy_llm_hedge_requests_total{outcome="success"}`); d < 2 {
			t.Errorf("requests_total{outcome=success} grew by %g, want 2", d)
		}
		lines := observeRequestLines(t, p.LogFile, 2)
		for i, path := range []string{"/v1/models", "/v1/messages/count_tokens"} {
			l := lines[i]
			chain := observeChain(t, l)
			if l["path"] != path || l["outcome"] != "success" || l["provider"] != "fwdp-b" || len(chain) != 2 ||
				chain[0]["provider"] != "fwdp-a" || chain[0]["status"] != 500.0 || chain[1]["event"] != "failover" {
				t.Errorf("log line %d: %v", i, l)
			}
		}
	})

	t.Run("OtherPathsAre404", func(t *testing.T) {
		a := newUpstream(t, sim.Config{})
		p := startProxy(t, provider("fwdn-a", a, "key sk-operator"))
		for _, c := range []struct{ method, path, shape string }{
			{http.MethodPost, "/v1/files", `"error":{`},
			{http.MethodGet, "/v1/fine_tuning/jobs", `"error":{`},
			{http.MethodPost, "/v1/messages/batches", `"type":"error"`},
		} {
			hdr := []string{"Authorization", "Bearer client"}
			if strings.HasPrefix(c.path, "/v1/messages") {
				hdr = []string{"x-api-key", "client", "anthropic-version", "2023-06-01"}
			}
			status, _, body := pathsDo(t, c.method, p.URL+c.path, `{}`, hdr...)
			if status != http.StatusNotFound || !strings.Contains(body, c.shape) {
				t.Errorf("%s %s: %d %s, want 404 with %s", c.method, c.path, status, body, c.shape)
			}
		}
		// A listed path with another method (deleting a fine-tuned model).
		status, hdr, body := pathsDo(t, http.MethodDelete, p.URL+"/v1/models/ft-x", "", "Authorization", "Bearer client")
		if status != http.StatusMethodNotAllowed || hdr.Get("Allow") != http.MethodGet {
			t.Errorf("DELETE /v1/models/ft-x: %d (Allow %q) %s, want 405", status, hdr.Get("Allow"), body)
		}
		if recs := a.Requests(); len(recs) != 0 {
			t.Fatalf("refused paths reached the upstream: %+v", recs)
		}
	})

	t.Run("ForwardGlob", func(t *testing.T) {
		_, aURL := newPathsUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, `{"error":{"message":"boom"}}`, http.StatusInternalServerError)
		}))
		b := newUpstream(t, sim.Config{})
		p := startProxy(t, fmt.Sprintf("\t\tprovider fwdg-a %s\n", aURL)+provider("fwdg-b", b, "priority 1")+
			"\t\tforward /v1/files /v1/files/*\n")
		// POST: not idempotent, the 500 is the answer.
		if status, _, body := pathsDo(t, http.MethodPost, p.URL+"/v1/files", `{}`, "Authorization", "Bearer k"); status != 500 {
			t.Fatalf("POST /v1/files: %d %s, want fwdg-a's 500", status, body)
		}
		// GET: moves on after the 500; fwdg-b does not hold the file (the
		// simulator has none), but fwdg-a, which may, failed: the client is
		// told to retry, not that the file does not exist (holder.go).
		if status, hdr, body := pathsDo(t, http.MethodGet, p.URL+"/v1/files/file-1", "", "Authorization", "Bearer k"); status != 503 || hdr.Get("Retry-After") == "" {
			t.Fatalf("GET /v1/files/file-1: %d %s, want 503 with Retry-After", status, body)
		}
		var paths []string
		for _, r := range b.Requests() {
			paths = append(paths, r.Method+" "+r.Path)
		}
		if fmt.Sprint(paths) != "[GET /v1/files/file-1]" {
			t.Fatalf("fwdg-b saw %v", paths)
		}
		// Not listed by the glob: `*` does not cross a slash.
		if status, _, body := pathsDo(t, http.MethodGet, p.URL+"/v1/files/file-1/content", "", "Authorization", "Bearer k"); status != 404 || !strings.Contains(body, "forward") {
			t.Fatalf("GET /v1/files/file-1/content: %d %s, want the proxy's 404", status, body)
		}
	})

	t.Run("MaxInFlightHoldsForTheBodyCopy", func(t *testing.T) {
		started, release := make(chan struct{}), make(chan struct{})
		var n atomic.Int64
		_, slowURL := newPathsUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			if n.Add(1) > 1 {
				io.WriteString(w, `{"object":"list","data":[],"from":"slow"}`)
				return
			}
			io.WriteString(w, `{"object":"list","data":[`)
			http.NewResponseController(w).Flush()
			close(started)
			select {
			case <-release:
			case <-r.Context().Done():
			}
			io.WriteString(w, `]}`)
		}))
		b := newUpstream(t, sim.Config{Model: "from-b"})
		p := startProxy(t, fmt.Sprintf("\t\tprovider fwdm-slow %s {\n\t\t\tmax_in_flight 1\n\t\t}\n", slowURL)+
			provider("fwdm-b", b, "priority 1"))

		req, _ := http.NewRequest(http.MethodGet, p.URL+"/v1/models", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		<-started
		// The first call's body is still being copied: fwdm-slow is busy.
		status, _, body := pathsDo(t, http.MethodGet, p.URL+"/v1/models", "", "Authorization", "Bearer k")
		if status != http.StatusOK || !strings.Contains(body, "from-b") {
			t.Errorf("second GET /v1/models: %d %s, want fwdm-b's list", status, body)
		}
		close(release)
		if b, err := io.ReadAll(resp.Body); err != nil || string(b) != `{"object":"list","data":[]}` {
			t.Errorf("first GET /v1/models: %q %v", b, err)
		}
		if got := n.Load(); got != 1 {
			t.Errorf("fwdm-slow received %d calls, want 1", got)
		}
	})

	t.Run("IdleTimeoutCutsTheBodyCopy", func(t *testing.T) {
		_, stallURL := newPathsUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"object":"list","data":[`)
			http.NewResponseController(w).Flush()
			<-r.Context().Done() // sends nothing more until the proxy gives up
		}))
		p := startProxy(t, fmt.Sprintf("\t\tprovider fwdi-stall %s\n", stallURL)+
			"\t\ttimeouts {\n\t\t\tidle 300ms\n\t\t}\n")
		resp, err := (&http.Client{Timeout: 20 * time.Second}).Get(p.URL + "/v1/models")
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		var ne interface{ Timeout() bool }
		if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
			t.Fatalf("body of a stalled upstream: %v, want the proxy to cut it", err)
		}
		l := observeRequestLines(t, p.LogFile, 1)[0]
		if l["outcome"] != "stream_error" || l["stream_end"] != "idle_timeout" || l["path"] != "/v1/models" {
			t.Fatalf("log line: %v", l)
		}
	})
}

// The forward subdirective: globs parse into the JSON field, and a glob
// that cannot match a path is an error naming its line.
func TestForwardCaddyfile(t *testing.T) {
	adapt := func(block string) (string, error) {
		cfg := "http://127.0.0.1:1 {\n\tllm_hedge {\n\t\tprovider a http://127.0.0.1:1\n" + block + "\t}\n}\n"
		js, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cfg), nil)
		return string(js), err
	}
	js, err := adapt("\t\tforward /v1/files /v1/files/*\n\t\tforward /v1/batches*\n")
	if err != nil || !strings.Contains(js, `"forward":["/v1/files","/v1/files/*","/v1/batches*"]`) {
		t.Fatalf("forward: %v\n%s", err, js)
	}
	for _, c := range []struct{ block, want string }{
		{"\t\tforward\n", "argument"},
		{"\t\tforward v1/files\n", "starts with /"},
		{"\t\tforward /v1/[files\n", "syntax error"},
	} {
		if _, err := adapt(c.block); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), ":4") {
			t.Errorf("%q: %v; want an error saying %q on line 4", c.block, err, c.want)
		}
	}
}
