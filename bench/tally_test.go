package main

import (
	"bytes"
	"errors"
	"os"
	"testing"
	"time"
)

// Two slices of one configuration add up to one cell: what the process
// spent in each (not between them), and every request of both.
func TestTallyAcrossSlices(t *testing.T) {
	var used spent
	used = used.add(spent{cpu: 1, user: 0.5, reads: 10, writes: 20, allocs: 100, bytes: 1000},
		spent{cpu: 1.5, user: 0.75, reads: 30, writes: 40, allocs: 300, bytes: 5000})
	// Between the slices another configuration ran: not counted.
	used = used.add(spent{cpu: 2, user: 1, reads: 50, writes: 60, allocs: 400, bytes: 6000},
		spent{cpu: 2.5, user: 1.25, reads: 70, writes: 80, allocs: 600, bytes: 10000})
	if want := (spent{cpu: 1, user: 0.5, reads: 40, writes: 40, allocs: 400, bytes: 8000}); used != want {
		t.Fatalf("used = %+v, want %+v", used, want)
	}

	var a, b tally
	m := benchModes["stream"]
	buf := bytes.NewBufferString("x")
	for i := 1; i <= 60; i++ {
		a.add(time.Duration(i)*time.Millisecond, nil, m, buf, true)
	}
	a.add(0, errors.New("status 502"), m, buf, true)
	for i := 61; i <= 100; i++ {
		b.add(time.Duration(i)*time.Millisecond, nil, m, buf, true)
	}
	a.merge(&b) // runCell: every counted request completed in the measured window
	res := cellResult{mode: "stream", config: "llm_hedge", conc: 1}
	a.finish(&res, nil, used, 2*time.Second)
	if res.requests != 100 || res.failed != 1 || res.failSample != "status 502" {
		t.Fatalf("requests %d failed %d (%q), want 100, 1 (status 502)", res.requests, res.failed, res.failSample)
	}
	if res.rps != 50 || res.p50 != 51*time.Millisecond || res.p99 != 100*time.Millisecond {
		t.Fatalf("rps %v p50 %v p99 %v, want 50, 51ms, 100ms", res.rps, res.p50, res.p99)
	}
	if res.cpuPer1k != 0 { // no process (direct): no CPU figure is set
		t.Fatalf("cpu per 1k without a process = %v", res.cpuPer1k)
	}
	// Interleaved: 80 of the 100 completed inside the windows, the rest
	// while the workers drained; req/s counts the 80, the rest counts all.
	var c, d tally
	for i := 1; i <= 100; i++ {
		d.add(time.Duration(i)*time.Millisecond, nil, m, buf, i <= 80)
	}
	d.add(0, errors.New("status 502"), m, buf, true) // a failure is never in req/s
	c.merge(&d)
	a = c
	res = cellResult{mode: "stream", config: "llm_hedge", conc: 1}
	a.finish(&res, nil, used, 2*time.Second)
	if res.rps != 40 || res.requests != 100 || res.p99 != 100*time.Millisecond {
		t.Fatalf("interleaved: rps %v requests %d p99 %v, want 40, 100, 100ms", res.rps, res.requests, res.p99)
	}
	// With a process (this one, for its peak RSS): per request figures.
	res = cellResult{mode: "stream", config: "llm_hedge", conc: 1}
	a.finish(&res, &caddyProc{pid: os.Getpid()}, used, 2*time.Second)
	if res.cpuPer1k != 10 || res.userPer1k != 5 || res.readsPerReq != 0.4 || res.writesPerReq != 0.4 ||
		res.allocsPerReq != 4 || res.bytesPerReq != 80 || res.hwmKB <= 0 {
		t.Fatalf("per request: %+v", res)
	}
}
