package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/bench/load"
)

var slicesFlag = flag.Int("slices", 0, "measure each round of a cell with every configuration's Caddy running at once, the load moving between them in this many slices each (order A B B A …), so a change of the machine's speed inside a round reaches every configuration alike; 0: one configuration after the other, the issue's method")

// sliceTarget is one configuration of an interleaved round: its process,
// its client, and what its slices added up to.
type sliceTarget struct {
	config string
	m      benchMode
	proc   *caddyProc
	url    string
	tr     *http.Transport
	client *http.Client

	mu       sync.Mutex // the workers add to requests
	requests tally
	elapsed  time.Duration
	used     spent
}

// runInterleaved measures one round of a cell for all of configs. Every
// configuration's Caddy runs for the whole round; the workers send to one
// at a time and move to the next every duration/slices. At each move no
// request is in flight (the workers drain first), so each request and the
// CPU it took belong to one slice of one configuration.
func runInterleaved(bin, dir string, sims []*simServer, mode string, configs []string, m benchMode, conc, round, nSlices int) ([]cellResult, error) {
	slice := *duration / time.Duration(nSlices)
	if len(configs) == 0 || slice <= 0 {
		return nil, nil
	}
	targets := make([]*sliceTarget, len(configs))
	for i, config := range configs {
		t := &sliceTarget{config: config, m: m.forConfig(config), url: sims[0].URL}
		if config != "direct" {
			proc, err := startCaddy(bin, dir, fmt.Sprintf("%s-%s-%d-%d", config, fileName(mode), conc, round), "", modeSite(m, config, sims), caddyEnv(config)...)
			if err != nil {
				for _, s := range targets[:i] {
					s.stop()
				}
				return nil, err
			}
			t.proc, t.url = proc, proc.URL
		}
		t.tr = load.NewTransport(conc)
		t.client = &http.Client{Transport: t.tr}
		targets[i] = t
	}
	defer func() {
		for _, t := range targets {
			t.stop()
		}
	}()

	interleave(targets, conc, nSlices, slice, *warmup)

	out := make([]cellResult, len(targets))
	for i, t := range targets {
		out[i] = cellResult{mode: mode, config: t.config, conc: conc, round: round, cpuPer1k: -1, hwmKB: -1}
		t.requests.finish(&out[i], t.proc, t.used, t.elapsed)
	}
	return out, nil
}

func (t *sliceTarget) stop() {
	if t.tr != nil {
		t.tr.CloseIdleConnections()
	}
	if t.proc != nil {
		t.proc.Stop()
	}
}

// interleave runs conc workers against targets: warm-up on each in turn
// (warm), then nSlices slices of each, order A B, B A, …, of length slice.
// At each move no request is in flight (the workers drain first), so each
// request and the CPU it took belong to one slice of one target. What each
// target's slices came to is in its requests, elapsed and used.
func interleave(targets []*sliceTarget, conc, nSlices int, slice, warm time.Duration) {
	var (
		cur      atomic.Int32 // the target the workers send to
		measured atomic.Bool
		draining atomic.Bool // the slice's time is up: what completes now is not in its window
		stop     atomic.Bool
		inFlight sync.RWMutex // a worker holds it for reading during a request; a move takes it for writing
		wg       sync.WaitGroup
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf bytes.Buffer
			for {
				inFlight.RLock()
				if stop.Load() {
					inFlight.RUnlock()
					return
				}
				t := targets[cur.Load()]
				lat, err := timedRequest(ctx, t.client, t.url, t.m, &buf)
				if measured.Load() {
					t.mu.Lock()
					t.requests.add(lat, err, t.m, &buf, !draining.Load())
					t.mu.Unlock()
				}
				inFlight.RUnlock()
			}
		}()
	}

	// Warm-up: each target in turn, as long as a cell's, so every pool is
	// filled before the first measured slice.
	for i := range targets {
		inFlight.Lock()
		cur.Store(int32(i))
		inFlight.Unlock()
		time.Sleep(warm)
	}

	order := make([]int, len(targets))
	for i := range order {
		order[i] = i
	}
	inFlight.Lock()
	measured.Store(true)
	for s := range nSlices {
		seq := order
		if s%2 == 1 { // A B, B A, …: with the rounds' own alternation, each round starts with the other
			seq = slices.Clone(order)
			slices.Reverse(seq)
		}
		for _, i := range seq {
			t := targets[i]
			cur.Store(int32(i))
			before := spendingFrom(t.proc)
			draining.Store(false)
			t0 := time.Now()
			inFlight.Unlock()
			time.Sleep(slice)
			// Requests per second count what completed in the window; CPU
			// per request counts every request started in it, to its end.
			draining.Store(true)
			t.elapsed += time.Since(t0)
			inFlight.Lock() // waits for the requests in flight
			t.used = t.used.add(before, spendingTo(t.proc))
		}
	}
	stop.Store(true)
	inFlight.Unlock()
	wg.Wait()
}
