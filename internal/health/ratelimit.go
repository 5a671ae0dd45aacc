package health

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
)

// A provider's rate-limit headers, read on every response of a configured
// key (keys.go keeps what they say). Anthropic sends remaining counts and
// RFC 3339 reset times; OpenAI sends remaining counts and Go-style
// durations until the reset ("6m0s", "1s", "20ms", "1m30.5s"); Azure
// OpenAI sends the remaining counts alone. Every learned count expires:
// a reset is read in any of these forms or as a bare number of seconds,
// one in the past means now, one further than healthRateLimitResetMax is
// clamped to it (clock skew, or garbage), and a count with no readable
// reset expires after rateLimitWindow. Counts saturate at
// rateLimitCountMax; negative or malformed counts are ignored.

// rateLimits is what one response said about its key's quota. A remaining
// count of -1 was not sent (or was malformed); a zero reset was not sent.
type RateLimits struct {
	ReqLeft, TokLeft   int64
	ReqReset, TokReset int64 // unix nanoseconds
}

// rateLimitWindow is how long a count without a readable reset holds:
// every family's limits are per minute (requests and tokens per minute;
// Azure's too).
const RateLimitWindow = time.Minute

// rateLimitCountMax bounds a learned count, so that its arithmetic (the
// quota reserve's percentage) cannot overflow: no provider grants more.
const rateLimitCountMax = 1 << 53

// The header names, canonical, so that a lookup is a map index.
const (
	HAnthReqLeft   = "Anthropic-Ratelimit-Requests-Remaining"
	HAnthReqReset  = "Anthropic-Ratelimit-Requests-Reset"
	HAnthTokLeft   = "Anthropic-Ratelimit-Tokens-Remaining"
	HAnthTokReset  = "Anthropic-Ratelimit-Tokens-Reset"
	hAnthInLeft    = "Anthropic-Ratelimit-Input-Tokens-Remaining"
	hAnthInReset   = "Anthropic-Ratelimit-Input-Tokens-Reset"
	hAnthOutLeft   = "Anthropic-Ratelimit-Output-Tokens-Remaining"
	hAnthOutReset  = "Anthropic-Ratelimit-Output-Tokens-Reset"
	HOAIReqLeft    = "X-Ratelimit-Remaining-Requests"
	HOAIReqReset   = "X-Ratelimit-Reset-Requests"
	HOAITokLeft    = "X-Ratelimit-Remaining-Tokens"
	HOAITokReset   = "X-Ratelimit-Reset-Tokens"
	RateLimitUnset = -1
)

// parseRateLimits reads both header families of one response. Of several
// token limits (Anthropic's total, input and output), the smallest
// remaining count speaks, with its own reset.
func ParseRateLimits(h http.Header, now time.Time) (rl RateLimits, any bool) {
	rl = RateLimits{ReqLeft: RateLimitUnset, TokLeft: RateLimitUnset}
	rl.ReqLeft, rl.ReqReset = lowerLimit(rl.ReqLeft, rl.ReqReset, h, HAnthReqLeft, HAnthReqReset, now)
	rl.ReqLeft, rl.ReqReset = lowerLimit(rl.ReqLeft, rl.ReqReset, h, HOAIReqLeft, HOAIReqReset, now)
	rl.TokLeft, rl.TokReset = lowerLimit(rl.TokLeft, rl.TokReset, h, HAnthTokLeft, HAnthTokReset, now)
	rl.TokLeft, rl.TokReset = lowerLimit(rl.TokLeft, rl.TokReset, h, hAnthInLeft, hAnthInReset, now)
	rl.TokLeft, rl.TokReset = lowerLimit(rl.TokLeft, rl.TokReset, h, hAnthOutLeft, hAnthOutReset, now)
	rl.TokLeft, rl.TokReset = lowerLimit(rl.TokLeft, rl.TokReset, h, HOAITokLeft, HOAITokReset, now)
	return rl, rl.ReqLeft != RateLimitUnset || rl.TokLeft != RateLimitUnset
}

// lowerLimit reads one remaining/reset pair and keeps it when its count is
// lower than the one so far.
func lowerLimit(left, reset int64, h http.Header, leftName, resetName string, now time.Time) (int64, int64) {
	v := h[leftName]
	if len(v) == 0 {
		return left, reset
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v[0]), 10, 64)
	if errors.Is(err, strconv.ErrRange) && n > 0 {
		err = nil // a count beyond int64 saturates like any large one
	}
	if err != nil || n < 0 {
		return left, reset
	}
	n = min(n, rateLimitCountMax)
	var r string
	if rv := h[resetName]; len(rv) > 0 {
		r = rv[0]
	}
	if left != RateLimitUnset && left <= n {
		return left, reset
	}
	return n, resetOf(r, now)
}

// resetOf reads a reset in any family's form: an RFC 3339 time, a Go-style
// duration, or a bare number of seconds. A reset in the past is now, and
// one absent or unreadable is rateLimitWindow away: a learned count never
// holds for good. It is at most healthRateLimitResetMax away.
func resetOf(v string, now time.Time) int64 {
	v = strings.TrimSpace(v)
	d := RateLimitWindow
	if secs, err := strconv.ParseFloat(v, 64); err == nil && !math.IsNaN(secs) && !math.IsInf(secs, 0) {
		d = time.Duration(min(max(secs, 0), RateLimitResetMax.Seconds()) * float64(time.Second))
	} else if dur, err := time.ParseDuration(v); err == nil {
		d = max(dur, 0)
	} else if t, err := time.Parse(time.RFC3339, v); err == nil {
		d = max(t.Sub(now), 0)
	}
	return now.Add(min(d, RateLimitResetMax)).UnixNano()
}

// afterReserve is what is left of a count n once reserve percent of it is
// kept unused (n is at most rateLimitCountMax: no overflow).
func afterReserve(n, reserve int64) int64 {
	return max(n, 0) * (100 - reserve) / 100
}

// quotaEstimate is the tokens a completion request may use, for the quota
// check: its body's bytes / 4 input tokens plus the output limit it asks
// for (max_tokens, max_output_tokens or max_completion_tokens).
func QuotaEstimate(body []byte) int64 { return QuotaEstimateIn(body, nil) }

// outputLimits are the members that bound a completion's output, in the
// order QuotaEstimate reads them.
var outputLimits = [...]string{"max_tokens", "max_completion_tokens", "max_output_tokens"}

// QuotaEstimateIn is QuotaEstimate reading the body's top-level members
// through top (the parse's index of them) in one pass: an agent's body is
// hundreds of kilobytes, and walking it once per member looked up cost more
// than the rest of the quota check.
func QuotaEstimateIn(body []byte, top *jsonscan.Top) int64 {
	n := int64(len(body) / 4)
	var found [len(outputLimits)][]byte
	err := top.Scan(body, func(key []byte, s, e int) bool {
		for i, k := range outputLimits {
			if found[i] == nil && jsonscan.KeyIs(key, k) {
				found[i] = body[s:e]
			}
		}
		return true
	})
	if err != nil {
		return n
	}
	for _, v := range found {
		if m, ok := jsonscan.Int(v); ok && m > 0 {
			return n + min(m, rateLimitCountMax)
		}
	}
	return n
}

// healthRateLimitResetMax bounds a rate-limit reset: one further away is
// clock skew or garbage, and is clamped.
const RateLimitResetMax = 24 * time.Hour
