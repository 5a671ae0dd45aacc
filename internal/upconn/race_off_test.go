//go:build !race

package upconn

const raceEnabled = false
