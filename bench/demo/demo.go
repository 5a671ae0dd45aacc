// Package demo is the load generator of `make -f xcaddy.mk demo`: a few
// clients sending small requests of the four dialects, streamed and not,
// to an llm_hedge proxy on loopback (Caddyfile.demo), with outages of the
// flaky simulator marked by a header its faults match, so the dashboard
// shows hedges, failovers, a breaker opening and continuations. The
// end-to-end test of the dashboard's screenshot runs it in-process.
package demo

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/bench/load"
)

// OutageHeader marks a request sent during an outage: Caddyfile.demo's
// flaky simulator answers it 503 (its fault's `header`), the others
// ignore it, and the proxy forwards it as any client header.
const OutageHeader = "X-Demo-Outage"

// Options is how the demo's load runs; the zero value of a field is its
// default.
type Options struct {
	// URL is the proxy's, e.g. http://127.0.0.1:8080.
	URL string
	// Workers is the number of clients, each sending one request after
	// another. Default 4.
	Workers int
	// Think is a client's pause between two requests. Default 250ms.
	Think time.Duration
	// OutageEvery and OutageFor: the flaky simulator is out for OutageFor
	// at the start of every OutageEvery, from the start. Defaults 90s, 25s.
	OutageEvery, OutageFor time.Duration
	// Progress, when set, is called every ProgressEvery with the counts.
	Progress      func(Stats)
	ProgressEvery time.Duration // default 10s
}

// Stats are the demo's counts so far.
type Stats struct {
	Sent, Complete, CleanError, Dirty uint64
	Outage                            bool // the flaky simulator is out now
}

func (s Stats) String() string {
	out := "up"
	if s.Outage {
		out = "OUT (requests carry " + OutageHeader + ")"
	}
	return fmt.Sprintf("%d requests: %d complete, %d clean errors, %d broken; sim-flaky %s", s.Sent, s.Complete, s.CleanError, s.Dirty, out)
}

// models are the model names the demo asks for, per dialect.
var models = map[load.Dialect]string{load.Anthropic: "claude-demo", load.OpenAI: "gpt-demo", load.Responses: "gpt-demo", load.Gemini: "gemini-demo"}

// Run sends the demo's load until ctx ends, and returns the counts.
func Run(ctx context.Context, o Options) Stats {
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.Think <= 0 {
		o.Think = 250 * time.Millisecond
	}
	if o.OutageEvery <= 0 {
		o.OutageEvery = 90 * time.Second
	}
	if o.OutageFor <= 0 {
		o.OutageFor = 25 * time.Second
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = 10 * time.Second
	}
	start := time.Now()
	outage := func() bool { return time.Since(start)%o.OutageEvery < o.OutageFor }
	client := &http.Client{Transport: &outageTransport{base: load.NewTransport(o.Workers), on: outage}}
	defer client.CloseIdleConnections()

	var sent, counts [3]atomic.Uint64 // sent[0]; counts by verdict: complete, clean error, dirty
	stats := func() Stats {
		return Stats{Sent: sent[0].Load(), Complete: counts[0].Load(), CleanError: counts[1].Load(), Dirty: counts[2].Load(), Outage: outage()}
	}
	var wg sync.WaitGroup
	for w := range o.Workers {
		wg.Go(func() {
			var buf bytes.Buffer
			for i := w; ctx.Err() == nil; i += o.Workers {
				k := load.AllKinds[i%len(load.AllKinds)]
				m := models[k.Dialect]
				res := load.Do(ctx, client, o.URL, load.Request{Kind: k, Model: m, Body: load.Body(k, m)}, &buf)
				if ctx.Err() != nil {
					return // a request the end of the demo cut is not counted
				}
				sent[0].Add(1)
				switch res.Verdict {
				case load.Complete:
					counts[0].Add(1)
				case load.CleanError:
					counts[1].Add(1)
				default:
					counts[2].Add(1)
				}
				select {
				case <-ctx.Done():
				case <-time.After(o.Think):
				}
			}
		})
	}
	if o.Progress != nil {
		wg.Go(func() {
			t := time.NewTicker(o.ProgressEvery)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					o.Progress(stats())
				}
			}
		})
	}
	wg.Wait()
	return stats()
}

// outageTransport adds OutageHeader to the requests sent while on says
// the flaky simulator is out.
type outageTransport struct {
	base http.RoundTripper
	on   func() bool
}

func (t *outageTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.on() {
		r = r.Clone(r.Context())
		r.Header.Set(OutageHeader, "1")
	}
	return t.base.RoundTrip(r)
}
