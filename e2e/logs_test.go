package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// The log lines an operator alerts on, read from the real Caddy's JSON log
// (the harness configures it through the Caddyfile's global `log`).

// logLines waits until the log holds at least n lines of msg from an
// llm_hedge logger and returns them all.
func logLines(t testing.TB, p *proxy, msg string, n int) []map[string]any {
	t.Helper()
	var lines []map[string]any
	observeEventually(t, func() bool {
		lines = lines[:0]
		for _, l := range observeJSONLines(t, p.LogFile) {
			if logger, _ := l["logger"].(string); strings.Contains(logger, "llm_hedge") && l["msg"] == msg {
				lines = append(lines, l)
			}
		}
		return len(lines) >= n
	}, func() string { return "want " + msg + " lines in the log:\n" + p.logs(t) })
	return lines
}

// Outages log at warn, so an operator filtering at warn sees each one: all
// providers failed (exhausted) and a stream cut after its commit. A lone
// success stays at debug. The message is static; the winner whose stream
// was cut says so in the chain.
func TestLogsOutagesAtWarn(t *testing.T) {
	down := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 503}}})
	cut := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultCut, After: 3}}})
	ok := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("warn-down", down, "models claude-down")+
		provider("warn-cut", cut, "models claude-cut")+
		provider("warn-ok", ok, "models claude-ok")+
		"hedge off\nretry {\n same_provider 0\n }\ncooldown {\n failures 100\n }\nstream {\n resume off\n }")

	ctx := ctxTimeout(t, 20*time.Second)
	if _, err := anthropicClient(p, "k").Messages.New(ctx, anthropicParams("claude-down")); err == nil {
		t.Fatal("claude-down: want an error, every provider answers 503")
	}
	if _, err := streamAnthropic(ctx, anthropicClient(p, "k"), anthropicParams("claude-cut")); err == nil {
		t.Fatal("claude-cut: want the stream to end in an error")
	}
	if _, err := anthropicClient(p, "k").Messages.New(ctx, anthropicParams("claude-ok")); err != nil {
		t.Fatal(err)
	}
	byModel := map[string]map[string]any{}
	for _, l := range logLines(t, p, "llm request", 3) {
		byModel[l["model"].(string)] = l
	}
	for model, want := range map[string][2]string{
		"claude-down": {"warn", "exhausted"},
		"claude-cut":  {"warn", "stream_error"},
		"claude-ok":   {"debug", "success"},
	} {
		l := byModel[model]
		if l == nil || l["level"] != want[0] || l["outcome"] != want[1] {
			t.Errorf("%s: want a %s line with outcome %s, got %v", model, want[0], want[1], l)
		}
		if l != nil && l["total_ms"] == nil {
			t.Errorf("%s: the duration is no field: %v", model, l)
		}
	}
	if l := byModel["claude-cut"]; l != nil {
		c := observeChain(t, l)
		if len(c) != 1 || c[0]["outcome"] != "stream_error" || c[0]["error_class"] != "stream_upstream_cut" {
			t.Errorf("cut stream chain: %v; want its one attempt ended by stream_error, class stream_upstream_cut", c)
		}
	}
}

// A breaker that opens logs one warn line, however many requests failed
// together; an admin reset and a probe that closes it log one info line
// each.
func TestLogsBreakerTransitionsOnce(t *testing.T) {
	up := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 503}}})
	p := startProxy(t, provider("brk", up)+"hedge off\nretry {\n same_provider 0\n }\ncooldown {\n failures 2\n }")
	fail := func(n int) {
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				if _, err := anthropicClient(p, "k").Messages.New(ctxTimeout(t, 10*time.Second), anthropicParams("claude-brk")); err == nil {
					t.Error("want an error: the only provider answers 503")
				}
			})
		}
		wg.Wait()
	}
	fail(8)
	observeRequestLines(t, p.LogFile, 8)
	opened := logLines(t, p, "provider breaker opened", 1)
	if len(opened) != 1 {
		t.Fatalf("%d breaker opened lines for one opening, want 1: %v", len(opened), opened)
	}
	o := opened[0]
	if o["level"] != "warn" || o["provider"] != "brk" || o["error_class"] != "overloaded" || o["open_until"] == nil ||
		!strings.Contains(o["error"].(string), "503") || o["consecutive_failures"].(float64) < 2 {
		t.Errorf("opened line: %v; want warn, provider brk, class overloaded, the 503 in the error, open_until, >= 2 failures", o)
	}

	if status, _, body := healthAdmin(t, p, http.MethodPost, "/llm_hedge/providers/brk/reset"); status != http.StatusOK {
		t.Fatalf("reset: %d %s", status, body)
	}
	reset := logLines(t, p, "provider breaker reset", 1)
	if len(reset) != 1 || reset[0]["level"] != "info" || reset[0]["was"] != "open" || reset[0]["provider"] != "brk" {
		t.Errorf("reset lines: %v; want one info line, was open", reset)
	}

	fail(1)
	fail(1)
	logLines(t, p, "provider breaker opened", 2)

	// Every candidate is open: the next request is the probe, and it works.
	if err := up.SetFaults(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := anthropicClient(p, "k").Messages.New(ctxTimeout(t, 10*time.Second), anthropicParams("claude-brk")); err != nil {
		t.Fatalf("probe request: %v", err)
	}
	closed := logLines(t, p, "provider breaker closed", 1)
	if len(closed) != 1 || closed[0]["level"] != "info" || closed[0]["provider"] != "brk" {
		t.Errorf("closed lines: %v; want one info line for brk", closed)
	}
	if n := len(logLines(t, p, "provider breaker opened", 2)); n != 2 {
		t.Errorf("%d opened lines, want 2", n)
	}
}

// A refused pool key logs one warn line by fingerprint, never the key,
// however many requests it refused together; an admin reset logs its
// return.
func TestLogsKeyDisabledAndReenabled(t *testing.T) {
	up := newUpstream(t, sim.Config{Key: "sk-good"})
	p := startProxy(t, provider("pool", up, "key sk-bad sk-good")+"hedge off\ncooldown {\n failures 100\n }")
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			if _, err := anthropicClient(p, "k").Messages.New(ctxTimeout(t, 10*time.Second), anthropicParams("claude-keys")); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	observeRequestLines(t, p.LogFile, 6)
	disabled := logLines(t, p, "provider key disabled", 1)
	if len(disabled) != 1 || disabled[0]["level"] != "warn" || disabled[0]["key"] != fingerprint("sk-bad") || disabled[0]["status"] != 401.0 {
		t.Errorf("disabled lines: %v; want one warn line naming sk-bad's fingerprint, status 401", disabled)
	}
	if status, _, body := healthAdmin(t, p, http.MethodPost, "/llm_hedge/providers/pool/reset"); status != http.StatusOK {
		t.Fatalf("reset: %d %s", status, body)
	}
	back := logLines(t, p, "provider key re-enabled", 1)
	if len(back) != 1 || back[0]["level"] != "info" || back[0]["key"] != fingerprint("sk-bad") || back[0]["reason"] != "admin reset" {
		t.Errorf("re-enabled lines: %v; want one info line for sk-bad, reason admin reset", back)
	}
	for _, line := range strings.Split(p.logs(t), "\n") {
		var l struct{ Logger string }
		_ = json.Unmarshal([]byte(line), &l)
		if strings.Contains(l.Logger, "llm_hedge") && strings.Contains(line, "sk-bad") {
			t.Errorf("a key in the module's log: %s", line)
		}
	}
}

// The admin list refuses a format it does not have, and its last error
// carries the (redacted) message, not only the class.
func TestAdminFormatAndLastErrorMessage(t *testing.T) {
	up := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 503}}})
	p := startProxy(t, provider("lem", up)+"hedge off\nretry {\n same_provider 0\n }")
	if _, err := anthropicClient(p, "k").Messages.New(context.Background(), anthropicParams("claude-lem")); err == nil {
		t.Fatal("want an error")
	}
	observeRequestLines(t, p.LogFile, 1)
	for format, want := range map[string]int{"yaml": http.StatusBadRequest, "TEXT": http.StatusBadRequest, "json": http.StatusOK, "text": http.StatusOK, "": http.StatusOK} {
		if status, _, body := healthAdmin(t, p, http.MethodGet, "/llm_hedge/providers?format="+format); status != want {
			t.Errorf("?format=%s: %d %s, want %d", format, status, body, want)
		}
	}
	_, _, body := healthAdmin(t, p, http.MethodGet, "/llm_hedge/providers")
	var views []struct {
		Name      string
		LastError struct{ Class, Message string } `json:"last_error"`
	}
	if err := json.Unmarshal([]byte(body), &views); err != nil {
		t.Fatal(err)
	}
	for _, v := range views {
		if v.Name == "lem" && (v.LastError.Class != "overloaded" || !strings.Contains(v.LastError.Message, "status 503")) {
			t.Errorf("last_error = %+v; want class overloaded and a message with the 503", v.LastError)
		}
	}
}
