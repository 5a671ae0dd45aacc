package health

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/routing"
)

// The breaker's defaults (cooldown.failures, cooldown.duration; cooldown.max
// defaults to the duration).
const (
	DefaultFailures = 3
	DefaultDuration = 30 * time.Second
)

// retryAfterDefaultMax bounds an upstream's Retry-After when no max is
// configured, so that a buggy or hostile "Retry-After: 86400" cannot take a
// provider out for a day.
const retryAfterDefaultMax = 5 * time.Minute

// cooldownConfig is the cooldown part of a provider's configuration.
type Cooldown struct {
	// Consecutive provider-level failures that open the breaker. Default 3.
	Failures int
	// How long the breaker stays open, and how long a model that a provider
	// said does not exist is skipped on it. Default 30s.
	Duration time.Duration
	// Longest open period: each failed probe doubles the previous period up
	// to Max. When Max > Duration it also bounds an upstream's Retry-After;
	// otherwise (the default, Max = Duration: no growth) Retry-After is
	// bounded by 5 minutes, since a provider's own word beats our default.
	Max time.Duration
}

func (c Cooldown) failures() int64 {
	if c.Failures <= 0 {
		return DefaultFailures
	}
	return int64(c.Failures)
}

func (c Cooldown) duration() time.Duration {
	if c.Duration <= 0 {
		return DefaultDuration
	}
	return c.Duration
}

// growthCap is the longest period a failed probe can grow the open period to.
func (c Cooldown) growthCap() time.Duration {
	return max(c.Max, c.duration())
}

func (c Cooldown) RetryAfterCap() time.Duration {
	if c.Max > c.duration() {
		return c.Max
	}
	return retryAfterDefaultMax
}

// breakerState is the circuit breaker state of a provider. Its numeric value
// is the provider state gauge (0 closed, 1 half_open, 2 open): keep the order.
type State uint8

const (
	StateClosed State = iota
	StateHalfOpen
	StateOpen
)

func (s State) String() string {
	switch s {
	case StateClosed:
		return "closed"
	case StateHalfOpen:
		return "half_open"
	case StateOpen:
		return "open"
	}
	return fmt.Sprintf("breakerState(%d)", uint8(s))
}

// lastFailure is swapped in whole: class, message (redacted) and time match.
type lastFailure struct {
	Class, Msg string
	At         int64
}

// providerHealth is the shared health of one upstream provider. It is only
// atomics and timestamps (unix nanoseconds): no lock on the request path, no
// timer or goroutine, so it costs nothing while idle and survives reloads.
//
// The breaker state is derived from openUntil: zero means closed, a time in
// the future means open, a time in the past means half-open (one probe may
// go). probeSince holds the start of the probe in flight, zero when none.
type Provider struct {
	// latency holds recent first-event times: it drives the adaptive hedge
	// delay and the admin p50/p95, and outlives reloads with the breaker.
	Latency *LatencyTracker
	// Route is what adaptive routing measured of the provider (recent
	// first-event times, failure rate, picks); a reload keeps it.
	Route routing.Stats
	// hedgeDelayNs is the hedge delay last armed on this provider (0: none yet), for the dashboard.
	HedgeDelayNs atomic.Int64

	Name    string
	BaseURL string
	Vendor  atomic.Pointer[string]

	Consecutive atomic.Int64
	OpenUntilNs atomic.Int64
	// period is the length of the current (or last) open period; a failed
	// probe doubles it. Zero after the breaker closes.
	period     atomic.Int64
	ProbeSince atomic.Int64
	// limitedUntilNs is when the provider's own Retry-After on a 429 ends:
	// until then the all-open probe does not force it (RateLimited).
	limitedUntilNs atomic.Int64
	// epoch counts admin resets. An attempt remembers the epoch it began
	// in, and a failure from an older one does not count against the
	// breaker the operator closed since (see onFailureIn).
	Epoch atomic.Int64
	// models maps a model name to the unix nanos its cooldown ends. The map
	// is copied on write (404s are rare) so admit reads it without a lock.
	Models atomic.Pointer[map[string]int64]

	InFlight         atomic.Int64
	Requests         atomic.Int64
	Failures         atomic.Int64
	HedgesWon        atomic.Int64
	HedgesLost       atomic.Int64
	TokensIn         atomic.Int64
	TokensOut        atomic.Int64
	TokensCacheRead  atomic.Int64
	TokensCacheWrite atomic.Int64
	LastErr          atomic.Pointer[lastFailure]

	// keys holds the state of each configured key by fingerprint (keys.go).
	Keys Keys
}

func (*Provider) Destruct() error { return nil } // nothing to stop

// admit decides whether a new attempt may go to this provider now. probe is
// true when this attempt is the single half-open probe: the caller must then
// report exactly one of onSuccess, onFailure or release with probe set.
func (ph *Provider) Admit(now time.Time, model string) (ok bool, probe bool) {
	if ph.ModelCooling(now, model) {
		return false, false
	}
	until := ph.OpenUntilNs.Load()
	if until == 0 {
		return true, false
	}
	if now.UnixNano() < until {
		return false, false
	}
	if ph.takeProbe(now) {
		return true, true
	}
	return false, false
}

// forceProbe takes the probe slot even though the breaker is still open; the
// caller uses it when every candidate is open. It returns false when a probe
// is already in flight.
func (ph *Provider) ForceProbe(now time.Time) bool {
	return ph.takeProbe(now)
}

// takeProbe claims the probe slot. A slot held for longer than the open
// period belongs to an attempt that will never report (its caller crashed or
// leaked it), so it is taken over rather than blocking the provider forever.
func (ph *Provider) takeProbe(now time.Time) bool {
	t := now.UnixNano()
	if t == 0 {
		t = 1 // zero means "no probe"
	}
	stale := ph.period.Load()
	if stale <= 0 {
		stale = int64(DefaultDuration)
	}
	for {
		since := ph.ProbeSince.Load()
		if since != 0 && t-since < stale {
			return false
		}
		if ph.ProbeSince.CompareAndSwap(since, t) {
			return true
		}
	}
}

// onSuccess records a provider-level success: the consecutive count starts
// over, and a successful probe closes the breaker (closed reports that).
func (ph *Provider) OnSuccess(now time.Time, probe bool) (closed bool) {
	ph.Consecutive.Store(0)
	return ph.OnCommit(now, probe)
}

// onCommit records a stream committed to the client at its first valid
// event. That proves a probe right, so the breaker closes now rather than
// when a stream of minutes ends; but the consecutive count waits for the
// stream's end (onSuccess or onFailure), or a provider that cuts every
// stream after its first tokens would never open.
func (ph *Provider) OnCommit(now time.Time, probe bool) (closed bool) {
	if !probe {
		return false
	}
	closed = ph.OpenUntilNs.Swap(0) != 0 // false when an admin reset got there first
	ph.period.Store(0)
	ph.ProbeSince.Store(0)
	return closed
}

// onFailure records a failed attempt: class (e.g. "status_5xx",
// "model_not_found"), msg its redacted message, status the HTTP status or
// zero, retryAfter the upstream's Retry-After or zero, model the requested
// model. opened: this failure opened the breaker (of racing ones, one did).
func (ph *Provider) OnFailure(now time.Time, cfg Cooldown, class, msg string, status int, retryAfter time.Duration, model string, probe bool) (opened bool) {
	ph.Failures.Add(1)
	ph.LastErr.Store(&lastFailure{Class: class, Msg: msg, At: now.UnixNano()})
	if class == "model_not_found" {
		// The provider answered, so this says nothing about its health:
		// only that model is skipped there for a while.
		ph.CoolModel(now, model, cfg.duration())
		ph.Release(probe)
		return false
	}

	n := ph.Consecutive.Add(1)
	switch {
	case retryAfter > 0 && (status == 429 || status == 503 || status == 529):
		// The provider said when to come back: believe it, whatever the count.
		d := min(retryAfter, cfg.RetryAfterCap())
		ph.period.Store(int64(max(d, cfg.duration())))
		opened = ph.OpenAtLeast(now, now.Add(d))
		if status == 429 {
			ph.noteLimited(now.Add(d))
		}
	case probe:
		next := min(2*time.Duration(ph.period.Load()), cfg.growthCap())
		next = max(next, cfg.duration())
		ph.period.Store(int64(next))
		opened = ph.OpenAtLeast(now, now.Add(next))
	case n >= cfg.failures() && ph.OpenUntilNs.Load() == 0:
		d := cfg.duration()
		if ph.OpenUntilNs.CompareAndSwap(0, now.Add(d).UnixNano()) {
			ph.period.Store(int64(d))
			opened = true
		}
	}
	// Cleared only after openUntil moved, so no one sees the old half-open
	// window with a free slot.
	ph.Release(probe)
	return opened
}

// onFailureIn is onFailure for an attempt begun in epoch. After an admin
// reset (a new epoch) the failure of an attempt begun before it, a probe
// included, counts in the lifetime totals only: it neither counts toward
// nor re-opens the breaker the operator just closed, and it does not free
// a probe slot that belongs to the new epoch.
func (ph *Provider) OnFailureIn(epoch int64, now time.Time, cfg Cooldown, class, msg string, status int, retryAfter time.Duration, model string, probe bool) (opened bool) {
	if ph.Epoch.Load() != epoch {
		ph.Failures.Add(1)
		ph.LastErr.Store(&lastFailure{Class: class, Msg: msg, At: now.UnixNano()})
		return false
	}
	return ph.OnFailure(now, cfg, class, msg, status, retryAfter, model, probe)
}

// admitsAt reports whether admit could let an attempt through at t, as far
// as the state now tells: the model is not cooling then and the breaker is
// closed or its open period is over by t. A same-provider retry asks
// before it waits, so a wait the breaker would refuse is not waited.
func (ph *Provider) AdmitsAt(t time.Time, model string) bool {
	if ph.ModelCooling(t, model) {
		return false
	}
	until := ph.OpenUntilNs.Load()
	return until == 0 || t.UnixNano() >= until
}

// openAtLeast opens the breaker until at least until: a later, shorter
// verdict never shortens an open period that is already longer. It reports
// whether it opened a breaker that was closed or half-open at now.
func (ph *Provider) OpenAtLeast(now, until time.Time) bool {
	u := until.UnixNano()
	for {
		cur := ph.OpenUntilNs.Load()
		if cur >= u {
			return false
		}
		if ph.OpenUntilNs.CompareAndSwap(cur, u) {
			return cur == 0 || cur <= now.UnixNano()
		}
	}
}

// noteLimited records the end of a rate limit's Retry-After; a later,
// shorter one never shortens it.
func (ph *Provider) noteLimited(until time.Time) {
	u := until.UnixNano()
	for {
		cur := ph.limitedUntilNs.Load()
		if cur >= u || ph.limitedUntilNs.CompareAndSwap(cur, u) {
			return
		}
	}
}

// RateLimited reports whether the provider's own Retry-After on a 429
// still runs at now. Like a key pool's cooling keys (SPEC 14), such a
// provider is skipped, and the all-open probe does not force it; a 503 or
// 529's Retry-After opens the breaker, which the probe may force (SPEC 4).
func (ph *Provider) RateLimited(now time.Time) bool {
	return ph.limitedUntilNs.Load() > now.UnixNano()
}

// release frees the probe slot of an attempt that ended without a verdict
// (a hedge loser, a client abort, a request-level 4xx).
func (ph *Provider) Release(probe bool) {
	if probe {
		ph.ProbeSince.Store(0)
	}
}

func (ph *Provider) State(now time.Time) State {
	return stateAt(ph.OpenUntilNs.Load(), now)
}

func stateAt(openUntilNs int64, now time.Time) State {
	switch {
	case openUntilNs == 0:
		return StateClosed
	case now.UnixNano() < openUntilNs:
		return StateOpen
	}
	return StateHalfOpen
}

// openUntil is when the open period ends (or ended, when half-open); zero
// when closed.
func (ph *Provider) OpenUntil() time.Time {
	until := ph.OpenUntilNs.Load()
	if until == 0 {
		return time.Time{}
	}
	return time.Unix(0, until)
}

// reset closes the breaker and forgets consecutive failures, model
// cooldowns and the provider's own rate-limit wait; the lifetime counters stay. It starts a new epoch, so attempts
// still in flight (a probe among them) cannot re-open what it closed. It
// returns the state it reset and the keys (fingerprints) it re-enabled.
func (ph *Provider) Reset(now time.Time) (was State, reenabled []string) {
	ph.Epoch.Add(1)
	was = stateAt(ph.OpenUntilNs.Swap(0), now)
	ph.period.Store(0)
	ph.Consecutive.Store(0)
	ph.ProbeSince.Store(0)
	ph.limitedUntilNs.Store(0)
	ph.Models.Store(nil)
	ph.Route.Reset() // measured again from the next attempts
	return was, ph.Keys.Reset()
}

// beginAttempt and endAttempt bracket every attempt sent to the provider.
func (ph *Provider) BeginAttempt() {
	ph.Requests.Add(1)
	ph.InFlight.Add(1)
}

func (ph *Provider) EndAttempt() {
	ph.InFlight.Add(-1)
}

// inFlightNow is the number of attempts to this provider in flight, across
// every handler that names it.
func (ph *Provider) InFlightNow() int64 {
	return ph.InFlight.Load()
}

func (ph *Provider) AddTokens(in, out, cacheRead, cacheWrite int64) {
	ph.TokensIn.Add(in)
	ph.TokensOut.Add(out)
	ph.TokensCacheRead.Add(cacheRead)
	ph.TokensCacheWrite.Add(cacheWrite)
}

// noteHedge records the outcome of a raced attempt.
func (ph *Provider) NoteHedge(won bool) {
	if won {
		ph.HedgesWon.Add(1)
	} else {
		ph.HedgesLost.Add(1)
	}
}
