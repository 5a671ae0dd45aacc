package llmhedge

import (
	"testing"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/stream"
)

// SetResponseOwnersCapacity shrinks the table of response owners created
// next (the first proxy started after it), for the end-to-end tests; the
// returned func restores the bound.
func SetResponseOwnersCapacity(n int) (restore func()) {
	old := responseOwnersCapacity
	responseOwnersCapacity = n
	return func() { responseOwnersCapacity = old }
}

// OnDiscoveryWait sets a hook called each time a request starts waiting
// for the discovery of an id another request leads; the returned func
// removes it.
func OnDiscoveryWait(f func()) (restore func()) {
	discoveryWaitHook = f
	return func() { discoveryWaitHook = nil }
}

// SetH2Ping sets how long an HTTP/2 provider connection stays quiet
// before its PING, and the least time the PING's answer is given, for the
// transports built next; the returned func restores both.
func SetH2Ping(after, timeoutMin time.Duration) (restore func()) {
	oldAfter, oldMin := h2PingAfter, h2PingTimeoutMin
	h2PingAfter, h2PingTimeoutMin = after, timeoutMin
	return func() { h2PingAfter, h2PingTimeoutMin = oldAfter, oldMin }
}

// ExceptionFrame is a Bedrock event-stream exception frame, for the
// end-to-end tests.
func ExceptionFrame(t testing.TB, kind, message string) []byte {
	return exceptionFrame(t, kind, message)
}

// SetTailWait sets how long a complete stream's body end is waited for
// after its terminal event (reuseConn), for the end-to-end tests; the
// returned func restores it.
func SetTailWait(d time.Duration) (restore func()) {
	old := tailDeadlines
	tailDeadlines = stream.NewDeadlines(d)
	return func() { tailDeadlines = old }
}

// SetRoutePick swaps the adaptive policy's pick (routePick) for the
// routing bench; the returned func restores it.
func SetRoutePick(pick func(costs, weights []float64, measured bool, u, v, x float64) (int, string)) (restore func()) {
	old := routePick
	routePick = pick
	return func() { routePick = old }
}
