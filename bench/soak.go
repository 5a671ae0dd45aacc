package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/bench/load"
	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// soakTokens: two repetitions of the default text per answer.
const soakTokens = 18

var soakText = strings.TrimSpace(strings.Repeat(sim.DefaultText+" ", soakTokens/9))

// runSoak is the proof that nothing is lost under a long faulty load:
// streams and answers of all four dialects at a steady rate through three
// providers that fault on ~5% of requests (every kind the simulator has),
// a `caddy reload` every -soak-reload that alternately renames and
// restores a provider, and a client that leaves 1% of its streams. Then
// the faults stop and the checks of soak_checks.go run: every response
// complete or a clean error in its dialect, no panic, no attempt over the
// retry bound, every breaker closed again, and memory and goroutines back
// to their baseline.
func runSoak(bin, dir string) error {
	sims, err := startSims(3, sim.Config{Tokens: soakTokens, Faults: load.SoakFaults()})
	if err != nil {
		return err
	}
	defer stopSims(sims)
	var urls []string
	for _, s := range sims {
		urls = append(urls, s.URL)
	}
	siteOf := func(renamed bool) string { return "\tllm_hedge {\n" + load.SoakProxyBlock(urls, renamed) + "\t}" }
	proc, err := startCaddy(bin, dir, "soak", "", siteOf(false))
	if err != nil {
		return err
	}
	defer proc.Stop()
	tr := load.NewTransport(256)
	client := &http.Client{Transport: tr}
	cfg := load.SoakConfig{BaseURL: proc.URL, Client: client, Model: "claude-soak", Kinds: load.AllKinds, WantText: soakText,
		Rate: *soakRate, MaxInFlight: 256, Timeout: 30 * time.Second, AbortPercent: *soakAbort}
	quiesce := func() (rssKB int64, goroutines int) { return soakQuiesce(proc, tr, sims) }

	warm := min(20*time.Second, max(*soakFor/20, 3*time.Second))
	fmt.Printf("soak: %v at %.0f req/s (Anthropic, Chat Completions, Responses and Gemini; stream and non-stream), "+
		"3 providers each faulting ~5%% of requests, a reload every %v (renaming sim-c and back), %.0f%% of streams left by the client; warm-up %v\n",
		*soakFor, *soakRate, *soakReload, *soakAbort, warm)
	wcfg := cfg
	wcfg.Duration = warm
	if t := load.Soak(context.Background(), wcfg); t.Dirty > 0 {
		fmt.Println("warm-up:", t.Summary())
	}
	rss0, g0 := quiesce()
	fmt.Printf("start (quiet, after warm-up): RSS %.1f MiB, goroutines %d\n", float64(rss0)/1024, g0)

	reloads, stopReloads := soakReloads(proc, siteOf)
	cfg.Duration = *soakFor
	cfg.Every = max(*soakFor/20, 5*time.Second)
	cfg.Progress = func(elapsed time.Duration, t *load.Tally) {
		sent, complete, clean, dirty, aborted := t.Snapshot()
		fmt.Printf("  %6s  sent %7d  complete %7d  clean errors %5d  dirty %d  aborted %4d  reloads %3d  RSS %.1f MiB  goroutines %d\n",
			elapsed.Round(time.Second), sent, complete, clean, dirty, aborted, reloads.done(), float64(proc.memKB("VmRSS"))/1024, proc.goroutines())
	}
	cfg.OnDirty = func(sample string) {
		fmt.Printf("  %s  dirty: %s\n", time.Now().Format("15:04:05.000"), sample)
	}
	tally := load.Soak(context.Background(), cfg)
	stopReloads()
	peak := proc.memKB("VmHWM")

	// The faults stop: every breaker must close again on live traffic.
	for _, s := range sims {
		if err := s.SetFaults(nil); err != nil {
			return err
		}
	}
	after := soakAfterFaults(proc, cfg)
	rss1, g1 := quiesce()

	var faulted int64
	for _, s := range sims {
		faulted += s.Stats().Faulted
	}
	fmt.Printf("end (quiet): RSS %.1f MiB (%+.1f%%), peak %.1f MiB, goroutines %d (%+d)\n",
		float64(rss1)/1024, 100*float64(rss1-rss0)/float64(rss0), float64(peak)/1024, g1, g1-g0)
	fmt.Println(tally.Summary())
	fmt.Printf("provider faults injected (warm-up included): %d; reloads: %s\n", faulted, reloads.summary())
	fmt.Println("after the faults stopped:", after.tally.Summary())
	for _, m := range proc.metrics("caddy_llm_hedge_requests_total") {
		fmt.Println("  " + m)
	}
	reqs, atts := metricSum(proc, "caddy_llm_hedge_requests_total"), metricSum(proc, "caddy_llm_hedge_attempts_total")
	fmt.Printf("upstream attempts %.0f for %.0f requests: %.3f per request (warm-up and recovery included)\n", atts, reqs, atts/max(reqs, 1))
	problems := soakChecks(proc, tally, reloads, after, rss0, rss1, g0, g1)
	if len(problems) > 0 {
		return fmt.Errorf("soak failed:\n  %s", strings.Join(problems, "\n  "))
	}
	fmt.Println("soak: ok")
	return nil
}

// metricSum adds up every series of a counter.
func metricSum(proc *caddyProc, name string) float64 {
	var sum float64
	for _, m := range proc.metrics(name) {
		if f := strings.Fields(m); len(f) == 2 && (strings.HasPrefix(m, name+"{") || strings.HasPrefix(m, name+" ")) {
			var v float64
			if _, err := fmt.Sscan(f[1], &v); err == nil {
				sum += v
			}
		}
	}
	return sum
}

// soakQuiesce lets the load's connections go and waits for the
// goroutine count to settle; it returns the RSS and that count.
func soakQuiesce(proc *caddyProc, tr *http.Transport, sims []*simServer) (rssKB int64, goroutines int) {
	tr.CloseIdleConnections()
	for _, s := range sims {
		s.closeIdle()
	}
	settle(proc)
	// the count settles once the closed connections' goroutines exit
	g := proc.goroutines()
	for range 40 {
		time.Sleep(250 * time.Millisecond)
		if g2 := proc.goroutines(); g2 == g {
			break
		} else {
			g = g2
		}
	}
	return proc.memKB("VmRSS"), g
}

// reloadLog counts the soak's reloads.
type reloadLog struct {
	mu       sync.Mutex
	ok       int
	failures []string
}

func (l *reloadLog) done() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ok
}

func (l *reloadLog) summary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprintf("%d applied, %d refused", l.ok, len(l.failures))
}

// soakReloads runs `caddy reload` every -soak-reload, alternately with
// the last provider renamed and restored, until stop; stop leaves the
// configuration as it was first (restored).
func soakReloads(proc *caddyProc, siteOf func(renamed bool) string) (*reloadLog, func()) {
	l := &reloadLog{}
	if *soakReload <= 0 {
		return l, func() {}
	}
	quit, exited := make(chan struct{}), make(chan struct{})
	renamed := false
	apply := func(to bool) {
		if err := proc.reload("", siteOf(to)); err != nil {
			l.mu.Lock()
			l.failures = append(l.failures, err.Error())
			l.mu.Unlock()
			return
		}
		renamed = to
		l.mu.Lock()
		l.ok++
		l.mu.Unlock()
	}
	go func() {
		defer close(exited)
		tick := time.NewTicker(*soakReload)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				if renamed {
					apply(false)
				}
				return
			case <-tick.C:
				apply(!renamed)
			}
		}
	}()
	return l, func() { close(quit); <-exited }
}
