package main

import "testing"

// A port is handed out once per run: a Caddy's site and admin endpoint, or
// two Caddys of one run, never share one under SO_REUSEPORT.
func TestFreePortNeverRepeats(t *testing.T) {
	seen := map[int]bool{}
	for range 300 {
		p := freePort()
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
}
