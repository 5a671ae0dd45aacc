package engine

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// Bodies in the pooled sizes, several requests at once, through a
// provider that refuses before it reads the body (the transport may
// still be writing it when the request fails over and ends) and one that
// answers: every body a provider reads whole is one a client sent, byte
// for byte, so no attempt ever read a buffer another request reused, and
// every answer is complete.
func TestPooledBodiesReachProvidersWhole(t *testing.T) {
	var sent sync.Map // sha256 of every body a client sent
	var foreign, readWhole atomic.Int32
	note := func(r *http.Request) []byte {
		b, err := io.ReadAll(r.Body)
		if err != nil || int64(len(b)) != r.ContentLength {
			return nil // cut: the request ended and its reader was revoked
		}
		readWhole.Add(1)
		if _, ok := sent.Load(sha256.Sum256(b)); !ok {
			foreign.Add(1)
		}
		return b
	}
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(529)
		_, _ = w.Write([]byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
		w.(http.Flusher).Flush()
		note(r)
	}))
	defer refuse.Close()
	answer := sim.New(sim.Config{Tokens: 3})
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := note(r)
		r.Body = io.NopCloser(bytes.NewReader(b))
		answer.ServeHTTP(w, r)
	}))
	defer ok.Close()
	url := failoverFront(t, refuse.URL, ok.URL)
	const clients, each = 4, 8
	postEach(t, url, clients, each, func(c, i int) []byte {
		// 20-60 KB: two size classes, every body its own bytes.
		text := strings.Repeat(string(rune('a'+c)), 20_000+i*5_000)
		body := fmt.Appendf(nil, `{"model":"claude-x","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"%s %d"}]}`, text, i)
		sent.Store(sha256.Sum256(body), true)
		return body
	}, func(_, _ int, status int, got []byte) error {
		if status != http.StatusOK || !bytes.Contains(got, []byte("event: message_stop")) {
			return fmt.Errorf("status %d: %.300s", status, got)
		}
		return nil
	})
	if n := foreign.Load(); n > 0 {
		t.Fatalf("%d bodies a provider read whole were no client's", n)
	}
	if readWhole.Load() < clients*each {
		t.Fatalf("the answering provider read %d bodies whole, want at least %d", readWhole.Load(), clients*each)
	}
}

// failoverFront serves an engine over two Anthropic providers, first
// (which fails, and stays a candidate) then ok, behind a front server
// closed at the test's end; it returns the front's URL.
func failoverFront(t *testing.T, first, ok string) string {
	cfg := testConfig()
	cfg.Retry.SameProvider, cfg.Retry.BudgetPercent = 0, 100
	cfg.Cooldown.Failures = 1 << 20
	e, err := newTestEngine(t, cfg,
		ProviderConfig{Name: "first", BaseURL: first, API: "anthropic", Vendor: "a"},
		ProviderConfig{Name: "ok", BaseURL: ok, API: "anthropic", Vendor: "b", Priority: 1})
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _ = e.Serve(w, r) }))
	t.Cleanup(front.Close)
	return front.URL
}

// postEach sends clients × each Anthropic requests to url, clients at
// once, the body of each from body, and fails the test with what check
// says of each answer.
func postEach(t *testing.T, url string, clients, each int, body func(c, i int) []byte, check func(c, i, status int, got []byte) error) {
	var wg sync.WaitGroup
	errs := make(chan error, clients*each)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				req, _ := http.NewRequest(http.MethodPost, url+"/v1/messages", bytes.NewReader(body(c, i)))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Anthropic-Version", "2023-06-01")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					errs <- err
					continue
				}
				got, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err := check(c, i, resp.StatusCode, got); err != nil {
					errs <- fmt.Errorf("client %d request %d: %w", c, i, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
