package main

import (
	"math"
	"testing"
)

// A round the machine ran slow moves the ratio of the medians, not the
// median of each round's own ratio.
func TestPairedRatios(t *testing.T) {
	cell := func(config string, round int, rps, cpu float64) cellResult {
		return cellResult{mode: "stream", config: config, conc: 1, round: round, rps: rps, cpuPer1k: cpu, requests: 100}
	}
	rs := []cellResult{
		cell("reverse_proxy", 0, 1000, 1.0), cell("llm_hedge", 0, 950, 1.05),
		cell("llm_hedge", 1, 600, 1.6), cell("reverse_proxy", 1, 500, 2.0), // a slow round
		cell("reverse_proxy", 2, 1000, 1.0), cell("llm_hedge", 2, 1000, 1.2),
	}
	for _, m := range medians(rs) {
		if m.config != "llm_hedge" {
			continue
		}
		if math.Abs(m.cpuPer1k-1.2) > 1e-9 || math.Abs(m.pairedCPU-1.05) > 1e-9 || math.Abs(m.pairedRPS-1.0) > 1e-9 {
			t.Fatalf("median CPU %.3f (want 1.2), paired CPU %.3f (want 1.05), paired throughput %.3f (want 1.0)", m.cpuPer1k, m.pairedCPU, m.pairedRPS)
		}
		return
	}
	t.Fatal("no llm_hedge cell")
}
