package engine

import (
	"fmt"
	"net/http"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/stream"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// The hooks below change the engine's process-wide knobs for the
// end-to-end tests and the bench (e2e/, bench/); production never calls
// them. Each returns the func that restores what it changed.

// SetResponseOwnersCapacity shrinks the table of response owners created
// next (the first proxy started after it).
func SetResponseOwnersCapacity(n int) (restore func()) {
	old := responseOwnersCapacity
	responseOwnersCapacity = n
	return func() { responseOwnersCapacity = old }
}

// OnDiscoveryWait sets a hook called each time a request starts waiting
// for the discovery of an id another request leads.
func OnDiscoveryWait(f func()) (restore func()) {
	discoveryWaitHook = f
	return func() { discoveryWaitHook = nil }
}

// SetH2Ping sets how long an HTTP/2 provider connection stays quiet
// before its PING, and the least time the PING's answer is given, for the
// transports built next.
func SetH2Ping(after, timeoutMin time.Duration) (restore func()) {
	oldAfter, oldMin := h2PingAfter, h2PingTimeoutMin
	h2PingAfter, h2PingTimeoutMin = after, timeoutMin
	return func() { h2PingAfter, h2PingTimeoutMin = oldAfter, oldMin }
}

// SetTailWait sets how long a complete stream's body end is waited for
// after its terminal event (reuseConn).
func SetTailWait(d time.Duration) (restore func()) {
	old := tailDeadlines
	tailDeadlines = stream.NewDeadlines(d)
	return func() { tailDeadlines = old }
}

// SetRoutePick swaps the adaptive policy's pick (routePick) for the
// routing bench.
func SetRoutePick(pick func(costs, weights []float64, measured bool, u, v, x float64) (int, string)) (restore func()) {
	old := routePick
	routePick = pick
	return func() { routePick = old }
}

// BookkeepingReport is what one request's provider bookkeeping came to.
type BookkeepingReport struct {
	Attempts, Probes int
	Problems         []string // attempts whose begin/end or verdict did not pair up
}

// WatchBookkeeping makes every request report its bookkeeping once it is
// done (after the winner's end) on the returned channel, until stop: one
// end per begin, one verdict per completion attempt (so one per probe).
func WatchBookkeeping() (reports <-chan BookkeepingReport, stop func()) {
	ch := make(chan BookkeepingReport, 64)
	check := func(st *requestState) {
		rep := BookkeepingReport{Attempts: len(st.attempts)}
		for _, a := range st.attempts {
			if a.begun != 1 || a.ended != 1 {
				rep.Problems = append(rep.Problems, fmt.Sprintf("attempt %d on %s: begun %d, ended %d", a.n, a.p.name, a.begun, a.ended))
			}
			if !st.forwarded && a.verdicts != 1 {
				rep.Problems = append(rep.Problems, fmt.Sprintf("attempt %d on %s (probe %v): %d verdicts", a.n, a.p.name, a.probe, a.verdicts))
			}
			if a.probe {
				rep.Probes++
			}
		}
		select {
		case ch <- rep:
		default:
		}
	}
	bookkeepingDone.Store(&check)
	return ch, func() { bookkeepingDone.Store(nil) }
}

// SetClock makes the engine (and the Caddy layer's views through Now)
// read time from now.
func SetClock(now func() time.Time) (restore func()) {
	old := clock
	clock = now
	return func() { clock = old }
}

// SetTransport makes every provider of e send requests of scheme through
// rt: the benches' in-memory upstreams.
func SetTransport(e *Engine, scheme string, rt http.RoundTripper) {
	for _, p := range e.providers {
		p.transport.RegisterProtocol(scheme, rt)
	}
}

// FinishTwoAttempts reports a request of r that took two attempts on e's
// first two providers, as finish does when a request ends: a hedged one
// (the first lost the race) or a failover (the first answered 503), for
// the benches of what finishing a request costs the layers above.
func FinishTwoAttempts(e *Engine, r *http.Request, hedged bool) {
	p1, p2 := e.providers[0], e.providers[1]
	st := newRequestState(e, r, dialectAnthropic)
	st.req = &wire.Request{Dialect: dialectAnthropic, Model: "claude-bench", Stream: true}
	usage := wire.Usage{Input: 33, Output: 9, Model: "claude-bench"}
	var lost, won *attempt
	if hedged {
		lost = &attempt{p: p1, model: "claude-bench", reason: "initial", outcome: "hedge_loser_cancelled", class: wire.ClassLoser, elapsed: 200 * time.Millisecond}
		won = &attempt{p: p2, model: "claude-bench", reason: "hedge_triggered", status: 200, outcome: "hedge_winner",
			offset: 150 * time.Millisecond, firstEvent: 40 * time.Millisecond, usage: usage}
	} else {
		lost = &attempt{p: p1, model: "claude-bench", reason: "initial", status: 503, class: wire.ClassOverloaded, outcome: "provider_error"}
		won = &attempt{p: p2, model: "claude-bench", reason: "failover", status: 200, outcome: "request_success",
			offset: 3 * time.Millisecond, firstEvent: 180 * time.Millisecond, usage: usage}
	}
	st.attempts = []*attempt{lost, won}
	st.winner, st.outcome, st.status, st.hedged = won, OutcomeSuccess, http.StatusOK, hedged
	p2.health.BeginAttempt() // finish ends the winner's attempt
	finish(st)
}
