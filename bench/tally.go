package main

import (
	"bytes"
	"fmt"
	"os"
	"sort"
	"time"
)

// spent is what a Caddy process had spent at one moment: CPU, system
// calls and heap allocations.
type spent struct {
	cpu, user     float64
	reads, writes int64
	allocs, bytes uint64
}

// spendingFrom and spendingTo read p's counters at the start and at the end
// of a measured window; zero without a process (direct). The allocation
// counts come from an admin request, made outside the window.
func spendingFrom(p *caddyProc) spent {
	var s spent
	if p != nil {
		s.allocs, s.bytes = p.mallocs()
		s.cpu, s.user, s.reads, s.writes = usage(p)
	}
	return s
}

func spendingTo(p *caddyProc) spent {
	var s spent
	if p != nil {
		s.cpu, s.user, s.reads, s.writes = usage(p)
		s.allocs, s.bytes = p.mallocs()
	}
	return s
}

func usage(p *caddyProc) (cpu, user float64, reads, writes int64) {
	user, sys := p.cpuTimes() // one reading of /proc/<pid>/stat: user and the total agree
	cpu = user + sys
	reads, writes = p.syscalls()
	return
}

// add returns s plus what was spent between from and to.
func (s spent) add(from, to spent) spent {
	return spent{
		cpu: s.cpu + to.cpu - from.cpu, user: s.user + to.user - from.user,
		reads: s.reads + to.reads - from.reads, writes: s.writes + to.writes - from.writes,
		allocs: s.allocs + to.allocs - from.allocs, bytes: s.bytes + to.bytes - from.bytes,
	}
}

// tally is what one configuration's measured requests came to.
type tally struct {
	lat    []time.Duration
	failed int
	sample string
	bytes  int
	events int
	// inWindow counts the successful requests that completed inside the
	// measured windows (with -slices, not while the workers drained
	// between slices): req/s is inWindow over the windows' length.
	inWindow int
}

// add counts one request: its latency, or its error; inWindow: it
// completed inside a measured window.
func (t *tally) add(lat time.Duration, err error, m benchMode, buf *bytes.Buffer, inWindow bool) {
	if err != nil {
		t.failed++
		if t.sample == "" {
			t.sample = err.Error()
		}
		return
	}
	t.lat = append(t.lat, lat)
	if inWindow {
		t.inWindow++
	}
	if t.bytes == 0 {
		t.events = m.countEvents(buf.Bytes())
	}
	t.bytes = buf.Len()
}

// merge adds o's requests to t.
func (t *tally) merge(o *tally) {
	t.lat = append(t.lat, o.lat...)
	t.failed += o.failed
	t.inWindow += o.inWindow
	if t.sample == "" {
		t.sample = o.sample
	}
	t.bytes, t.events = max(t.bytes, o.bytes), max(t.events, o.events)
}

// finish sets res's figures from the requests of t, made in elapsed (the
// measured windows), and what proc spent on them (used).
func (t *tally) finish(res *cellResult, proc *caddyProc, used spent, elapsed time.Duration) {
	res.failed, res.failSample, res.respBytes, res.events = t.failed, t.sample, t.bytes, t.events
	if res.failed > 0 {
		fmt.Fprintf(os.Stderr, "bench: %s %s c=%d: %d failed requests, e.g. %s\n", res.mode, res.config, res.conc, res.failed, res.failSample)
	}
	n := len(t.lat)
	if n == 0 {
		// Shown as a FAILED row; the run exits non-zero after the table.
		fmt.Fprintf(os.Stderr, "bench: %s %s c=%d: no request succeeded\n", res.mode, res.config, res.conc)
		return
	}
	sort.Slice(t.lat, func(i, j int) bool { return t.lat[i] < t.lat[j] })
	res.requests = n
	res.rps = float64(t.inWindow) / elapsed.Seconds()
	res.p50, res.p99 = t.lat[n/2], t.lat[n*99/100]
	if proc != nil {
		per := float64(n)
		res.cpuPer1k, res.userPer1k = used.cpu/per*1000, used.user/per*1000
		res.hwmKB = proc.memKB("VmHWM")
		res.readsPerReq, res.writesPerReq = float64(used.reads)/per, float64(used.writes)/per
		res.allocsPerReq, res.bytesPerReq = float64(used.allocs)/per, float64(used.bytes)/per
	}
}
