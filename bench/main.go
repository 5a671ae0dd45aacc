// Command bench measures llm_hedge against Caddy's own reverse_proxy on
// loopback, with the simulated provider at zero think time, and prints the
// side-by-side table of the README:
//
//	go run ./bench -caddy ./caddy                    # the comparison, < 2 minutes
//	go run ./bench -caddy ./caddy -idle-streams 2000 # memory of idle committed streams
//	go run ./bench -caddy ./caddy -soak 30m          # the soak: 5% provider faults, reloads, client aborts (make -f xcaddy.mk soak)
//	go run ./bench -caddy ./caddy -modes translate-all -configs llm_hedge # every translation pair beside its client's native stream (issue 56)
//
// The simulated providers run in this process, not in the Caddy under
// test: the CPU time and memory read from /proc/<pid> of the Caddy process
// are then the proxy's alone, for every configuration alike (inside Caddy,
// the simulator's own work would dilute the difference being measured).
// Each configuration runs in a fresh Caddy process, so its peak RSS is its
// own. Without -caddy, a Caddy with the module is built from this checkout.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/bench/load"
	"github.com/llmhedge/caddy-llm-hedge/sim"
)

var (
	caddyBin    = flag.String("caddy", "", "caddy binary with the llm_hedge module (default: build one from this checkout)")
	duration    = flag.Duration("duration", 3*time.Second, "measured time of each cell")
	warmup      = flag.Duration("warmup", 500*time.Millisecond, "unmeasured load before each cell")
	concList    = flag.String("conc", "1,16,64", "concurrencies (comma-separated); 1 shows the added latency of an unloaded proxy")
	modeList    = flag.String("modes", "non-stream,stream,responses-stream,gemini-stream", "response shapes: non-stream, stream (Anthropic), openai-stream (OpenAI Chat Completions), responses-stream (OpenAI Responses), gemini-stream, bedrock-stream (Anthropic through api bedrock; adds llm_hedge_sigv4), translate-stream/<client>-<target> (the client format's native stream served by a provider of the target format with translate <client>, one per translation pair, e.g. translate-stream/openai-anthropic; translate-stream alone is translate-stream/anthropic-openai), translate-all (every translate-stream pair, each round of each after the native stream's of its client format: the table then shows each pair's llm_hedge CPU per request against the native cell's, and paired by round)")
	configList  = flag.String("configs", "direct,reverse_proxy,llm_hedge,llm_hedge_3", "configurations to compare; llm_hedge_key is llm_hedge with its provider's api and own key (the quota estimate then reads the body; native modes only); reverse_proxy_2 is reverse_proxy again, judged against it as llm_hedge is (an A/A control of the machine's noise)")
	rounds      = flag.Int("rounds", 1, "runs of every cell, every other one with the configurations in reverse order; the table shows the median of each figure")
	profileDir  = flag.String("profile", "", "save a CPU profile (.pprof) and an allocation profile (.allocs, since the process started) of Caddy for every proxied cell into this directory")
	rpIdle      = flag.Int("rp-idle", 256, "reverse_proxy keepalive_idle_conns_per_host (llm_hedge's pool holds 256; 0 = Caddy's default of 32)")
	idleStreams = flag.Int("idle-streams", 0, "instead of the comparison: hold this many committed, idle streams open and report the memory per stream")
	soakFor     = flag.Duration("soak", 0, "instead of the comparison: run a steady load of all four dialects with 5% injected provider faults, reloads and client aborts for this long")
	soakRate    = flag.Float64("soak-rate", 150, "soak: requests started per second")
	soakReload  = flag.Duration("soak-reload", 30*time.Second, "soak: run `caddy reload` this often, alternately renaming and restoring a provider (0: never)")
	soakAbort   = flag.Float64("soak-abort", 1, "soak: percent of streams the client leaves after its first bytes")
	caddyCPUs   = flag.String("caddy-cpus", "", "run Caddy on these CPUs only (taskset -c list, e.g. 1); run the bench with taskset on the others (taskset -c 0 go run ./bench …) for a measurement without the two contending for a core")
	routeCells  = flag.Int("route", 0, "instead of the comparison: this many streams (1000 for the acceptance cell) at -route-conc through three providers of one tier at 100/300/900 ms to their first token, under lb_policy first (the fastest written first: the oracle), adaptive and weighted_random; report first-content p50/p99, attempts and hedges (docs/routing.md)")
	routeConc   = flag.Int("route-conc", 16, "route: streams at once")
	keep        = flag.Bool("keep", false, "keep the scratch directory (Caddyfiles, Caddy logs) and print its path")
)

// Response shapes of the comparison: a non-streaming answer of about 1 KB
// and a stream of 60 events (Anthropic: message_start, content_block_start,
// ping, 54 deltas, content_block_stop, message_delta, message_stop). The
// OpenAI Responses and Gemini streams carry the same 54 output tokens.
const (
	nonStreamTokens = 153 // 17 repetitions of the 9-word default text: ~1 KiB body
	streamTokens    = 54
)

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	dir, err := os.MkdirTemp("", "llm-hedge-bench-")
	if err != nil {
		return err
	}
	if *keep {
		fmt.Fprintln(os.Stderr, "bench: scratch directory (kept):", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	bin, err := resolveCaddy(dir)
	if err != nil {
		return err
	}
	fmt.Println(machine(bin))
	if *upstreamTLS {
		if err := setupUpstreamTLS(dir); err != nil {
			return err
		}
		fmt.Println("providers: TLS; both proxies negotiate HTTP/2 with them")
	}
	switch {
	case *soakFor > 0:
		return runSoak(bin, dir)
	case *idleStreams > 0:
		return runIdleStreams(bin, dir, *idleStreams)
	case *routeCells > 0:
		return runRoute(bin, dir, *routeCells, *routeConc)
	}
	return runCompare(bin, dir)
}

// resolveCaddy returns -caddy, or builds bench/cmd/caddy from this
// checkout (the same module set as the xcaddy build).
func resolveCaddy(dir string) (string, error) {
	if *caddyBin != "" {
		return filepath.Abs(*caddyBin)
	}
	out := filepath.Join(dir, "caddy")
	fmt.Fprintln(os.Stderr, "bench: building caddy from ./bench/cmd/caddy (pass -caddy to use a built one)")
	cmd := exec.Command("go", "build", "-o", out, "./bench/cmd/caddy")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building caddy: %w", err)
	}
	return out, nil
}

func machine(bin string) string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	load := ""
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		load = ", load average " + strings.Join(strings.Fields(string(b))[:3], " ")
	}
	ver, _ := exec.Command(bin, "version").Output()
	return fmt.Sprintf("machine: %d × %s (nproc %d%s), %s, caddy %s",
		runtime.NumCPU(), model, runtime.NumCPU(), load, runtime.Version(), strings.TrimSpace(string(ver)))
}

// cellResult is one configuration under one load.
type cellResult struct {
	mode, config string
	conc         int
	rps          float64
	p50, p99     time.Duration
	cpuPer1k     float64 // CPU seconds of the Caddy process per 1,000 requests; -1 direct
	userPer1k    float64 // the user-mode share of cpuPer1k (the rest is the kernel's)
	hwmKB        int64   // peak RSS of the Caddy process; -1 direct
	readsPerReq  float64 // read system calls of the Caddy process per request (/proc/<pid>/io)
	writesPerReq float64 // write system calls per request
	allocsPerReq float64 // heap allocations of the Caddy process per request
	bytesPerReq  float64 // bytes allocated per request
	requests     int
	failed       int
	failSample   string
	respBytes    int
	events       int // SSE events of a complete answer; 0 non-stream
	round        int
	// The medians of the rounds' own ratios to reverse_proxy (each
	// round's two cells ran back to back): 0 when not computed.
	pairedRPS, pairedCPU float64
	// A translating cell's: the median of its rounds' ratios to the
	// native stream cell of the same round (modeGroups); 0 when none.
	xlPairedCPU float64
}

func runCompare(bin, dir string) error {
	concs, err := parseInts(*concList)
	if err != nil {
		return err
	}
	modes, err := parseModes(*modeList)
	if err != nil {
		return err
	}
	configs := strings.Split(*configList, ",")
	if *upstreamTLS {
		if err := checkUpstreamTLS(configs); err != nil {
			return err
		}
	}
	if *slicesFlag > 0 && *profileDir != "" {
		return fmt.Errorf("-profile takes one configuration at a time: not with -slices")
	}
	var all []string // the table's columns: every mode's configurations
	for _, mode := range modes {
		for _, c := range modeConfigs(benchModes[mode], configs) {
			if !slices.Contains(all, c) {
				all = append(all, c)
			}
		}
	}
	sims, err := startSims(sigv4Sim+1, sim.Config{})
	if err != nil {
		return err
	}
	defer stopSims(sims)

	var results []cellResult
	set := "" // the mode the simulators are configured for
	for _, group := range modeGroups(modes) {
		for _, conc := range concs {
			for round := 0; round < *rounds; round++ {
				for _, mode := range group {
					m := benchModes[mode]
					if mode != set {
						for i, s := range sims {
							if err := s.SetConfig(m.simConfig(i)); err != nil {
								return err
							}
						}
						set = mode
					}
					rs, err := runRound(bin, dir, sims, mode, m, configs, conc, round)
					if err != nil {
						return err
					}
					results = append(results, rs...)
				}
			}
		}
	}
	rs := medians(results)
	printTable(os.Stdout, rs, modes, concs, all)
	if *upstreamTLS {
		var reqs, h2 int64
		for _, s := range sims {
			reqs, h2 = reqs+s.requests.Load(), h2+s.h2.Load()
		}
		fmt.Printf("providers over TLS: %d of %d upstream requests were HTTP/2\n", h2, reqs)
	}
	var bad []string
	for _, r := range rs {
		if r.failed > 0 {
			bad = append(bad, fmt.Sprintf("%s c=%d %s", r.mode, r.conc, r.config))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("failed requests in %d cell(s), their figures are not valid: %s", len(bad), strings.Join(bad, "; "))
	}
	return nil
}

// runRound runs one round of mode's cell at conc: each configuration in
// turn (in reverse every other round), or interleaved with -slices.
func runRound(bin, dir string, sims []*simServer, mode string, m benchMode, configs []string, conc, round int) ([]cellResult, error) {
	order := modeConfigs(m, configs)
	if round%2 == 1 {
		// Every other round in reverse: a machine whose speed
		// drifts during a round favours neither configuration.
		order = slices.Clone(order)
		slices.Reverse(order)
	}
	var cells, results []cellResult
	if *slicesFlag > 0 {
		rs, err := runInterleaved(bin, dir, sims, mode, order, m, conc, round, *slicesFlag)
		if err != nil {
			return nil, fmt.Errorf("%s c=%d: %w", mode, conc, err)
		}
		cells = rs
	}
	for i, config := range order {
		var r cellResult
		if *slicesFlag > 0 {
			r = cells[i]
		} else {
			var err error
			if r, err = runCell(bin, dir, sims, mode, config, m, conc, round); err != nil {
				return nil, fmt.Errorf("%s c=%d %s: %w", mode, conc, config, err)
			}
		}
		fmt.Fprintf(os.Stderr, "bench: %-16s c=%-3d %-13s %8.0f req/s  p50 %-9v p99 %-9v CPU %.3f s/1k (user %.3f)  syscalls/req %.1f read %.1f write  allocs/req %.0f (%.1f KiB)  failed %d\n",
			mode, conc, config, r.rps, r.p50, r.p99, r.cpuPer1k, r.userPer1k, r.readsPerReq, r.writesPerReq, r.allocsPerReq, r.bytesPerReq/1024, r.failed)
		results = append(results, r)
	}
	return results, nil
}

func runCell(bin, dir string, sims []*simServer, mode, config string, m benchMode, conc, round int) (cellResult, error) {
	res := cellResult{mode: mode, config: config, conc: conc, round: round, cpuPer1k: -1, hwmKB: -1}
	target := sims[0].URL
	var proc *caddyProc
	if config != "direct" {
		var err error
		proc, err = startCaddy(bin, dir, fmt.Sprintf("%s-%s-%d-%d", config, fileName(mode), conc, round), "", modeSite(m, config, sims), caddyEnv(config)...)
		if err != nil {
			return res, err
		}
		defer proc.Stop()
		target = proc.URL
	}
	m = m.forConfig(config)
	tr := load.NewTransport(conc)
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	// phase: 0 warm-up, 1 measured, 2 stop.
	var phase atomic.Int32
	workers := make([]tally, conc)
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range workers {
		w := &workers[i]
		w.lat = make([]time.Duration, 0, 1<<14)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf bytes.Buffer
			for phase.Load() != 2 {
				lat, err := timedRequest(ctx, client, target, m, &buf)
				if phase.Load() == 1 {
					w.add(lat, err, m, &buf, true) // counted only while measured: completed in the window
				}
			}
		}()
	}
	time.Sleep(*warmup)
	before := spendingFrom(proc)
	var prof chan error
	if proc != nil && *profileDir != "" {
		_ = os.MkdirAll(*profileDir, 0o755)
		prof = proc.profile(*duration, filepath.Join(*profileDir, fmt.Sprintf("%s-%s-c%d-%d.pprof", config, fileName(mode), conc, round)))
	}
	t0 := time.Now()
	phase.Store(1)
	time.Sleep(*duration)
	phase.Store(2)
	elapsed := time.Since(t0)
	after := spendingTo(proc)
	wg.Wait()
	if prof != nil {
		if err := <-prof; err != nil {
			fmt.Fprintln(os.Stderr, "bench: profile:", err)
		}
		if err := proc.save("/debug/pprof/allocs", filepath.Join(*profileDir, fmt.Sprintf("%s-%s-c%d-%d.allocs", config, fileName(mode), conc, round))); err != nil {
			fmt.Fprintln(os.Stderr, "bench: allocation profile:", err)
		}
	}
	var all tally
	for i := range workers {
		all.merge(&workers[i])
	}
	all.finish(&res, proc, spent{}.add(before, after), elapsed)
	return res, nil
}

// timedRequest sends one request and checks the response cheaply (the
// load generator must not be the bottleneck): status 200 and the end of a
// complete answer.
func timedRequest(ctx context.Context, c *http.Client, url string, m benchMode, buf *bytes.Buffer) (time.Duration, error) {
	start := time.Now()
	resp, err := c.Do(m.newRequest(ctx, url))
	if err != nil {
		return 0, err
	}
	buf.Reset()
	_, err = buf.ReadFrom(resp.Body)
	resp.Body.Close()
	lat := time.Since(start)
	switch b := buf.Bytes(); {
	case err != nil:
		return 0, err
	case resp.StatusCode != http.StatusOK:
		return 0, fmt.Errorf("status %d: %.200s", resp.StatusCode, b)
	}
	if err := m.check(buf.Bytes()); err != nil {
		return 0, err
	}
	return lat, nil
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("bad number %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}
