// Package dashboard keeps the bounded data the live dashboard shows: a ring
// of the last requests and per-provider time series. Memory is fixed when a
// Board is made (plus one series per provider name, created on its first
// attempt); recording takes only a per-slot mutex that a reader holds for a
// copy of that one slot, so polling the page cannot hold the request path up
// for longer than one slot copy.
//
// Nothing here holds a prompt, an answer, a key or a client address: the
// caller passes names, counts and durations only.
package dashboard

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// RecentSize is the number of requests the ring keeps.
	RecentSize = 100
	// MaxAttempts is the number of attempts a recorded request keeps for
	// its timeline; more are counted in Request.Attempts only.
	MaxAttempts = 8
	// MaxText bounds every string a record keeps (site, model).
	MaxText = 64
)

// Attempt is one bar of a request's timeline.
type Attempt struct {
	Provider     string `json:"provider"`
	Reason       string `json:"reason"`            // initial, hedge_triggered, retry, failover, ...
	Outcome      string `json:"outcome,omitempty"` // request_success, hedge_winner, hedge_loser_cancelled, provider_error, ...
	Class        string `json:"error_class,omitempty"`
	Status       int    `json:"status,omitempty"`
	StartMs      int64  `json:"start_ms"`                 // from the request's start
	FirstEventMs int64  `json:"first_event_ms,omitempty"` // from the attempt's start; 0: none
	EndMs        int64  `json:"end_ms"`                   // from the request's start
}

// Request is one row of the recent-requests table.
type Request struct {
	Time         time.Time `json:"time"`
	Site         string    `json:"site"`
	Dialect      string    `json:"dialect"`
	Model        string    `json:"model"`
	Provider     string    `json:"provider"`
	Attempts     int       `json:"attempts"`
	Hedged       bool      `json:"hedged"`
	Outcome      string    `json:"outcome"`
	FirstEventMs int64     `json:"first_event_ms"`
	TotalMs      int64     `json:"total_ms"`
	InputTokens  int64     `json:"input_tokens"`
	OutputTokens int64     `json:"output_tokens"`
	// Translated: the winner spoke another dialect than the client's.
	Translated bool      `json:"translated,omitempty"`
	Chain      []Attempt `json:"chain"`
}

// recentSlot is one fixed-size slot of the ring.
type recentSlot struct {
	mu    sync.Mutex
	seq   uint64 // 0: never written
	req   Request
	chain [MaxAttempts]Attempt
	n     int
}

// Recent is the ring of the last RecentSize requests.
type Recent struct {
	next  atomic.Uint64
	slots [RecentSize]recentSlot
}

// Record stores r (its Chain is copied into the slot, up to MaxAttempts;
// strings longer than MaxText are cut). Callers pass strings that are
// their own, not slices of a request body.
func (rc *Recent) Record(r Request) { rc.RecordChain(r, r.Chain) }

// RecordChain is Record of r with the chain given apart: the chain is only
// copied, so a caller's array for it stays on the caller's stack (r itself
// is stored, and whatever it points to escapes).
func (rc *Recent) RecordChain(r Request, chain []Attempt) {
	seq := rc.next.Add(1)
	s := &rc.slots[(seq-1)%RecentSize]
	s.mu.Lock()
	if s.seq < seq { // a slower writer of an older lap must not overwrite
		s.seq = seq
		r.Chain = nil
		r.Site, r.Model = cut(r.Site), cut(r.Model)
		s.req = r
		s.n = copy(s.chain[:], chain)
	}
	s.mu.Unlock()
}

// Snapshot returns the recorded requests, newest first.
func (rc *Recent) Snapshot() []Request {
	last := rc.next.Load()
	out := make([]Request, 0, RecentSize)
	for i := uint64(0); i < RecentSize && i < last; i++ {
		s := &rc.slots[(last-1-i)%RecentSize]
		s.mu.Lock()
		if s.seq != 0 {
			r := s.req
			r.Chain = append([]Attempt(nil), s.chain[:s.n]...)
			out = append(out, r)
		}
		s.mu.Unlock()
	}
	return out
}

// cut bounds s and copies it, so a record never keeps a larger string
// (a request body) alive.
func cut(s string) string {
	if len(s) > MaxText {
		s = s[:MaxText]
	}
	return strings.Clone(s)
}

// Board is what the live dashboard shows: the last requests, the
// per-provider time series, the overview strip of all of them and the
// feed of transitions, of fixed size, one per process.
type Board struct {
	Recent   Recent
	Series   Series
	Overview Overview
	Feed     Feed
}

// RecordRequest records a finished request: its row in Recent (the chain
// copied, as RecordChain) and its counts in the Overview at r.Time.
func (b *Board) RecordRequest(r Request, chain []Attempt) {
	b.Overview.RecordRequest(&r, chain)
	b.Recent.RecordChain(r, chain)
}

// RecordSpend adds one request's spend at now, in US dollars: its
// answer's, and its overhead (hedges, continuations, failed attempts a
// provider bills). Never called, the overview has no spend (no prices).
func (b *Board) RecordSpend(now time.Time, answerUSD, overheadUSD float64) {
	b.Overview.RecordSpend(now, answerUSD, overheadUSD)
}

// RecordTransition adds a transition to the feed: kind is one of the
// engine's (breaker_opened, breaker_closed, breaker_reset, key_disabled,
// key_reenabled) or reload; detail a short text for the operator (never
// a key, a prompt or an address).
func (b *Board) RecordTransition(now time.Time, kind, provider, detail string) {
	b.Feed.Record(Transition{Time: now, Kind: kind, Provider: provider, Detail: detail})
}
