package load

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// SoakConfig is a steady, mixed workload: requests of every kind in turn,
// started at a fixed rate (open loop) with a cap on requests in flight.
type SoakConfig struct {
	BaseURL  string
	Client   *http.Client
	Model    string
	Kinds    []Kind // the shapes, in turn; nil: Kinds
	WantText string // text of a complete answer; "" skips the text check
	// AbortPercent of the streams (spread evenly: every 100/AbortPercent-th
	// stream) are left by the client after their first bytes.
	AbortPercent float64
	Rate         float64       // requests started per second
	MaxInFlight  int           // a tick that finds this many in flight is skipped (and counted)
	Duration     time.Duration // how long to keep starting requests
	Timeout      time.Duration // per request; default 30s
	// Every, if set, calls Progress with the running tally that often.
	Every    time.Duration
	Progress func(elapsed time.Duration, t *Tally)
	// OnDirty, if set, is told of each of the first dirty responses when
	// it comes (Tally.OnDirty).
	OnDirty func(sample string)
}

// Tally counts what the responses were. Safe for concurrent use.
type Tally struct {
	mu         sync.Mutex
	Sent       int64
	Complete   int64
	CleanError int64
	Dirty      int64
	Aborted    int64            // streams the client left on purpose
	Resent     int64            // requests sent again after their connection closed with no response byte (Result.Resent)
	Skipped    int64            // ticks with MaxInFlight already in flight
	Errors     map[string]int64 // clean errors by status / kind of event
	Samples    []string         // the first dirty responses, for the report
	Latency    []time.Duration  // of complete responses
	// OnDirty, if set, is told of each of the first dirty responses as it
	// comes (under the tally's lock: it must not call back).
	OnDirty func(sample string)
}

func (t *Tally) add(k Kind, r Result) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r.Resent {
		t.Resent++
	}
	switch r.Verdict {
	case Complete:
		t.Complete++
		t.Latency = append(t.Latency, r.Latency)
	case CleanError:
		t.CleanError++
		if t.Errors == nil {
			t.Errors = map[string]int64{}
		}
		key := fmt.Sprintf("%d", r.Status)
		if r.Status == http.StatusOK {
			key = "200 + error event"
		}
		t.Errors[k.String()+" "+key]++
	case Aborted:
		t.Aborted++
	default:
		t.Dirty++
		if len(t.Samples) < 10 {
			t.Samples = append(t.Samples, k.String()+": "+r.Reason)
			if t.OnDirty != nil {
				t.OnDirty(k.String() + ": " + r.Reason)
			}
		}
	}
}

// Snapshot returns the counters (Sent, Complete, CleanError, Dirty, Aborted).
func (t *Tally) Snapshot() (sent, complete, clean, dirty, aborted int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.Sent, t.Complete, t.CleanError, t.Dirty, t.Aborted
}

// Summary is a one-paragraph account of the tally.
func (t *Tally) Summary() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "%d requests: %d complete, %d clean errors, %d dirty, %d aborted by the client, %d ticks skipped (in-flight cap); %d sent again after their connection closed with no response byte (the SDKs' retry)",
		t.Sent, t.Complete, t.CleanError, t.Dirty, t.Aborted, t.Skipped, t.Resent)
	if len(t.Latency) > 0 {
		lat := append([]time.Duration(nil), t.Latency...)
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		fmt.Fprintf(&b, "; complete latency p50 %v p99 %v max %v", lat[len(lat)/2].Round(10*time.Microsecond),
			lat[len(lat)*99/100].Round(10*time.Microsecond), lat[len(lat)-1].Round(time.Millisecond))
	}
	if len(t.Errors) > 0 {
		keys := make([]string, 0, len(t.Errors))
		for k := range t.Errors {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteString("\n  clean errors:")
		for _, k := range keys {
			fmt.Fprintf(&b, " %s=%d", k, t.Errors[k])
		}
	}
	for _, s := range t.Samples {
		b.WriteString("\n  dirty: " + s)
	}
	return b.String()
}

// Soak runs the workload of cfg and waits for every request it started.
func Soak(ctx context.Context, cfg SoakConfig) *Tally {
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	t := &Tally{OnDirty: cfg.OnDirty}
	kinds := cfg.Kinds
	if kinds == nil {
		kinds = Kinds
	}
	bodies := make([][]byte, len(kinds))
	for i, k := range kinds {
		bodies[i] = Body(k, cfg.Model)
	}
	abortEvery := 0 // every abortEvery-th stream is left by the client
	if cfg.AbortPercent > 0 {
		abortEvery = max(1, int(100/cfg.AbortPercent+0.5))
	}
	streams := 0
	slots := make(chan struct{}, cfg.MaxInFlight)
	bufs := sync.Pool{New: func() any { return new(bytes.Buffer) }}
	var wg sync.WaitGroup
	start := time.Now()
	tick := time.NewTicker(time.Duration(float64(time.Second) / cfg.Rate))
	defer tick.Stop()
	var report <-chan time.Time
	if cfg.Every > 0 && cfg.Progress != nil {
		r := time.NewTicker(cfg.Every)
		defer r.Stop()
		report = r.C
	}
	end := time.After(cfg.Duration)
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			wg.Wait()
			return t
		case <-end:
			wg.Wait()
			return t
		case <-report:
			cfg.Progress(time.Since(start), t)
			continue
		case <-tick.C:
		}
		select {
		case slots <- struct{}{}:
		default:
			t.mu.Lock()
			t.Skipped++
			t.mu.Unlock()
			continue
		}
		rq := Request{Kind: kinds[n%len(kinds)], Model: cfg.Model, Body: bodies[n%len(kinds)], WantText: cfg.WantText}
		if rq.Kind.Stream {
			if streams++; abortEvery > 0 && streams%abortEvery == 0 {
				rq.AbortAfter = 64 + streams%512 // somewhere in its first events
			}
		}
		t.mu.Lock()
		t.Sent++
		t.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			rctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
			defer cancel()
			buf := bufs.Get().(*bytes.Buffer)
			defer bufs.Put(buf)
			t.add(rq.Kind, Do(rctx, cfg.Client, cfg.BaseURL, rq, buf))
		}()
	}
}

// SoakFaults spreads about 5% of requests over every fault kind the
// simulator has: seven rules at 0.73% each (the first that strikes
// applies), 1-(1-0.0073)^7 = 5.0%. Stalls and cuts strike both before the
// commit (failover territory) and after it (an error event).
func SoakFaults() []sim.Fault {
	const p = 0.73
	return []sim.Fault{
		{Kind: sim.FaultStatus, Status: 503, Percent: p},
		{Kind: sim.FaultStatus, Status: 429, Percent: p, RetryAfter: "1"},
		{Kind: sim.FaultFake200, Percent: p},
		{Kind: sim.FaultReset, Percent: p},
		{Kind: sim.FaultCut, Percent: p, After: 4},
		{Kind: sim.FaultStall, Percent: p, After: 2},
		{Kind: sim.FaultMalformed, Percent: p, After: 3},
	}
}

// SoakProxyBlock is the llm_hedge configuration of the soak: three
// providers, adaptive hedging, and timeouts short enough that a stall
// ends in seconds. With renamed, the last provider takes another name
// (the reloads of the soak alternate the two).
func SoakProxyBlock(urls []string, renamed bool) string {
	var b strings.Builder
	for i, u := range urls {
		name := fmt.Sprintf("sim-%c", 'a'+i)
		if renamed && i == len(urls)-1 {
			name += "-renamed"
		}
		fmt.Fprintf(&b, "\t\tprovider %s %s {\n\t\t\tvendor v%d\n\t\t}\n", name, u, i)
	}
	b.WriteString("\t\ttimeouts {\n\t\t\tfirst_byte 2s\n\t\t\tresponse 2s\n\t\t\tidle 2s\n\t\t\ttotal 20s\n\t\t}\n")
	b.WriteString("\t\thedge {\n\t\t\tafter p90\n\t\t\tmin 100ms\n\t\t\tmax 1s\n\t\t}\n")
	fmt.Fprintf(&b, "\t\tretry {\n\t\t\tattempts %d\n\t\t}\n", SoakAttempts)
	b.WriteString("\t\tcooldown {\n\t\t\tfailures 5\n\t\t\tduration 2s\n\t\t}\n")
	return b.String()
}

// SoakAttempts is the soak's retry bound: attempts per request, hedges
// and retries included (the default, written out so the check reads it).
const SoakAttempts = 4
