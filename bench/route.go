package main

// The routing cell (-route): three simulated providers of one priority
// tier whose first tokens take about 100, 300 and 900 ms, 1,000 streams at
// 16, under each lb_policy: first with the fastest written first (the
// oracle), adaptive and weighted_random (docs/routing.md).

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"slices"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmhedge/caddy-llm-hedge/bench/load"
	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// routeFirstTokens are the tier's providers' first-token delays.
var routeFirstTokens = []time.Duration{100 * time.Millisecond, 300 * time.Millisecond, 900 * time.Millisecond}

// routePolicies are the cells: a name and the lb_policy line.
var routePolicies = []struct{ name, policy string }{
	{"oracle", "first"},
	{"adaptive", "adaptive"},
	{"weighted_random", "weighted_random"},
}

// routeRow is one policy's figures.
type routeRow struct {
	name          string
	p50, p99      time.Duration
	attempts      [3]int64
	requests      int
	failed        int
	hedgesPercent float64
}

// runRoute measures each routing policy with fresh simulators and a fresh
// Caddy (nothing learned carries over) and prints a table.
func runRoute(bin, dir string, n, c int) error {
	var rows []routeRow
	for _, pol := range routePolicies {
		var sims []*simServer
		for i, d := range routeFirstTokens {
			s, err := startSim(sim.Config{FirstToken: caddy.Duration(d), FirstTokenJitter: 20, Tokens: 9, Seed: int64(i + 1)})
			if err != nil {
				return err
			}
			sims = append(sims, s)
		}
		block := "\tllm_hedge {\n"
		for i, s := range sims {
			block += fmt.Sprintf("\t\tprovider %s %s {\n\t\t\tvendor v%d\n\t\t}\n", []string{"fast", "mid", "slow"}[i], s.URL, i)
		}
		block += "\t\tlb_policy " + pol.policy + "\n\t}"
		proc, err := startCaddy(bin, dir, "route-"+pol.name, "", block)
		if err != nil {
			stopSims(sims)
			return err
		}
		row, err := routeCell(proc.URL, n, c)
		proc.Stop()
		for i, s := range sims {
			row.attempts[i] = s.requests.Load()
		}
		stopSims(sims)
		if err != nil {
			return fmt.Errorf("%s: %w", pol.name, err)
		}
		row.name = pol.name
		total := row.attempts[0] + row.attempts[1] + row.attempts[2]
		row.hedgesPercent = 100 * float64(total-int64(row.requests)) / float64(total)
		rows = append(rows, row)
	}
	fmt.Printf("\nrouting: 3 providers of one tier, first token %v/%v/%v ±20%%, %d streams at %d, default hedging\n",
		routeFirstTokens[0], routeFirstTokens[1], routeFirstTokens[2], n, c)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "POLICY\tFIRST CONTENT p50\tp99\tvs ORACLE p50\tATTEMPTS fast/mid/slow\tHEDGES/ATTEMPTS\tFAILED")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%v\t%v\t%+.0f%%\t%d/%d/%d\t%.1f%%\t%d\n", r.name, r.p50.Round(time.Millisecond), r.p99.Round(time.Millisecond),
			100*(float64(r.p50)/float64(rows[0].p50)-1), r.attempts[0], r.attempts[1], r.attempts[2], r.hedgesPercent, r.failed)
	}
	return tw.Flush()
}

// routeCell sends n streaming requests, c at a time, and measures each
// one's time to its first content event.
func routeCell(url string, n, c int) (routeRow, error) {
	client := &http.Client{Transport: load.NewTransport(c)}
	defer client.CloseIdleConnections()
	body := load.Body(load.Kind{Stream: true}, "claude-bench")
	jobs := make(chan struct{}, n)
	for range n {
		jobs <- struct{}{}
	}
	close(jobs)
	var mu sync.Mutex
	var ttfc []time.Duration
	row := routeRow{requests: n}
	var wg sync.WaitGroup
	for range c {
		wg.Go(func() {
			for range jobs {
				d, err := routeFirstContent(client, url, body)
				mu.Lock()
				if err != nil {
					row.failed++
				} else {
					ttfc = append(ttfc, d)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(ttfc) == 0 {
		return row, fmt.Errorf("every request failed")
	}
	slices.Sort(ttfc)
	// nearest rank, as the Go benchmarks
	rank := func(q float64) time.Duration { return ttfc[max(int(math.Ceil(q*float64(len(ttfc))))-1, 0)] }
	row.p50, row.p99 = rank(0.5), rank(0.99)
	return row, nil
}

// routeFirstContent streams one Anthropic message and returns the time to
// its first content_block_delta, reading the stream to its end.
func routeFirstContent(client *http.Client, url string, body []byte) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := load.NewRequest(ctx, url, load.Kind{Stream: true}, "claude-bench", body)
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	var first time.Duration
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if first == 0 && bytes.Equal(sc.Bytes(), []byte("event: content_block_delta")) {
			first = time.Since(start)
		}
	}
	if first == 0 {
		return 0, fmt.Errorf("stream without content: %v", sc.Err())
	}
	return first, sc.Err()
}
