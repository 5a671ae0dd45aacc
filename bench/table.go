package main

// The comparison table: medians of the rounds, the ratios to reverse_proxy and the targets.

import (
	"cmp"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// medians folds the rounds of each cell into one result of medians.
func medians(rs []cellResult) []cellResult {
	type key struct {
		mode, config string
		conc         int
	}
	groups := map[key][]cellResult{}
	var order []key
	for _, r := range rs {
		k := key{r.mode, r.config, r.conc}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	var out []cellResult
	for _, k := range order {
		g := groups[k]
		m := g[0]
		m.rps = medianF(g, func(r cellResult) float64 { return r.rps })
		m.p50 = time.Duration(medianF(g, func(r cellResult) float64 { return float64(r.p50) }))
		m.p99 = time.Duration(medianF(g, func(r cellResult) float64 { return float64(r.p99) }))
		m.cpuPer1k = medianF(g, func(r cellResult) float64 { return r.cpuPer1k })
		m.hwmKB = int64(medianF(g, func(r cellResult) float64 { return float64(r.hwmKB) }))
		m.pairedRPS, m.pairedCPU = paired(g, groups[key{k.mode, "reverse_proxy", k.conc}])
		if c := benchModes[k.mode].client; c != "" {
			_, m.xlPairedCPU = paired(g, groups[key{nativeStreamModes[c], k.config, k.conc}])
		}
		for _, r := range g[1:] {
			m.requests += r.requests
			m.failed += r.failed
			m.failSample = cmp.Or(m.failSample, r.failSample)
		}
		out = append(out, m)
	}
	return out
}

// paired is the median over the rounds of a cell's ratios to
// reverse_proxy's cell of the same round. Those two ran back to back (in
// either order, rounds alternating), so the machine's drift between
// rounds, which the ratio of the medians feels, cancels; 0 when rounds do
// not pair up.
func paired(g, base []cellResult) (rps, cpu float64) {
	var rpsR, cpuR []float64
	for _, r := range g {
		for _, b := range base {
			if b.round == r.round && b.requests > 0 && r.requests > 0 && b.cpuPer1k > 0 && r.cpuPer1k >= 0 {
				rpsR, cpuR = append(rpsR, r.rps/b.rps), append(cpuR, r.cpuPer1k/b.cpuPer1k)
			}
		}
	}
	if len(rpsR) == 0 || len(rpsR) != len(g) {
		return 0, 0
	}
	return median(rpsR), median(cpuR)
}

func medianF(g []cellResult, f func(cellResult) float64) float64 {
	v := make([]float64, len(g))
	for i, r := range g {
		v[i] = f(r)
	}
	return median(v)
}

// median sorts v and returns its middle value.
func median(v []float64) float64 {
	sort.Float64s(v)
	return v[len(v)/2]
}

func printTable(w io.Writer, rs []cellResult, modes []string, concs []int, configs []string) {
	find := func(mode string, conc int, config string) *cellResult {
		for i := range rs {
			if rs[i].mode == mode && rs[i].conc == conc && rs[i].config == config {
				return &rs[i]
			}
		}
		return nil
	}
	sizes, events := map[string]int{}, map[string]int{}
	for _, r := range rs {
		sizes[r.mode] = max(sizes[r.mode], r.respBytes)
		events[r.mode] = max(events[r.mode], r.events)
	}
	var shapes []string
	for _, mode := range modes {
		if mode == "non-stream" {
			shapes = append(shapes, fmt.Sprintf("%s: %d-byte responses", mode, sizes[mode]))
		} else {
			shapes = append(shapes, fmt.Sprintf("%s: %d events, %d bytes", mode, events[mode], sizes[mode]))
		}
	}
	fmt.Fprintf(w, "\n%s; %v measured per cell after %v warm-up; %d round(s), medians\n",
		strings.Join(shapes, "; "), *duration, *warmup, *rounds)
	fmt.Fprintln(w, "ratios (×) and Δp50 are against reverse_proxy in the same row group; CPU and RSS are the Caddy process's")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tconc\tconfig\treq/s\tp50\tp99\tCPU s/1k req\tpeak RSS MiB\treq/s ×\tCPU ×\tRSS ×\tΔp50\t")
	var verdicts []string
	for _, mode := range modes {
		for _, conc := range concs {
			base := find(mode, conc, "reverse_proxy")
			for _, config := range configs {
				r := find(mode, conc, config)
				if r == nil {
					continue
				}
				failed := ""
				if r.failed > 0 {
					failed = fmt.Sprintf("  %d of %d requests FAILED, e.g. %.120s", r.failed, r.failed+r.requests, r.failSample)
				}
				if r.requests == 0 {
					fmt.Fprintf(tw, "%s\t%d\t%s\tFAILED\t-\t-\t-\t-\t\t\t\t\t%s\n", mode, conc, config, failed)
					if judged(config) {
						verdicts = append(verdicts, fmt.Sprintf("  %-16s c=%-3d %-12s FAILED: no request succeeded (%d errors), e.g. %.120s",
							mode, conc, config, r.failed, r.failSample))
					}
					continue
				}
				cpu, rss := "-", "-"
				if r.cpuPer1k >= 0 {
					cpu = fmt.Sprintf("%.3f", r.cpuPer1k)
					rss = fmt.Sprintf("%.1f", float64(r.hwmKB)/1024)
				}
				ratios := "\t\t\t\t"
				if base != nil && base.requests > 0 && r.cpuPer1k >= 0 {
					ratios = fmt.Sprintf("%.2f\t%.2f\t%.2f\t%+dµs\t", r.rps/base.rps, r.cpuPer1k/base.cpuPer1k,
						float64(r.hwmKB)/float64(base.hwmKB), (r.p50 - base.p50).Microseconds())
					if judged(config) {
						verdicts = append(verdicts, verdict(r, base))
					}
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s%s\n", mode, conc, config, r.rps, fmtDur(r.p50), fmtDur(r.p99), cpu, rss, ratios, failed)
			}
		}
	}
	tw.Flush()
	if len(verdicts) > 0 {
		fmt.Fprintln(w, "\ntargets (issue 24): streams throughput ≥ 0.95×, CPU/request ≤ 1.10×; non-stream ≥ 1.00×, ≤ 1.00×; added p50 < 100µs at concurrency 1 (against reverse_proxy)")
		fmt.Fprintln(w, "judged on the ratios of the medians; the medians of each round's own ratios (paired by round) are shown beside them")
		for _, v := range verdicts {
			fmt.Fprintln(w, v)
		}
	}
	if xl := translateLines(rs, modes, concs, configs); len(xl) > 0 {
		fmt.Fprintf(w, "\ntranslation (issue 59): CPU/request ≤ %.2f× llm_hedge's own in the native stream of the client's format (same configuration and concurrency, this run's medians; paired by round where the native cell took its rounds in turn with the pair's)\n", translateLimit)
		for _, l := range xl {
			fmt.Fprintln(w, l)
		}
	}
}

// controlConfig is reverse_proxy once more, under another name: measured
// and judged against reverse_proxy as llm_hedge is, it shows how often
// the machine alone makes a proxy "miss" the targets (an A/A control).
const controlConfig = "reverse_proxy_2"

// judged tells whether config's cells get a verdict against the targets.
func judged(config string) bool {
	return strings.HasPrefix(config, "llm_hedge") || config == controlConfig
}

// verdict compares a cell with the targets. Added latency is judged where
// it is the proxy's own, at concurrency 1: with 16 or 64 requests in flight
// on a 2-core machine shared by the load generator, the simulator and
// Caddy, p50 is mostly queueing for a CPU, and its difference is shown for
// information only.
func verdict(r, base *cellResult) string {
	mark := func(ok bool) string {
		if ok {
			return "met"
		}
		return "MISSED"
	}
	rps := r.rps / base.rps
	cpu := r.cpuPer1k / base.cpuPer1k
	minRPS, maxCPU := targetsOf(r.mode)
	dp := r.p50 - base.p50
	lat := fmt.Sprintf("Δp50 %+dµs (queueing, not judged)", dp.Microseconds())
	if r.conc == 1 {
		lat = fmt.Sprintf("Δp50 %+dµs %s", dp.Microseconds(), mark(dp < 100*time.Microsecond))
	}
	if r.failed > 0 || base.failed > 0 {
		lat += fmt.Sprintf(", FAILED requests: %d here, %d in reverse_proxy", r.failed, base.failed)
	}
	if r.pairedCPU > 0 && *rounds > 1 {
		lat += fmt.Sprintf("; paired by round: throughput %.3f×, CPU %.3f×", r.pairedRPS, r.pairedCPU)
	}
	return fmt.Sprintf("  %-16s c=%-3d %-12s throughput %.3f× %s, CPU %.3f× %s, %s",
		r.mode, r.conc, r.config, rps, mark(rps >= minRPS), cpu, mark(cpu <= maxCPU), lat)
}

// targetsOf is the goal of issue 24 for a mode: a stream within 5% of
// reverse_proxy's throughput and 10% of its CPU per request; a
// non-streaming answer at least as cheap.
func targetsOf(mode string) (minRPS, maxCPU float64) {
	if mode == "non-stream" {
		return 1.0, 1.0
	}
	return 0.95, 1.10
}

func fmtDur(d time.Duration) string {
	switch {
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/1e6)
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	}
	return fmt.Sprintf("%dµs", d.Microseconds())
}
