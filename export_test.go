package llmhedge

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
