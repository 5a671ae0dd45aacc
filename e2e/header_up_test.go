package e2e

import (
	"net/http"
	"sync"
	"testing"
	"time"
)

// header_up's placeholders are evaluated per attempt, and the attempts of
// one request run at once when a hedge races: Caddy's
// {http.request.uuid} makes and keeps the request's id on first use (its
// vars, its access log's fields). Both attempts of a hedged request carry
// the same id, and evaluating it from two attempts is not a data race
// (-race).
func TestHeaderUpPlaceholderAcrossAHedge(t *testing.T) {
	var mu sync.Mutex
	ids := map[string]string{}
	note := func(who string, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		ids[who] = r.Header.Get("X-Request-Id")
	}
	hedged := make(chan struct{})
	var once sync.Once
	primary := newStreamScript(t, func(r *http.Request, send func(...string) bool) {
		note("primary", r)
		// No first byte until the hedge has started, so the hedge races;
		// then the hedge wins and the proxy hangs up on this attempt.
		select {
		case <-hedged:
		case <-r.Context().Done():
			return
		}
		<-r.Context().Done()
	})
	alternative := newStreamScript(t, func(r *http.Request, send func(...string) bool) {
		note("alternative", r)
		once.Do(func() { close(hedged) })
		send(streamAMessageStart, streamABlockStart, streamADelta("Hello"), streamABlockStop, streamAMessageDelta, streamAMessageStop)
	})
	const up = "header_up X-Request-Id {http.request.uuid}"
	p := startProxy(t, provider("primary", primary.up(), "priority 0", up)+provider("alternative", alternative.up(), "priority 1", up)+
		"hedge {\n after 50ms\n }\n")
	m, err := streamAnthropic(ctxTimeout(t, 20*time.Second), anthropicClient(p, "k"), anthropicParams("claude-test"))
	if err != nil || messageText(m) != "Hello" {
		t.Fatalf("text %q, err %v; want the alternative's answer", messageText(m), err)
	}
	primary.waitGone(t)
	mu.Lock()
	defer mu.Unlock()
	if ids["primary"] == "" || ids["primary"] != ids["alternative"] {
		t.Fatalf("X-Request-Id: primary %q, alternative %q; want one request id on both attempts", ids["primary"], ids["alternative"])
	}
}
