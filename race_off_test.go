//go:build !race

package llmhedge

const raceEnabled = false
