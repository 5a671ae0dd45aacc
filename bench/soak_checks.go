package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/bench/load"
)

// soakRecovery is what the soak saw once the faults stopped: the load it
// sent, and each provider's breaker state read from the admin API after it.
type soakRecovery struct {
	tally  *load.Tally
	states map[string]string // provider name -> closed, half_open, open
}

// soakRecoveryFor is how long the load goes on after the faults stop:
// several cooldowns (2s) and hedge windows, so a breaker still open at the
// end is stuck, not cooling.
const soakRecoveryFor = 20 * time.Second

// soakAfterFaults sends the soak's load without client aborts for
// soakRecoveryFor and then reads every provider's breaker state.
func soakAfterFaults(proc *caddyProc, cfg load.SoakConfig) soakRecovery {
	cfg.Duration, cfg.AbortPercent, cfg.Progress = soakRecoveryFor, 0, nil
	r := soakRecovery{tally: load.Soak(context.Background(), cfg), states: map[string]string{}}
	resp, err := http.Get(proc.Admin + "/llm_hedge/providers")
	if err != nil {
		r.states["(admin API)"] = err.Error()
		return r
	}
	defer resp.Body.Close()
	var views []struct{ Name, State string }
	if err := json.NewDecoder(resp.Body).Decode(&views); err != nil {
		r.states["(admin API)"] = err.Error()
	}
	for _, v := range views {
		r.states[v.Name] = v.State
	}
	return r
}

// soakLog is what the Caddy log of the soak says: panics, and the
// attempts of each request whose log line lists them (a request served
// by its first attempt is logged at debug, below the log's level: one
// attempt, within any bound).
type soakLog struct {
	panics        []string
	lines         int // request log lines read
	maxAttempts   int // attempts before the commit, in one request
	maxResumes    int // continuations of one request
	overBound     []string
	attemptsTotal int
}

func readSoakLog(path string) (soakLog, error) {
	var l soakLog
	f, err := os.Open(path)
	if err != nil {
		return l, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(strings.ToLower(line), "panic") {
			if len(l.panics) < 5 {
				l.panics = append(l.panics, clipLine(line))
			} else {
				l.panics = append(l.panics, "")
			}
		}
		if !strings.Contains(line, `"msg":"llm request"`) {
			continue
		}
		var rec struct {
			Chain []struct {
				Provider, Event, Outcome string
			} `json:"chain"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		l.lines++
		attempts, resumes := 0, 0
		for _, e := range rec.Chain {
			switch {
			case e.Event == "resume":
				resumes++
			case e.Provider != "" && e.Outcome != "" && !strings.HasPrefix(e.Event, "resume_") && e.Event != "discover":
				attempts++
			}
		}
		l.attemptsTotal += attempts
		l.maxAttempts = max(l.maxAttempts, attempts)
		l.maxResumes = max(l.maxResumes, resumes)
		if attempts > load.SoakAttempts && len(l.overBound) < 5 {
			l.overBound = append(l.overBound, clipLine(line))
		}
	}
	return l, sc.Err()
}

func clipLine(s string) string {
	if len(s) > 400 {
		return s[:400] + "..."
	}
	return s
}

// soakChecks returns what the soak proved false, each as a sentence.
func soakChecks(proc *caddyProc, tally *load.Tally, reloads *reloadLog, after soakRecovery, rss0, rss1 int64, g0, g1 int) []string {
	var problems []string
	if tally.Dirty > 0 {
		problems = append(problems, fmt.Sprintf("%d responses neither complete nor a clean error", tally.Dirty))
	}
	if after.tally.Dirty > 0 {
		problems = append(problems, fmt.Sprintf("after the faults: %d responses neither complete nor a clean error", after.tally.Dirty))
	}
	if len(reloads.failures) > 0 {
		problems = append(problems, fmt.Sprintf("%d reloads refused: %s", len(reloads.failures), reloads.failures[0]))
	}
	for name, state := range after.states {
		if state != "closed" {
			problems = append(problems, fmt.Sprintf("provider %s is %s %v after the faults stopped", name, state, soakRecoveryFor))
		}
	}
	// Within 10%, or 10 goroutines for a small baseline (a pooled
	// connection or two more is not a leak).
	if float64(rss1) > 1.10*float64(rss0) {
		problems = append(problems, fmt.Sprintf("RSS %.1f MiB after the load, more than 10%% over the baseline %.1f MiB", float64(rss1)/1024, float64(rss0)/1024))
	}
	if float64(g1) > max(1.10*float64(g0), float64(g0+10)) {
		problems = append(problems, fmt.Sprintf("goroutines %d after the load, baseline %d", g1, g0))
	}
	l, err := readSoakLog(proc.log)
	if err != nil {
		problems = append(problems, "reading the Caddy log: "+err.Error())
	}
	fmt.Printf("log: %d request lines with their chain (requests beyond one plain attempt); attempts before commit at most %d (bound %d), continuations at most %d per request; %d lines naming a panic\n",
		l.lines, l.maxAttempts, load.SoakAttempts, l.maxResumes, len(l.panics))
	if n := len(l.panics); n > 0 {
		problems = append(problems, fmt.Sprintf("%d log lines name a panic, the first: %s", n, l.panics[0]))
	}
	if len(l.overBound) > 0 {
		problems = append(problems, fmt.Sprintf("requests over the bound of %d attempts, the first: %s", load.SoakAttempts, l.overBound[0]))
	}
	if l.maxResumes > 1 {
		problems = append(problems, fmt.Sprintf("a request continued %d times (stream resume is 1)", l.maxResumes))
	}
	return problems
}
