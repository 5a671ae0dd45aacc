package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/bench/load"
	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// soakTokens: two repetitions of the default text per answer.
const soakTokens = 18

var soakText = strings.TrimSpace(strings.Repeat(sim.DefaultText+" ", soakTokens/9))

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
	block := load.SoakProxyBlock(urls)
	proc, err := startCaddy(bin, dir, "soak", "", "\tllm_hedge {\n"+block+"\t}")
	if err != nil {
		return err
	}
	defer proc.Stop()
	tr := load.NewTransport(256)
	client := &http.Client{Transport: tr}
	cfg := load.SoakConfig{BaseURL: proc.URL, Client: client, Model: "claude-soak", WantText: soakText,
		Rate: *soakRate, MaxInFlight: 256, Timeout: 30 * time.Second}

	quiesce := func() (rssKB int64, goroutines int) {
		tr.CloseIdleConnections()
		for _, s := range sims {
			s.closeIdle()
		}
		settle(proc)
		// the count settles once the closed connections' goroutines exit
		g := proc.goroutines()
		for range 20 {
			time.Sleep(250 * time.Millisecond)
			if g2 := proc.goroutines(); g2 == g {
				break
			} else {
				g = g2
			}
		}
		return proc.memKB("VmRSS"), g
	}

	warm := min(20*time.Second, max(*soakFor/20, 3*time.Second))
	fmt.Printf("soak: %v at %.0f req/s (mixed Anthropic/OpenAI, stream/non-stream), 3 providers each faulting ~5%% of requests; warm-up %v\n",
		*soakFor, *soakRate, warm)
	wcfg := cfg
	wcfg.Duration = warm
	if t := load.Soak(context.Background(), wcfg); t.Dirty > 0 {
		fmt.Println("warm-up:", t.Summary())
	}
	rss0, g0 := quiesce()
	fmt.Printf("start (quiet, after warm-up): RSS %.1f MiB, goroutines %d\n", float64(rss0)/1024, g0)

	cfg.Duration = *soakFor
	cfg.Every = max(*soakFor/20, 5*time.Second)
	cfg.Progress = func(elapsed time.Duration, t *load.Tally) {
		sent, complete, clean, dirty, _ := t.Snapshot()
		fmt.Printf("  %6s  sent %7d  complete %7d  clean errors %5d  dirty %d  RSS %.1f MiB  goroutines %d\n",
			elapsed.Round(time.Second), sent, complete, clean, dirty, float64(proc.memKB("VmRSS"))/1024, proc.goroutines())
	}
	tally := load.Soak(context.Background(), cfg)
	rss1, g1 := quiesce()
	var faulted int64
	for _, s := range sims {
		faulted += s.Stats().Faulted
	}
	fmt.Printf("end (quiet): RSS %.1f MiB (%+.1f MiB), peak %.1f MiB, goroutines %d (%+d)\n",
		float64(rss1)/1024, float64(rss1-rss0)/1024, float64(proc.memKB("VmHWM"))/1024, g1, g1-g0)
	fmt.Println(tally.Summary())
	fmt.Printf("provider faults injected (warm-up included): %d\n", faulted)
	for _, m := range proc.metrics("caddy_llm_hedge_requests_total") {
		fmt.Println("  " + m)
	}
	var problems []string
	if tally.Dirty > 0 {
		problems = append(problems, fmt.Sprintf("%d responses neither complete nor a clean error", tally.Dirty))
	}
	if g1-g0 > 10 {
		problems = append(problems, fmt.Sprintf("goroutines grew by %d", g1-g0))
	}
	if len(problems) > 0 {
		return fmt.Errorf("soak failed: %s", strings.Join(problems, "; "))
	}
	fmt.Println("soak: ok")
	return nil
}
