package llmhedge

import "time"

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

// SetH2PingAfter sets how long an HTTP/2 provider connection stays quiet
// before its PING, for the transports built next; the returned func
// restores it.
func SetH2PingAfter(d time.Duration) (restore func()) {
	old := h2PingAfter
	h2PingAfter = d
	return func() { h2PingAfter = old }
}
