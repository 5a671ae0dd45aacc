package main

import (
	"math"
	"reflect"
	"strings"
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

// The A/A control is reverse_proxy under another name: the same site and
// request in every mode, and judged against reverse_proxy as llm_hedge is.
func TestControlConfig(t *testing.T) {
	sims := placeholderSims()
	for name, m := range benchModes {
		if got, want := modeSite(m, controlConfig, sims), modeSite(m, "reverse_proxy", sims); got != want {
			t.Errorf("%s: %s's site\n%s\nis not reverse_proxy's\n%s", name, controlConfig, got, want)
		}
		if got, want := m.forConfig(controlConfig), m.forConfig("reverse_proxy"); !reflect.DeepEqual(got.header, want.header) || got.wire != want.wire {
			t.Errorf("%s: %s's request differs from reverse_proxy's", name, controlConfig)
		}
	}
	rs := []cellResult{
		{mode: "stream", config: "reverse_proxy", conc: 1, rps: 1000, cpuPer1k: 1.0, requests: 1000},
		{mode: "stream", config: controlConfig, conc: 1, rps: 900, cpuPer1k: 1.2, requests: 900},
	}
	var out strings.Builder
	printTable(&out, rs, []string{"stream"}, []int{1}, []string{"reverse_proxy", controlConfig})
	if !strings.Contains(out.String(), controlConfig+" throughput 0.900× MISSED, CPU 1.200× MISSED") {
		t.Errorf("no verdict for the control:\n%s", out.String())
	}
	if judged("reverse_proxy") || judged("direct") || !judged("llm_hedge_sigv4") {
		t.Error("judged: only llm_hedge's configurations and the control get a verdict")
	}
}

// A translating cell is paired by round with its client's native stream
// cell: a round the machine ran slow moves neither.
func TestTranslatePairedByRound(t *testing.T) {
	cell := func(mode string, round int, cpu float64) cellResult {
		return cellResult{mode: mode, config: "llm_hedge", conc: 16, round: round, rps: 1000, cpuPer1k: cpu, requests: 100}
	}
	const pair = "translate-stream/openai-anthropic"
	rs := []cellResult{
		cell("openai-stream", 0, 0.50), cell(pair, 0, 0.52),
		cell("openai-stream", 1, 0.80), cell(pair, 1, 0.84), // a slow round
		cell("openai-stream", 2, 0.50), cell(pair, 2, 0.90),
	}
	for _, m := range medians(rs) {
		if m.mode != pair {
			continue
		}
		if math.Abs(m.xlPairedCPU-1.05) > 1e-9 {
			t.Fatalf("paired by round %.3f, want 1.05", m.xlPairedCPU)
		}
		lines := translateLines(medians(rs), []string{"openai-stream", pair}, []int{16}, []string{"llm_hedge"})
		if len(lines) != 1 || !strings.Contains(lines[0], "paired by round 1.050×") {
			t.Errorf("lines %q", lines)
		}
		return
	}
	t.Fatal("no translating cell")
}
