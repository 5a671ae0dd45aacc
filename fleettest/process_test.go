package fleettest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The binary every process of the fleet runs: the one `make -f xcaddy.mk
// build` makes (xcaddy, Caddy v2.11.9, this checkout pinned), built once
// per test run; FLEET_CADDY names one already built instead.
var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
	buildSkip string
)

const (
	caddyVersion = "v2.11.9"
	xcaddyPkg    = "github.com/caddyserver/xcaddy/cmd/xcaddy@v0.4.5"
	module       = "github.com/llmhedge/caddy-llm-hedge@v0.0.0-00010101000000-000000000000"
)

// caddyBinary returns the path of the built caddy, or skips the test when
// xcaddy cannot be installed (no network and no module cache).
func caddyBinary(t *testing.T, dir string) string {
	t.Helper()
	buildOnce.Do(func() {
		if bin := os.Getenv("FLEET_CADDY"); bin != "" {
			builtBin = bin
			return
		}
		xcaddy, err := exec.LookPath("xcaddy")
		if err != nil {
			gobin := filepath.Join(goEnv("GOPATH"), "bin")
			xcaddy = filepath.Join(gobin, "xcaddy")
			if _, err := os.Stat(xcaddy); err != nil {
				if out, err := exec.Command("go", "install", xcaddyPkg).CombinedOutput(); err != nil {
					buildSkip = fmt.Sprintf("xcaddy is not installed and `go install %s` failed: %v\n%s", xcaddyPkg, err, out)
					return
				}
			}
		}
		root, err := filepath.Abs("..") // the tests run in this package's directory
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "caddy")
		// The module is not published: pinned to a zero version, replaced by this checkout (xcaddy.mk).
		cmd := exec.Command(xcaddy, "build", caddyVersion, "--output", builtBin, "--with", module+"="+root)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "XCADDY_SKIP_CLEANUP=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("xcaddy build: %v\n%s", err, out)
		}
	})
	if buildSkip != "" {
		t.Skip(buildSkip)
	}
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

func goEnv(name string) string {
	out, _ := exec.Command("go", "env", name).Output()
	return strings.TrimSpace(string(out))
}

// freePort returns a loopback port nothing listens on now. Caddy binds
// with SO_REUSEPORT, so two processes given one port would share it:
// every process of the fleet gets its own, chosen below the kernel's
// ephemeral range (32768+), where the other test packages' in-process
// Caddys get theirs (port 0): a fleet instance restarting on its port
// leaves it unbound for a moment, and a test of another package handed
// that port by the kernel would share it with the instance.
func freePort(t *testing.T) int {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 500 {
		p := 20000 + rand.IntN(12000)
		if portsTaken[p] {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		l.Close()
		portsTaken[p] = true
		return p
	}
	t.Fatal("no free port in 20000-31999")
	return 0
}

var (
	portsMu    sync.Mutex
	portsTaken = map[int]bool{}
)

// process is one Caddy process of the fleet, restartable on its ports.
type process struct {
	name        string
	bin, config string
	port, admin int
	env         []string
	log         string

	cmd    *exec.Cmd
	exited chan struct{}
}

// newProcess is a Caddy process (not started) of bin serving config on free
// ports, which its environment gives as FLEET_PORT and FLEET_ADMIN_PORT,
// beside env.
func newProcess(t *testing.T, name, bin, config, log string, env ...string) *process {
	p := &process{name: name, bin: bin, config: config, port: freePort(t), admin: freePort(t), log: log}
	p.env = append([]string{fmt.Sprintf("FLEET_PORT=%d", p.port), fmt.Sprintf("FLEET_ADMIN_PORT=%d", p.admin)}, env...)
	return p
}

// writeConfig writes a Caddyfile into dir and returns its path.
func writeConfig(t *testing.T, dir, name, text string) string {
	t.Helper()
	config := filepath.Join(dir, name)
	if err := os.WriteFile(config, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return config
}

func (p *process) URL() string { return fmt.Sprintf("http://127.0.0.1:%d", p.port) }

// start runs `caddy run` and waits until its site answers the health
// check (or, for the balancer, accepts connections).
func (p *process) start(t *testing.T) {
	t.Helper()
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(p.bin, "run", "--config", p.config, "--adapter", "caddyfile")
	cmd.Stdout, cmd.Stderr = logf, logf
	dir := filepath.Dir(p.log)
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir, "HOME="+dir)
	cmd.Env = append(cmd.Env, p.env...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", p.name, err)
	}
	p.cmd, p.exited = cmd, make(chan struct{})
	go func(exited chan struct{}) {
		_ = cmd.Wait()
		close(exited)
	}(p.exited)
	waitUntil(t, p.name+" answering", func() bool {
		select {
		case <-p.exited:
			out, _ := os.ReadFile(p.log)
			t.Fatalf("%s exited at start:\n%s", p.name, out)
		default:
		}
		return p.ready()
	})
}

// ready reports whether the process answers on its port: a 200 from the
// health check where there is one, any answer elsewhere.
func (p *process) ready() bool {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(p.URL() + "/llm_hedge/health")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusNotFound
}

// terminate sends SIGTERM, as a process manager does, and waits for exit.
func (p *process) terminate(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("%s: SIGTERM: %v", p.name, err)
	}
	p.wait(t)
}

// terminateDraining sends SIGTERM and checks that, during shutdown_delay,
// the health check answers 503 (the balancer's cue) while the process
// still runs; then waits for exit.
func (p *process) terminateDraining(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("%s: SIGTERM: %v", p.name, err)
	}
	draining := false
	waitUntil(t, p.name+" draining", func() bool {
		select {
		case <-p.exited:
			return true
		default:
		}
		c := http.Client{Timeout: time.Second}
		resp, err := c.Get(p.URL() + "/llm_hedge/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		draining = resp.StatusCode == http.StatusServiceUnavailable
		return draining
	})
	if !draining {
		t.Fatalf("%s exited without its health check answering 503 first", p.name)
	}
	p.wait(t)
}

// reload runs `caddy reload --force` with the same Caddyfile (adapted in
// the command's process, hence its environment).
func (p *process) reload(t *testing.T) {
	t.Helper()
	cmd := exec.Command(p.bin, "reload", "--config", p.config, "--adapter", "caddyfile",
		"--address", fmt.Sprintf("127.0.0.1:%d", p.admin), "--force")
	cmd.Env = append(os.Environ(), p.env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: caddy reload: %v\n%s", p.name, err, out)
	}
}

// stop runs `caddy stop` against its admin endpoint and waits for exit.
func (p *process) stop(t *testing.T) {
	t.Helper()
	out, err := exec.Command(p.bin, "stop", "--address", fmt.Sprintf("127.0.0.1:%d", p.admin)).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: caddy stop: %v\n%s", p.name, err, out)
	}
	p.wait(t)
}

func (p *process) wait(t *testing.T) {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not exit", p.name)
	}
}

// kill ends the process at once (cleanup).
func (p *process) kill() {
	if p.cmd == nil {
		return
	}
	select {
	case <-p.exited:
	default:
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// waitUntil polls an external process's state until cond holds: a
// process has no channel to wait on.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}
