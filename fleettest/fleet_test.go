// Package fleettest runs llm_hedge as an operator runs a fleet: three
// Caddy processes built by xcaddy from one Caddyfile, behind a fourth
// running Caddy's reverse_proxy with round_robin and active health checks
// on llm_hedge_health, with simulated providers in the test process (they
// outlive the restarts of the instances, as a provider does).
// docs/fleet.md describes the recipe it follows.
package fleettest

import (
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// instanceCaddyfile is the one Caddyfile of the three instances; only the
// environment differs. shutdown_delay outlasts the balancer's health
// interval, so it stops sending before the listener closes; grace_period
// lets flowing streams finish.
const instanceCaddyfile = `{
	admin 127.0.0.1:{$FLEET_ADMIN_PORT}
	persist_config off
	grace_period 30s
	shutdown_delay 1s
}

http://127.0.0.1:{$FLEET_PORT} {
	header X-Fleet-Instance {$FLEET_INSTANCE}
	handle /llm_hedge/health {
		llm_hedge_health
	}
	handle {
		llm_hedge {
			provider dead {$FLEET_SIM_DEAD} {
				api anthropic
				models claude-*
				priority 0
			}
			provider a {$FLEET_SIM_A} {
				priority 1
			}
			provider b {$FLEET_SIM_B} {
				priority 1
			}
			hedge off
			retry {
				same_provider 0
			}
			cooldown {
				failures 2
				duration 5m
			}
			forward /v1/files /v1/files/*
		}
	}
}
`

// balancerCaddyfile: Caddy's reverse_proxy over the instances. A dial
// error (an instance restarting) is retried on another, and so is a POST
// an instance closed without a response byte (a reload's old server does
// that to a connection it accepted as it stopped: docs/fleet.md); the
// health check takes an instance out of rotation as soon as its shutdown
// is scheduled.
const balancerCaddyfile = `{
	admin 127.0.0.1:%d
	persist_config off
}

http://127.0.0.1:%d {
	reverse_proxy %s {
		lb_policy round_robin
		lb_retries 3
		lb_try_interval 50ms
		health_uri /llm_hedge/health
		health_interval 100ms
		health_timeout 1s
		health_fails 1
		health_passes 1
		flush_interval -1
		lb_retry_match {
			method POST
		}
		request_buffers 4MiB
		transport http {
			keepalive off
		}
	}
}
`

// Instances in the fleet.
const instances = 3

// fleet is the running fleet and its providers.
type fleet struct {
	sims      map[string]*sim.Simulator
	simURL    map[string]string
	instances []*process
	balancer  *process
}

func startFleet(t *testing.T) *fleet {
	t.Helper()
	dir := t.TempDir()
	bin := caddyBinary(t, buildDir(t))
	f := &fleet{sims: map[string]*sim.Simulator{}, simURL: map[string]string{}}
	for name, cfg := range map[string]sim.Config{
		"a":    {Tokens: 9, TokenDelay: simDuration(20)},
		"b":    {Tokens: 9, TokenDelay: simDuration(20)},
		"dead": {Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 503}}},
	} {
		s := sim.New(cfg)
		srv := httptest.NewServer(s)
		t.Cleanup(srv.Close)
		f.sims[name], f.simURL[name] = s, srv.URL
	}
	config := writeConfig(t, dir, "instance.Caddyfile", instanceCaddyfile)
	var upstreams []string
	for i := range instances {
		name := fmt.Sprintf("instance-%d", i+1)
		p := newProcess(t, name, bin, config, filepath.Join(dir, name+".log"), "FLEET_INSTANCE="+name,
			"FLEET_SIM_A="+f.simURL["a"], "FLEET_SIM_B="+f.simURL["b"], "FLEET_SIM_DEAD="+f.simURL["dead"])
		f.instances = append(f.instances, p)
		upstreams = append(upstreams, fmt.Sprintf("127.0.0.1:%d", p.port))
	}
	lb := &process{name: "balancer", bin: bin, port: freePort(t), admin: freePort(t), log: filepath.Join(dir, "balancer.log")}
	lb.config = writeConfig(t, dir, "balancer.Caddyfile", fmt.Sprintf(balancerCaddyfile, lb.admin, lb.port, strings.Join(upstreams, " ")))
	f.balancer = lb
	t.Cleanup(func() {
		for _, p := range append(f.instances, f.balancer) {
			p.kill()
		}
		if t.Failed() {
			for _, p := range append(f.instances, f.balancer) {
				out, _ := os.ReadFile(p.log)
				t.Logf("%s log (last 4 KiB):\n%s", p.name, tail(out, 4096))
			}
		}
	})
	for _, p := range f.instances {
		p.start(t)
	}
	lb.start(t)
	return f
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// buildDir holds the binary for the whole run (the build is shared by
// the tests of the package; t.TempDir would remove it after the first).
func buildDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("llmhedge-fleettest-%d", os.Getpid()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestMain(m *testing.M) {
	code := m.Run()
	_ = os.RemoveAll(filepath.Join(os.TempDir(), fmt.Sprintf("llmhedge-fleettest-%d", os.Getpid())))
	os.Exit(code)
}

// TestFleet runs the cases in order on one fleet: each needs the fleet
// running, and starting it is the expensive part.
func TestFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("the fleet test starts four Caddy processes")
	}
	f := startFleet(t)
	var conv *conversation
	t.Run("ResponsesAcrossInstances", func(t *testing.T) { conv = f.responsesAcrossInstances(t) })
	t.Run("AfterRestartOfCreator", func(t *testing.T) {
		if conv == nil {
			t.Skip("needs the conversation of ResponsesAcrossInstances")
		}
		f.afterRestartOfCreator(t, conv)
	})
	t.Run("FilesAcrossInstances", f.filesAcrossInstances)
	t.Run("RollingRestartUnderLoad", f.rollingRestartUnderLoad)
	t.Run("DeadPrimaryBound", f.deadPrimaryBound)
	t.Run("CodexThroughBalancer", f.codexThroughBalancer)
}
