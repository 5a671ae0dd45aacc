package llmhedge

import (
	"net/http"
	"strconv"
	"time"
)

// A provider's rate-limit headers, read on every response of a configured
// key (keys.go keeps what they say). Anthropic sends remaining counts and
// RFC 3339 reset times; OpenAI sends remaining counts and Go-style
// durations until the reset ("6m0s", "1s", "20ms", "1m30.5s"). Malformed
// values are ignored; a reset time in the past is ignored and one further
// than rateLimitResetMax is clamped to it (clock skew, or garbage).

// rateLimits is what one response said about its key's quota. A remaining
// count of -1 was not sent (or was malformed); a zero reset was not sent.
type rateLimits struct {
	reqLeft, tokLeft   int64
	reqReset, tokReset int64 // unix nanoseconds
}

// The header names, canonical, so that a lookup is a map index.
const (
	hAnthReqLeft   = "Anthropic-Ratelimit-Requests-Remaining"
	hAnthReqReset  = "Anthropic-Ratelimit-Requests-Reset"
	hAnthTokLeft   = "Anthropic-Ratelimit-Tokens-Remaining"
	hAnthTokReset  = "Anthropic-Ratelimit-Tokens-Reset"
	hAnthInLeft    = "Anthropic-Ratelimit-Input-Tokens-Remaining"
	hAnthInReset   = "Anthropic-Ratelimit-Input-Tokens-Reset"
	hAnthOutLeft   = "Anthropic-Ratelimit-Output-Tokens-Remaining"
	hAnthOutReset  = "Anthropic-Ratelimit-Output-Tokens-Reset"
	hOAIReqLeft    = "X-Ratelimit-Remaining-Requests"
	hOAIReqReset   = "X-Ratelimit-Reset-Requests"
	hOAITokLeft    = "X-Ratelimit-Remaining-Tokens"
	hOAITokReset   = "X-Ratelimit-Reset-Tokens"
	rateLimitUnset = -1
)

// parseRateLimits reads both header families of one response. Of several
// token limits (Anthropic's total, input and output), the smallest
// remaining count speaks, with its own reset.
func parseRateLimits(h http.Header, now time.Time) (rl rateLimits, any bool) {
	rl = rateLimits{reqLeft: rateLimitUnset, tokLeft: rateLimitUnset}
	rl.reqLeft, rl.reqReset = lowerLimit(rl.reqLeft, rl.reqReset, h, hAnthReqLeft, hAnthReqReset, now, false)
	rl.reqLeft, rl.reqReset = lowerLimit(rl.reqLeft, rl.reqReset, h, hOAIReqLeft, hOAIReqReset, now, true)
	rl.tokLeft, rl.tokReset = lowerLimit(rl.tokLeft, rl.tokReset, h, hAnthTokLeft, hAnthTokReset, now, false)
	rl.tokLeft, rl.tokReset = lowerLimit(rl.tokLeft, rl.tokReset, h, hAnthInLeft, hAnthInReset, now, false)
	rl.tokLeft, rl.tokReset = lowerLimit(rl.tokLeft, rl.tokReset, h, hAnthOutLeft, hAnthOutReset, now, false)
	rl.tokLeft, rl.tokReset = lowerLimit(rl.tokLeft, rl.tokReset, h, hOAITokLeft, hOAITokReset, now, true)
	return rl, rl.reqLeft != rateLimitUnset || rl.tokLeft != rateLimitUnset
}

// lowerLimit reads one remaining/reset pair and keeps it when its count is
// lower than the one so far.
func lowerLimit(left, reset int64, h http.Header, leftName, resetName string, now time.Time, duration bool) (int64, int64) {
	v := h[leftName]
	if len(v) == 0 {
		return left, reset
	}
	n, err := strconv.ParseInt(v[0], 10, 64)
	if err != nil || n < 0 {
		return left, reset
	}
	var at int64
	if r := h[resetName]; len(r) > 0 {
		if duration {
			at = resetAfter(r[0], now)
		} else {
			at = resetAt(r[0], now)
		}
	}
	if left != rateLimitUnset && left <= n {
		return left, reset
	}
	return n, at
}

// resetAt reads an RFC 3339 reset time: zero when malformed or past, and
// at most rateLimitResetMax away.
func resetAt(v string, now time.Time) int64 {
	t, err := time.Parse(time.RFC3339, v)
	if err != nil || !t.After(now) {
		return 0
	}
	if t.Sub(now) > rateLimitResetMax {
		return now.Add(rateLimitResetMax).UnixNano()
	}
	return t.UnixNano()
}

// resetAfter reads a Go-style duration until the reset: zero when
// malformed, negative or zero, and at most rateLimitResetMax.
func resetAfter(v string, now time.Time) int64 {
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0
	}
	return now.Add(min(d, rateLimitResetMax)).UnixNano()
}

// quotaEstimate is the tokens a completion request may use, for the quota
// check: its body's bytes / 4 input tokens plus the output limit it asks
// for (max_tokens, max_output_tokens or max_completion_tokens).
func quotaEstimate(body []byte) int64 {
	n := int64(len(body) / 4)
	for _, k := range [...]string{"max_tokens", "max_completion_tokens", "max_output_tokens"} {
		if v, ok := jsonLookup(body, k); ok {
			if m, ok := jsonInt(v); ok && m > 0 {
				return n + m
			}
		}
	}
	return n
}
