package llmhedge

import (
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/llmhedge/caddy-llm-hedge/internal/health"
)

// The log lines of state changes: a provider's breaker opening, closing or
// reset by an operator, and a pool key disabled or re-enabled. Each is
// written once per transition, not per request: the health code reports a
// transition only to the caller whose compare-and-swap made it, so requests
// failing together on one provider write one line.

// Messages of the transition lines: static, as Caddy's own, so that a log
// pipeline can match them.
const (
	msgBreakerOpened = "provider breaker opened"
	msgBreakerClosed = "provider breaker closed"
	msgBreakerReset  = "provider breaker reset"
	msgKeyDisabled   = "provider key disabled"
	msgKeyReenabled  = "provider key re-enabled"
)

// providerFailed records a provider-level failure of an attempt on p begun
// in epoch, and logs the breaker opening it caused, if it did.
func (h *Handler) providerFailed(p *provider, epoch int64, now time.Time, class string, err error, status int, retryAfter time.Duration, model string, probe bool) {
	msg := loggedError(p, err)
	if !p.health.OnFailureIn(epoch, now, h.cooldown, class, msg, status, retryAfter, model, probe) {
		return
	}
	ph := p.health
	until := ph.OpenUntil()
	h.logger.Warn(msgBreakerOpened,
		zap.String("provider", p.name),
		zap.String("url", redactedBaseURL(ph.BaseURL)),
		zap.Int64("consecutive_failures", ph.Consecutive.Load()),
		zap.String("open_until", viewTime(until)),
		zap.Duration("open_for", until.Sub(now)),
		zap.Bool("probe_failed", probe),
		zap.String("error_class", class),
		zap.String("error", msg))
}

// breakerClosed logs a breaker a successful probe closed.
func (h *Handler) breakerClosed(p *provider) {
	h.logger.Info(msgBreakerClosed,
		zap.String("provider", p.name),
		zap.String("url", redactedBaseURL(p.health.BaseURL)))
}

// resetBreaker is an operator's reset of one provider entry: the breaker
// closes and the disabled keys come back, each with its line.
func resetBreaker(l *zap.Logger, ph *health.Provider) {
	was, reenabled := ph.Reset(clock())
	if l == nil {
		return
	}
	l.Info(msgBreakerReset,
		zap.String("provider", ph.Name),
		zap.String("url", redactedBaseURL(ph.BaseURL)),
		zap.String("was", was.String()))
	for _, fp := range reenabled {
		keyReenabled(l, ph.Name, fp, "admin reset")
	}
}

// keyDisabled logs a pool key a provider refused (401/403): the key is
// named by its fingerprint, never by itself.
func (h *Handler) keyDisabled(a *attempt) {
	h.logger.Warn(msgKeyDisabled,
		zap.String("provider", a.p.name),
		zap.String("key", a.key.St.Fp),
		zap.Int("status", a.status),
		zap.String("error_class", string(a.class)),
		zap.String("error", loggedError(a.p, a.err)))
}

func keyReenabled(l *zap.Logger, provider, fp, reason string) {
	l.Info(msgKeyReenabled, zap.String("provider", provider), zap.String("key", fp), zap.String("reason", reason))
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

// redactURLs passes every http(s) URL in s through redactedBaseURL.
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
		b.WriteString(redactedBaseURL(s[i : i+end]))
		s = s[i+end:]
	}
}
