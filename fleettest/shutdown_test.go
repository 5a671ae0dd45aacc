package fleettest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// shutdownCaddyfile: one instance whose grace_period is shorter than the
// stream the test starts.
const shutdownCaddyfile = `{
	admin 127.0.0.1:{$FLEET_ADMIN_PORT}
	persist_config off
	grace_period 1s
}

http://127.0.0.1:{$FLEET_PORT} {
	llm_hedge {
		provider slow {$FLEET_SIM_A} {
			models claude-*
		}
		provider late {$FLEET_SIM_B} {
			models late-*
		}
		hedge off
	}
}
`

// A stream still flowing when the grace period ends gets the dialect's
// error event and a clean end before the process exits, and a request
// still waiting for its first event gets a 503, whether the stop is
// `caddy stop` or SIGTERM: never a connection cut, which a client cannot
// tell from a network fault. Each is logged once, the provider not blamed.
func TestShutdownPastGraceEndsStreamWithErrorEvent(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Caddy processes")
	}
	dir := t.TempDir()
	bin := caddyBinary(t, buildDir(t))
	// 40 tokens 250 ms apart: 10 s, well past the 1 s grace.
	up := httptest.NewServer(sim.New(sim.Config{Tokens: 40, TokenDelay: simDuration(250)}))
	t.Cleanup(up.Close)
	lateSim := sim.New(sim.Config{Tokens: 9, FirstToken: simDuration(10000)})
	late := httptest.NewServer(lateSim)
	t.Cleanup(late.Close)
	config := writeConfig(t, dir, "shutdown.Caddyfile", shutdownCaddyfile)
	for _, how := range []string{"caddy stop", "SIGTERM"} {
		t.Run(strings.ReplaceAll(how, " ", "_"), func(t *testing.T) {
			p := newProcess(t, "instance", bin, config, filepath.Join(dir, strings.ReplaceAll(how, " ", "_")+".log"),
				"FLEET_SIM_A="+up.URL, "FLEET_SIM_B="+late.URL)
			t.Cleanup(func() {
				p.kill()
				if t.Failed() {
					out, _ := os.ReadFile(p.log)
					t.Logf("log (last 4 KiB):\n%s", tail(out, 4096))
				}
			})
			p.start(t)

			sent := len(lateSim.Requests())
			waiting := make(chan string, 1)
			go func() {
				body := `{"model":"late-test","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hello"}]}`
				resp, err := http.Post(p.URL()+"/v1/messages", "application/json", strings.NewReader(body))
				if err != nil {
					waiting <- err.Error()
					return
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				waiting <- fmt.Sprintf("%d %s %v", resp.StatusCode, b, err)
			}()
			body := `{"model":"claude-test","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hello"}]}`
			resp, err := http.Post(p.URL()+"/v1/messages", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			first := make([]byte, 1)
			if _, err := io.ReadFull(resp.Body, first); err != nil {
				t.Fatalf("no first byte: %v", err)
			}
			waitUntil(t, "the late provider asked", func() bool { return len(lateSim.Requests()) > sent })
			stopped := make(chan struct{})
			go func() {
				defer close(stopped)
				if how == "SIGTERM" {
					p.terminate(t)
				} else {
					p.stop(t)
				}
			}()
			rest, err := io.ReadAll(resp.Body)
			<-stopped
			got := string(first) + string(rest)
			if err != nil {
				t.Fatalf("the stream was cut (%v) instead of ending with an error event:\n%s", err, tail([]byte(got), 600))
			}
			if !strings.Contains(got, "event: error") || strings.Contains(got, "message_stop") {
				t.Fatalf("the stream did not end with an error event:\n%s", tail([]byte(got), 600))
			}
			if w := <-waiting; !strings.HasPrefix(w, "503 ") || !strings.Contains(w, "shutting down") || !strings.HasSuffix(w, "<nil>") {
				t.Fatalf("the request waiting for its first event got %s, want a 503 saying the proxy is shutting down", w)
			}
			log, _ := os.ReadFile(p.log)
			if n := strings.Count(string(log), `"msg":"llm request","dialect":"anthropic"`); n != 2 {
				t.Fatalf("%d request log lines, want one per request", n)
			}
			if strings.Contains(string(log), `"outcome":"provider_error"`) || !strings.Contains(string(log), `"outcome":"stream_error"`) {
				t.Fatalf("the log blames a provider, or does not say the stream broke:\n%s", tail(log, 3000))
			}
		})
	}
}

// continuationCaddyfile: a stream cut by its provider is being continued
// on the other when the process exits.
const continuationCaddyfile = `{
	admin 127.0.0.1:{$FLEET_ADMIN_PORT}
	persist_config off
	grace_period 1s
}

http://127.0.0.1:{$FLEET_PORT} {
	llm_hedge {
		provider cut {$FLEET_SIM_A} {
			api anthropic
			priority 0
		}
		provider cont {$FLEET_SIM_B} {
			api anthropic
			priority 1
		}
		hedge off
	}
}
`

// A stream whose continuation is still waiting for its first event when
// the process exits past its grace ends with the error event the relay
// held back, and the continuing provider is not blamed for the exit.
func TestShutdownPastGraceDuringContinuation(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Caddy process")
	}
	dir := t.TempDir()
	bin := caddyBinary(t, buildDir(t))
	text := strings.TrimSpace(strings.Repeat("alpha beta gamma delta epsilon zeta eta theta iota kappa ", 6))
	cut := httptest.NewServer(sim.New(sim.Config{Tokens: 60, Text: text, Faults: []sim.Fault{{Kind: sim.FaultCut, After: 40, Count: 1}}}))
	t.Cleanup(cut.Close)
	contSim := sim.New(sim.Config{Tokens: 60, Text: text, FirstToken: simDuration(10000)})
	cont := httptest.NewServer(contSim)
	t.Cleanup(cont.Close)
	config := writeConfig(t, dir, "continuation.Caddyfile", continuationCaddyfile)
	p := newProcess(t, "instance", bin, config, filepath.Join(dir, "instance.log"), "FLEET_SIM_A="+cut.URL, "FLEET_SIM_B="+cont.URL)
	t.Cleanup(p.kill)
	p.start(t)

	body := `{"model":"claude-test","max_tokens":200,"stream":true,"messages":[{"role":"user","content":"hello"}]}`
	resp, err := http.Post(p.URL()+"/v1/messages", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	waitUntil(t, "the continuation asked", func() bool { return len(contSim.Requests()) == 1 })
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		p.terminate(t)
	}()
	got, err := io.ReadAll(resp.Body)
	<-stopped
	log, _ := os.ReadFile(p.log)
	if err != nil || !strings.Contains(string(got), "event: error") {
		t.Fatalf("the stream did not end with an error event (%v):\n%s\nlog:\n%s", err, tail(got, 600), tail(log, 3000))
	}
	if !strings.Contains(string(log), `"stream_end":"shutdown"`) || strings.Contains(string(log), `"outcome":"provider_error"`) {
		t.Fatalf("the log blames the continuing provider, or does not say the process exited:\n%s", tail(log, 3000))
	}
}
