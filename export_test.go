package llmhedge

// SetResponseOwnersCapacity shrinks the table of response owners created
// next (the first proxy started after it), for the end-to-end tests; the
// returned func restores the bound.
func SetResponseOwnersCapacity(n int) (restore func()) {
	old := responseOwnersCapacity
	responseOwnersCapacity = n
	return func() { responseOwnersCapacity = old }
}
