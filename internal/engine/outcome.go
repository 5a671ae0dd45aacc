package engine

import (
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/health"
	"github.com/llmhedge/caddy-llm-hedge/internal/stream"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// An attempt's provider bookkeeping is recorded here, in one place, so
// that it pairs up: every attempt sent to a provider begins once and ends
// once (the provider's in-flight count), and every breaker probe gets
// exactly one verdict (a success or a commit closes the breaker, a failure
// re-opens it, a release frees the slot for the next probe).

// bookkeepingDone, when set (by tests), sees each request after its last
// bookkeeping, so the pairing can be checked on real races.
var bookkeepingDone atomic.Pointer[func(st *requestState)]

// begin records that the attempt is sent to its provider now, in the
// provider's health epoch of now: after an admin reset its failure counts
// for nothing.
func (a *attempt) begin() {
	a.epoch = a.p.health.Epoch.Load()
	a.p.health.BeginAttempt()
	if a.key != nil {
		a.key.St.InFlight.Add(1) // its quota was taken by keyFor
	}
	a.begun++
}

// end records that the attempt no longer holds its provider: it failed or
// lost, or, a winner, its response is done.
func (a *attempt) end() {
	a.p.health.EndAttempt()
	if a.key != nil {
		a.key.St.InFlight.Add(-1)
		if !a.keyAnswered {
			a.key.St.Answered()
		}
	}
	a.ended++
}

// noteRateLimits records what a response's rate-limit headers say of the
// quota of the attempt's key, whatever its status.
func (a *attempt) noteRateLimits(h http.Header) {
	if a.key == nil {
		return
	}
	a.keyAnswered = true
	a.key.St.Answered()
	if rl, ok := health.ParseRateLimits(h, clock()); ok {
		a.key.St.NoteRateLimits(rl, a.keySent, a.keyBefore)
	}
}

// settleKey records a failure that is its key's, not its provider's: a
// 401/403 disables the key, a 429 cools it (Retry-After or a Gemini
// body's retryDelay, at most the breaker's Retry-After cap, else the reset
// of the limit that ran out, else keyCooldownDefault). While another key of
// the provider is not disabled, the provider stays in service: its breaker
// is not charged, and the provider goes back into the request's plan so
// that the failover tries it with another key. It reports whether it
// settled the attempt.
func settleKey(st *requestState, a *attempt, now time.Time) bool {
	h := st.h
	k := a.key
	if k == nil || a.notKey || (a.class != wire.ClassAuth && a.class != wire.ClassRateLimited) {
		return false
	}
	if !a.p.usableKeyBut(k) {
		// The last key in service: its failure is the provider's, as
		// with a single key (the breaker, its probes and Retry-After).
		return false
	}
	if a.class == wire.ClassAuth {
		if !k.St.Disabled.Swap(true) { // once, when requests refused together
			h.keyDisabled(a)
		}
	} else {
		until := now.Add(keyCooldownDefault).UnixNano()
		switch {
		case a.hasRA && a.retryAfter > 0:
			// capped as the breaker caps it: a buggy or hostile hint
			// cannot take a key out for a day
			until = now.Add(min(a.retryAfter, h.cooldown.RetryAfterCap())).UnixNano()
		case k.St.ReqLeft.Load() == 0 && k.St.ReqReset.Load() > now.UnixNano():
			until = k.St.ReqReset.Load()
		case k.St.TokReset.Load() > now.UnixNano():
			until = k.St.TokReset.Load()
		}
		k.St.Cool(until)
	}
	a.outcome = "key_" + string(a.class)
	a.noRetry = true // the failover takes the provider again, with another key
	a.p.health.Release(a.probe)
	st.plan.reopen(a.p)
	h.obs.Attempt(a.p.name, "failed_"+string(a.class))
	return true
}

// declineProbe gives back the probe slot a forwarded call was admitted
// with: a models list or a token count is not a fair probe of completions.
func declineProbe(p *provider) {
	p.health.Release(true)
}

// recordWin gives a winner's provider its verdict at the winner's first
// valid event: a complete body is a success; a stream closes a probed
// breaker now and has its verdict at its end (recordStreamEnd). A stream's
// first-event time feeds the hedge delay.
func recordWin(st *requestState, a *attempt, now time.Time) {
	h := st.h
	closed := false
	if a.body != nil {
		closed = a.p.health.OnSuccess(now, a.probe)
	} else {
		closed = a.p.health.OnCommit(now, a.probe) // commit records the stream's end
	}
	if closed {
		h.breakerClosed(a.p)
	}
	a.verdicts++
	if st.req.Stream {
		// Only streams are hedged, and a non-stream's time is the whole
		// generation, not a first event: it would inflate the hedge delay
		// and the routing cost.
		a.p.latency.Observe(st.req.SizeClass, a.firstEvent, now)
		a.p.health.Route.ObserveFirstEvent(st.req.SizeClass, a.firstEvent, now)
	} else {
		a.p.health.Route.ObserveSuccess(now)
	}
}

// recordStreamEnd gives a committed stream's provider the verdict on the
// whole stream: a complete one is a success, a cut one a failure, unless
// the client left or the request ran out of time (not the provider's
// doing). The winner's chain entry then says how its stream ended.
func recordStreamEnd(st *requestState, a *attempt, res stream.RelayResult) {
	h := st.h
	switch {
	case res.Complete:
		a.p.health.OnSuccess(clock(), false)
		return
	case res.Reason == "client_gone":
		a.outcome, a.class = "client_abort", wire.ClassClientAbort
	case res.Reason == "total_timeout":
		a.outcome, a.class = "total_timeout", wire.ClassTotalTimeout
	case res.Reason == "shutdown": // the proxy's doing, not the provider's
		a.outcome, a.class = "shutdown", wire.ClassClientAbort
	default:
		h.providerFailed(a.p, a.epoch, clock(), "stream_"+res.Reason, res.Err, 0, 0, st.plan.model, false)
		a.outcome, a.class = "stream_error", wire.FailClass("stream_"+res.Reason)
	}
	a.err = res.Err
}

// recordWinnerEnd ends the winner once its response is done, with the
// tokens it served and, when it won a race, the hedge it won.
func recordWinnerEnd(w *attempt) {
	w.end()
	u := &w.usage
	w.p.health.AddTokens(u.Input, u.Output, u.CacheRead, u.CacheWrite)
	if w.outcome == "hedge_winner" {
		w.p.health.NoteHedge(true)
	}
}

// settle records a finished, non-winning attempt against its provider:
// provider-level failures count toward cooldown; losers, aborts and
// request-level errors only release the probe slot.
func settle(st *requestState, a *attempt) {
	h := st.h
	now := clock()
	p := a.p
	a.end()
	a.cancel(nil)
	a.verdicts++ // every branch below gives the probe, if a.probe, its verdict
	st.discoverMiss(a)
	if settleKey(st, a, now) {
		return
	}
	switch {
	case a.class == wire.ClassLoser:
		a.outcome = "hedge_loser_cancelled"
		p.health.Release(a.probe)
		p.health.NoteHedge(false)
		p.latency.Observe(st.req.SizeClass, a.elapsed, now) // the tail must not hide behind cancellations
		if st.req.Stream {
			if a.firstEvent > 0 { // it tied: its first event came
				p.health.Route.ObserveFirstEvent(st.req.SizeClass, a.firstEvent, now)
			} else {
				p.health.Route.ObserveAtLeast(st.req.SizeClass, a.elapsed, now)
			}
		}
		h.obs.Attempt(p.name, "lost")
	case a.class == wire.ClassClientAbort || a.class == wire.ClassTotalTimeout:
		a.outcome = "client_abort"
		if a.class == wire.ClassTotalTimeout {
			a.outcome = "total_timeout"
		}
		p.health.Release(a.probe)
		h.obs.Attempt(p.name, "failed_"+string(a.class))
	case a.class == wire.ClassObjectMissing:
		a.outcome = "discover_miss" // not the provider's fault: its health is not charged
		p.health.Release(a.probe)
		h.obs.Attempt(p.name, "failed_"+string(a.class))
	case a.class.ProviderLevel():
		a.outcome = "provider_error"
		if st.req.Stream {
			p.health.Route.ObserveAtLeast(st.req.SizeClass, a.elapsed, now) // no first event after that long
		}
		h.providerFailed(p, a.epoch, now, string(a.class), a.err, a.status, a.retryAfter, st.plan.model, a.probe)
		h.obs.Attempt(p.name, "failed_"+string(a.class))
	default:
		a.outcome = "request_error"
		p.health.Release(a.probe)
		h.obs.Attempt(p.name, "failed_"+string(a.class))
	}
}

// The log lines of state changes: a provider's breaker opening, closing or
// reset by an operator, and a pool key disabled or re-enabled. Each is
// written once per transition, not per request: the health code reports a
// transition only to the caller whose compare-and-swap made it, so requests
// failing together on one provider write one line.

// providerFailed records a provider-level failure of an attempt on p begun
// in epoch, and logs the breaker opening it caused, if it did.
func (h *Engine) providerFailed(p *provider, epoch int64, now time.Time, class string, err error, status int, retryAfter time.Duration, model string, probe bool) {
	msg := loggedError(p, err)
	if class != "model_not_found" { // the provider answered: only that model is missing
		p.health.Route.ObserveFailure(now)
	}
	if !p.health.OnFailureIn(epoch, now, h.cooldown, class, msg, status, retryAfter, model, probe) {
		return
	}
	ph := p.health
	until := ph.OpenUntil()
	h.obs.Transition(Transition{Kind: BreakerOpened, Provider: p.name, URL: RedactedBaseURL(ph.BaseURL),
		Consecutive: ph.Consecutive.Load(), OpenUntil: until, OpenFor: until.Sub(now), Probe: probe, Class: class, Error: msg})
}

// breakerClosed reports a breaker a successful probe closed.
func (h *Engine) breakerClosed(p *provider) {
	h.obs.Transition(Transition{Kind: BreakerClosed, Provider: p.name, URL: RedactedBaseURL(p.health.BaseURL)})
}

// ResetBreaker is an operator's reset of one provider entry: the breaker
// closes and the disabled keys come back, each reported to obs (nil:
// none).
func ResetBreaker(obs Observer, ph *health.Provider) {
	was, reenabled := ph.Reset(clock())
	if obs == nil {
		return
	}
	obs.Transition(Transition{Kind: BreakerReset, Provider: ph.Name, URL: RedactedBaseURL(ph.BaseURL), Was: was.String()})
	for _, fp := range reenabled {
		obs.Transition(Transition{Kind: KeyReenabled, Provider: ph.Name, Key: fp, Reason: "admin reset"})
	}
}

// keyDisabled reports a pool key a provider refused (401/403): the key is
// named by its fingerprint, never by itself.
func (h *Engine) keyDisabled(a *attempt) {
	h.obs.Transition(Transition{Kind: KeyDisabled, Provider: a.p.name, Key: a.key.St.Fp, Status: a.status,
		Class: string(a.class), Error: loggedError(a.p, a.err)})
}

// maxLoggedError bounds an error in a log line or the admin view: it may
// quote an upstream's error body.
const maxLoggedError = 512

// loggedError is err's message as the log and the admin view show it:
// every URL in it without user:password@ or query (a transport error quotes
// the URL it called), every configured key of p replaced by its
// fingerprint, and at most maxLoggedError bytes.
func loggedError(p *provider, err error) string {
	if err == nil {
		return ""
	}
	msg := redactURLs(err.Error())
	if p != nil {
		for _, k := range p.keys {
			if k.Secret != "" {
				msg = strings.ReplaceAll(msg, k.Secret, "key:"+k.St.Fp)
			}
		}
	}
	if len(msg) > maxLoggedError {
		msg = strings.ToValidUTF8(msg[:maxLoggedError], "") + "…"
	}
	return msg
}

// redactURLs passes every http(s) URL in s through RedactedBaseURL.
func redactURLs(s string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "http://")
		if j := strings.Index(s, "https://"); j >= 0 && (i < 0 || j < i) {
			i = j
		}
		if i < 0 {
			if b.Len() == 0 {
				return s
			}
			b.WriteString(s)
			return b.String()
		}
		end := strings.IndexAny(s[i:], " \"'`<>\t\r\n")
		if end < 0 {
			end = len(s) - i
		}
		b.WriteString(s[:i])
		b.WriteString(RedactedBaseURL(s[i : i+end]))
		s = s[i+end:]
	}
}

// RedactedBaseURL drops the parts of a base URL that may carry a credential
// (user:password@, ?key=...) before it is shown.
func RedactedBaseURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable)"
	}
	if u.User == nil && u.RawQuery == "" && !u.ForceQuery && u.Fragment == "" {
		return raw
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return u.String()
}
