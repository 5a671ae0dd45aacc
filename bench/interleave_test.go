package main

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/bench/load"
	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// The drain protocol of -slices: at a move from one target to the next no
// request is in flight, so no request to one target overlaps a request to
// the other, each target gets its share of the slices, and what completes
// while the workers drain is counted in the requests but not in req/s.
func TestInterleaveDrainsAtEachMove(t *testing.T) {
	var inFlight [2]atomic.Int32
	var overlaps, served atomic.Int64
	m := benchModes["non-stream"]
	targets := make([]*sliceTarget, 2)
	for i := range targets {
		s := sim.New(sim.Config{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			inFlight[i].Add(1)
			defer inFlight[i].Add(-1)
			if inFlight[1-i].Load() > 0 {
				overlaps.Add(1)
			}
			served.Add(1)
			time.Sleep(2 * time.Millisecond) // long enough for a move to land inside a request
			s.ServeHTTP(w, r)
		}))
		defer srv.Close()
		tr := load.NewTransport(8)
		defer tr.CloseIdleConnections()
		targets[i] = &sliceTarget{config: "direct", m: m, url: srv.URL, tr: tr, client: &http.Client{Transport: tr}}
	}

	const nSlices, slice = 4, 60 * time.Millisecond
	interleave(targets, 8, nSlices, slice, 30*time.Millisecond)

	if n := overlaps.Load(); n > 0 {
		t.Fatalf("%d requests to one target started while the other had one in flight (of %d)", n, served.Load())
	}
	for i, tg := range targets {
		r := &tg.requests
		if r.failed > 0 {
			t.Fatalf("target %d: %d failed, e.g. %s", i, r.failed, r.sample)
		}
		// Each of its slices ends in a drain, and 8 workers are inside a
		// 2 ms request nearly all the time: some complete while draining.
		if len(r.lat) == 0 || r.inWindow == 0 || r.inWindow >= len(r.lat) {
			t.Fatalf("target %d: %d requests, %d in the windows (want some, and fewer than all)", i, len(r.lat), r.inWindow)
		}
		if tg.elapsed < nSlices*slice {
			t.Fatalf("target %d measured for %v, want at least %v", i, tg.elapsed, nSlices*slice)
		}
	}
}
