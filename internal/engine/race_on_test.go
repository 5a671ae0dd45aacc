//go:build race

package engine

// raceEnabled: the race detector makes sync.Pool drop a share of what is
// put back, so allocation counts are not those of a normal build.
const raceEnabled = true
