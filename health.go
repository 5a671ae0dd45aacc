package llmhedge

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmhedge/caddy-llm-hedge/internal/health"
)

// providerPool holds the health of every provider, keyed by healthKey. It is
// package-level so that a config reload, which provisions new handlers before
// cleaning up the old ones, finds the same entries and keeps what was learned.
var providerPool = caddy.NewUsagePool()

// The breaker's defaults (cooldown.failures, cooldown.duration; cooldown.max
// defaults to the duration).
const (
	healthDefaultFailures = 3
	healthDefaultDuration = 30 * time.Second
)

// retryAfterDefaultMax bounds an upstream's Retry-After when no max is
// configured, so that a buggy or hostile "Retry-After: 86400" cannot take a
// provider out for a day.
const retryAfterDefaultMax = 5 * time.Minute

// cooldownConfig is the cooldown part of a provider's configuration.
type cooldownConfig struct {
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

func (c cooldownConfig) failures() int64 {
	if c.Failures <= 0 {
		return healthDefaultFailures
	}
	return int64(c.Failures)
}

func (c cooldownConfig) duration() time.Duration {
	if c.Duration <= 0 {
		return healthDefaultDuration
	}
	return c.Duration
}

// growthCap is the longest period a failed probe can grow the open period to.
func (c cooldownConfig) growthCap() time.Duration {
	return max(c.Max, c.duration())
}

func (c cooldownConfig) retryAfterCap() time.Duration {
	if c.Max > c.duration() {
		return c.Max
	}
	return retryAfterDefaultMax
}

// breakerState is the circuit breaker state of a provider. Its numeric value
// is the provider state gauge (0 closed, 1 half_open, 2 open): keep the order.
type breakerState uint8

const (
	stateClosed breakerState = iota
	stateHalfOpen
	stateOpen
)

func (s breakerState) String() string {
	switch s {
	case stateClosed:
		return "closed"
	case stateHalfOpen:
		return "half_open"
	case stateOpen:
		return "open"
	}
	return fmt.Sprintf("breakerState(%d)", uint8(s))
}

// lastFailure is swapped in whole: class, message (redacted) and time match.
type lastFailure struct {
	class, msg string
	at         int64
}

// providerHealth is the shared health of one upstream provider. It is only
// atomics and timestamps (unix nanoseconds): no lock on the request path, no
// timer or goroutine, so it costs nothing while idle and survives reloads.
//
// The breaker state is derived from openUntil: zero means closed, a time in
// the future means open, a time in the past means half-open (one probe may
// go). probeSince holds the start of the probe in flight, zero when none.
type providerHealth struct {
	// latency holds recent first-event times: it drives the adaptive hedge
	// delay and the admin p50/p95, and outlives reloads with the breaker.
	latency *health.LatencyTracker
	// hedgeDelayNs is the hedge delay last armed on this provider (0: none yet), for the dashboard.
	hedgeDelayNs atomic.Int64

	name    string
	baseURL string
	vendor  atomic.Pointer[string]

	consecutive atomic.Int64
	openUntilNs atomic.Int64
	// period is the length of the current (or last) open period; a failed
	// probe doubles it. Zero after the breaker closes.
	period     atomic.Int64
	probeSince atomic.Int64
	// epoch counts admin resets. An attempt remembers the epoch it began
	// in, and a failure from an older one does not count against the
	// breaker the operator closed since (see onFailureIn).
	epoch atomic.Int64
	// models maps a model name to the unix nanos its cooldown ends. The map
	// is copied on write (404s are rare) so admit reads it without a lock.
	models atomic.Pointer[map[string]int64]

	inFlight         atomic.Int64
	requests         atomic.Int64
	failures         atomic.Int64
	hedgesWon        atomic.Int64
	hedgesLost       atomic.Int64
	tokensIn         atomic.Int64
	tokensOut        atomic.Int64
	tokensCacheRead  atomic.Int64
	tokensCacheWrite atomic.Int64
	lastErr          atomic.Pointer[lastFailure]

	// keys holds the state of each configured key by fingerprint (keys.go).
	keys keyStates
}

func (*providerHealth) Destruct() error { return nil } // nothing to stop

// healthKey identifies a provider across handlers: two llm_hedge handlers
// naming the same upstream share its health.
func healthKey(name, baseURL string) string {
	return name + "|" + baseURL
}

// loadHealth returns the shared health of a provider, creating it on first
// use, and records vendor (the latest Provision wins). Every call must be
// paired with releaseHealth in Cleanup.
func loadHealth(name, baseURL, vendor string) (*providerHealth, error) {
	val, _, err := providerPool.LoadOrNew(healthKey(name, baseURL), func() (caddy.Destructor, error) {
		return &providerHealth{name: name, baseURL: baseURL, latency: health.NewLatencyTracker()}, nil
	})
	if err != nil {
		return nil, fmt.Errorf("provider %s: loading health: %w", name, err)
	}
	ph, ok := val.(*providerHealth)
	if !ok {
		return nil, fmt.Errorf("provider %s: loading health: unexpected %T in pool", name, val)
	}
	ph.vendor.Store(&vendor)
	return ph, nil
}

// releaseHealth drops one reference taken by loadHealth. The state is
// forgotten only when no handler of the running config names the provider.
func releaseHealth(name, baseURL string) {
	// Destruct never fails, and Delete on a missing key is a no-op.
	_, _ = providerPool.Delete(healthKey(name, baseURL))
}

// admit decides whether a new attempt may go to this provider now. probe is
// true when this attempt is the single half-open probe: the caller must then
// report exactly one of onSuccess, onFailure or release with probe set.
func (ph *providerHealth) admit(now time.Time, model string) (ok bool, probe bool) {
	if ph.modelCooling(now, model) {
		return false, false
	}
	until := ph.openUntilNs.Load()
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
func (ph *providerHealth) forceProbe(now time.Time) bool {
	return ph.takeProbe(now)
}

// takeProbe claims the probe slot. A slot held for longer than the open
// period belongs to an attempt that will never report (its caller crashed or
// leaked it), so it is taken over rather than blocking the provider forever.
func (ph *providerHealth) takeProbe(now time.Time) bool {
	t := now.UnixNano()
	if t == 0 {
		t = 1 // zero means "no probe"
	}
	stale := ph.period.Load()
	if stale <= 0 {
		stale = int64(healthDefaultDuration)
	}
	for {
		since := ph.probeSince.Load()
		if since != 0 && t-since < stale {
			return false
		}
		if ph.probeSince.CompareAndSwap(since, t) {
			return true
		}
	}
}

// onSuccess records a provider-level success: the consecutive count starts
// over, and a successful probe closes the breaker (closed reports that).
func (ph *providerHealth) onSuccess(now time.Time, probe bool) (closed bool) {
	ph.consecutive.Store(0)
	return ph.onCommit(now, probe)
}

// onCommit records a stream committed to the client at its first valid
// event. That proves a probe right, so the breaker closes now rather than
// when a stream of minutes ends; but the consecutive count waits for the
// stream's end (onSuccess or onFailure), or a provider that cuts every
// stream after its first tokens would never open.
func (ph *providerHealth) onCommit(now time.Time, probe bool) (closed bool) {
	if !probe {
		return false
	}
	closed = ph.openUntilNs.Swap(0) != 0 // false when an admin reset got there first
	ph.period.Store(0)
	ph.probeSince.Store(0)
	return closed
}

// onFailure records a failed attempt: class (e.g. "status_5xx",
// "model_not_found"), msg its redacted message, status the HTTP status or
// zero, retryAfter the upstream's Retry-After or zero, model the requested
// model. opened: this failure opened the breaker (of racing ones, one did).
func (ph *providerHealth) onFailure(now time.Time, cfg cooldownConfig, class, msg string, status int, retryAfter time.Duration, model string, probe bool) (opened bool) {
	ph.failures.Add(1)
	ph.lastErr.Store(&lastFailure{class: class, msg: msg, at: now.UnixNano()})
	if class == "model_not_found" {
		// The provider answered, so this says nothing about its health:
		// only that model is skipped there for a while.
		ph.coolModel(now, model, cfg.duration())
		ph.release(probe)
		return false
	}

	n := ph.consecutive.Add(1)
	switch {
	case retryAfter > 0 && (status == 429 || status == 503 || status == 529):
		// The provider said when to come back: believe it, whatever the count.
		d := min(retryAfter, cfg.retryAfterCap())
		ph.period.Store(int64(max(d, cfg.duration())))
		opened = ph.openAtLeast(now, now.Add(d))
	case probe:
		next := min(2*time.Duration(ph.period.Load()), cfg.growthCap())
		next = max(next, cfg.duration())
		ph.period.Store(int64(next))
		opened = ph.openAtLeast(now, now.Add(next))
	case n >= cfg.failures() && ph.openUntilNs.Load() == 0:
		d := cfg.duration()
		if ph.openUntilNs.CompareAndSwap(0, now.Add(d).UnixNano()) {
			ph.period.Store(int64(d))
			opened = true
		}
	}
	// Cleared only after openUntil moved, so no one sees the old half-open
	// window with a free slot.
	ph.release(probe)
	return opened
}

// onFailureIn is onFailure for an attempt begun in epoch. After an admin
// reset (a new epoch) the failure of an attempt begun before it, a probe
// included, counts in the lifetime totals only: it neither counts toward
// nor re-opens the breaker the operator just closed, and it does not free
// a probe slot that belongs to the new epoch.
func (ph *providerHealth) onFailureIn(epoch int64, now time.Time, cfg cooldownConfig, class, msg string, status int, retryAfter time.Duration, model string, probe bool) (opened bool) {
	if ph.epoch.Load() != epoch {
		ph.failures.Add(1)
		ph.lastErr.Store(&lastFailure{class: class, msg: msg, at: now.UnixNano()})
		return false
	}
	return ph.onFailure(now, cfg, class, msg, status, retryAfter, model, probe)
}

// admitsAt reports whether admit could let an attempt through at t, as far
// as the state now tells: the model is not cooling then and the breaker is
// closed or its open period is over by t. A same-provider retry asks
// before it waits, so a wait the breaker would refuse is not waited.
func (ph *providerHealth) admitsAt(t time.Time, model string) bool {
	if ph.modelCooling(t, model) {
		return false
	}
	until := ph.openUntilNs.Load()
	return until == 0 || t.UnixNano() >= until
}

// openAtLeast opens the breaker until at least until: a later, shorter
// verdict never shortens an open period that is already longer. It reports
// whether it opened a breaker that was closed or half-open at now.
func (ph *providerHealth) openAtLeast(now, until time.Time) bool {
	u := until.UnixNano()
	for {
		cur := ph.openUntilNs.Load()
		if cur >= u {
			return false
		}
		if ph.openUntilNs.CompareAndSwap(cur, u) {
			return cur == 0 || cur <= now.UnixNano()
		}
	}
}

// release frees the probe slot of an attempt that ended without a verdict
// (a hedge loser, a client abort, a request-level 4xx).
func (ph *providerHealth) release(probe bool) {
	if probe {
		ph.probeSince.Store(0)
	}
}

func (ph *providerHealth) state(now time.Time) breakerState {
	return stateAt(ph.openUntilNs.Load(), now)
}

func stateAt(openUntilNs int64, now time.Time) breakerState {
	switch {
	case openUntilNs == 0:
		return stateClosed
	case now.UnixNano() < openUntilNs:
		return stateOpen
	}
	return stateHalfOpen
}

// openUntil is when the open period ends (or ended, when half-open); zero
// when closed.
func (ph *providerHealth) openUntil() time.Time {
	until := ph.openUntilNs.Load()
	if until == 0 {
		return time.Time{}
	}
	return time.Unix(0, until)
}

// reset closes the breaker and forgets consecutive failures and model
// cooldowns; the lifetime counters stay. It starts a new epoch, so attempts
// still in flight (a probe among them) cannot re-open what it closed. It
// returns the state it reset and the keys (fingerprints) it re-enabled.
func (ph *providerHealth) reset(now time.Time) (was breakerState, reenabled []string) {
	ph.epoch.Add(1)
	was = stateAt(ph.openUntilNs.Swap(0), now)
	ph.period.Store(0)
	ph.consecutive.Store(0)
	ph.probeSince.Store(0)
	ph.models.Store(nil)
	return was, ph.keys.reset()
}

// beginAttempt and endAttempt bracket every attempt sent to the provider.
func (ph *providerHealth) beginAttempt() {
	ph.requests.Add(1)
	ph.inFlight.Add(1)
}

func (ph *providerHealth) endAttempt() {
	ph.inFlight.Add(-1)
}

// inFlightNow is the number of attempts to this provider in flight, across
// every handler that names it.
func (ph *providerHealth) inFlightNow() int64 {
	return ph.inFlight.Load()
}

func (ph *providerHealth) addTokens(in, out, cacheRead, cacheWrite int64) {
	ph.tokensIn.Add(in)
	ph.tokensOut.Add(out)
	ph.tokensCacheRead.Add(cacheRead)
	ph.tokensCacheWrite.Add(cacheWrite)
}

// noteHedge records the outcome of a raced attempt.
func (ph *providerHealth) noteHedge(won bool) {
	if won {
		ph.hedgesWon.Add(1)
	} else {
		ph.hedgesLost.Add(1)
	}
}
