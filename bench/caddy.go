package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/freeport"
)

// caddyProc is one Caddy process under test.
type caddyProc struct {
	cmd      *exec.Cmd
	waitExit chan error
	pid      int
	URL      string // the site
	Admin    string // the admin endpoint (pprof, metrics)
	log      string
	bin      string
	// cfgPath holds the Caddyfile of the ports below (reload rewrites it).
	cfgPath         string
	port, adminPort int
}

// caddyfile wraps a site body in the global options every run uses: a
// loopback admin endpoint (pprof lives there) and no autosaved config.
func caddyfile(port, admin int, globals, site string) string {
	return fmt.Sprintf(`{
	admin 127.0.0.1:%d
	persist_config off
%s
}
http://127.0.0.1:%d {
%s
}
`, admin, globals, port, site)
}

// startCaddy runs `caddy run` with the Caddyfile made of globals and site,
// and waits until the site answers on its port; env is added to its environment.
func startCaddy(bin, dir, name, globals, site string, env ...string) (*caddyProc, error) {
	port, admin := freePort(), freePort()
	cfgPath := filepath.Join(dir, name+".Caddyfile")
	if err := os.WriteFile(cfgPath, []byte(caddyfile(port, admin, globals, site)), 0o644); err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, "run", "--config", cfgPath, "--adapter", "caddyfile")
	if *caddyCPUs != "" {
		// The proxy under test on its own cores (and the Go runtime sizes
		// GOMAXPROCS to them): run the bench itself with taskset on the
		// others, so neither steals the other's CPU or caches.
		cmd = exec.Command("taskset", "-c", *caddyCPUs, bin, "run", "--config", cfgPath, "--adapter", "caddyfile")
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	// Caddy's data and config directories go to the scratch directory.
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir, "HOME="+dir)
	cmd.Env = append(cmd.Env, env...)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	p := &caddyProc{cmd: cmd, pid: cmd.Process.Pid, URL: fmt.Sprintf("http://127.0.0.1:%d", port),
		Admin: fmt.Sprintf("http://127.0.0.1:%d", admin), log: logPath, bin: bin, cfgPath: cfgPath, port: port, adminPort: admin}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 200*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		select {
		case err := <-exited:
			out, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("caddy exited (%v):\n%s", err, out)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stopWith(exited)
			out, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("caddy did not listen on %d within 20s:\n%s", port, out)
		}
	}
	p.waitExit = exited
	return p, nil
}

func (p *caddyProc) stopWith(exited chan error) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-exited
	}
}

// reload rewrites the process's Caddyfile with globals and site on the
// same ports and runs `caddy reload` on it, as an operator would.
func (p *caddyProc) reload(globals, site string) error {
	if err := os.WriteFile(p.cfgPath, []byte(caddyfile(p.port, p.adminPort, globals, site)), 0o644); err != nil {
		return err
	}
	out, err := exec.Command(p.bin, "reload", "--config", p.cfgPath, "--adapter", "caddyfile",
		"--address", fmt.Sprintf("127.0.0.1:%d", p.adminPort)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("caddy reload: %v: %s", err, out)
	}
	return nil
}

// Stop ends the process (SIGTERM, then SIGKILL after 10s).
func (p *caddyProc) Stop() { p.stopWith(p.waitExit) }

// cpuTimes is the user and the system CPU time the process used so far.
func (p *caddyProc) cpuTimes() (user, sys float64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid))
	if err != nil {
		return 0, 0
	}
	// Fields after the command name (which may hold spaces) start at
	// field 3; utime and stime are fields 14 and 15.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return ut / clockTicks, st / clockTicks
}

// syscalls is the number of read and write system calls the process made
// so far (/proc/<pid>/io: syscr and syscw, which count every read-like and
// write-like call, sockets included).
func (p *caddyProc) syscalls() (reads, writes int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", p.pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ": ")
		n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		switch k {
		case "syscr":
			reads = n
		case "syscw":
			writes = n
		}
	}
	return reads, writes
}

// clockTicks is USER_HZ, 100 on every Linux architecture Go supports.
const clockTicks = 100

// memKB reads a field of /proc/<pid>/status in KiB (VmRSS, VmHWM).
func (p *caddyProc) memKB(field string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// mallocs reads the Go runtime's count of heap allocations and of bytes
// allocated so far, from the admin endpoint's expvar memstats.
func (p *caddyProc) mallocs() (n, bytes uint64) {
	resp, err := http.Get(p.Admin + "/debug/vars")
	if err != nil {
		return 0, 0
	}
	defer resp.Body.Close()
	var v struct {
		Memstats struct{ Mallocs, TotalAlloc uint64 } `json:"memstats"`
	}
	if json.NewDecoder(resp.Body).Decode(&v) != nil {
		return 0, 0
	}
	return v.Memstats.Mallocs, v.Memstats.TotalAlloc
}

// goroutines reads the goroutine count from the admin endpoint's pprof.
func (p *caddyProc) goroutines() int {
	resp, err := http.Get(p.Admin + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	line, _ := bufio.NewReader(resp.Body).ReadString('\n')
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "goroutine profile: total")))
	if err != nil {
		return -1
	}
	return n
}

// profile saves a CPU profile of the next d to path, in the background.
func (p *caddyProc) profile(d time.Duration, path string) chan error {
	done := make(chan error, 1)
	go func() {
		secs := max(1, int(d.Seconds()))
		resp, err := http.Get(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", p.Admin, secs))
		if err != nil {
			done <- err
			return
		}
		defer resp.Body.Close()
		f, err := os.Create(path)
		if err != nil {
			done <- err
			return
		}
		_, err = io.Copy(f, resp.Body)
		f.Close()
		done <- err
	}()
	return done
}

// liveMemory collects garbage in the process (pprof's gc=1) and returns
// the Go heap and goroutine stacks in use after it, in bytes: the memory
// the process holds, without the GC's headroom that RSS also counts.
func (p *caddyProc) liveMemory() (heap, stack int64) {
	resp, err := http.Get(p.Admin + "/debug/pprof/heap?debug=1&gc=1")
	if err != nil {
		return -1, -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "# HeapInuse = "); ok {
			heap, _ = strconv.ParseInt(v, 10, 64)
		}
		if v, ok := strings.CutPrefix(sc.Text(), "# Stack = "); ok { // "inuse / sys"
			stack, _ = strconv.ParseInt(strings.Fields(v)[0], 10, 64)
		}
	}
	return heap, stack
}

// save writes what the admin endpoint serves at path (a heap profile, the
// goroutine dump) to file.
func (p *caddyProc) save(path, file string) error {
	resp, err := http.Get(p.Admin + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// metrics returns the lines of the Prometheus exposition that start with
// prefix.
func (p *caddyProc) metrics(prefix string) []string {
	resp, err := http.Get(p.Admin + "/metrics")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), prefix) {
			out = append(out, sc.Text())
		}
	}
	return out
}

// freePort is freeport.Port (a port never handed out before in this
// run: a Caddy of an earlier cell may still hold one while it stops); a
// run without one cannot go on.
func freePort() int {
	port, err := freeport.Port()
	if err != nil {
		panic(err)
	}
	return port
}
