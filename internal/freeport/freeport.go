// Package freeport hands out loopback ports for the tests and the bench.
package freeport

import (
	"errors"
	"net"
	"sync"
)

var (
	mu    sync.Mutex
	given = map[int]bool{}
)

// Port returns a loopback port nothing listens on now, never one it
// returned before in this process: Caddy binds with SO_REUSEPORT, so a
// proxy given one port for its site and its admin endpoint (two calls the
// kernel may answer alike), or a port a Caddy that is stopping still
// holds, would share it, and the admin endpoint answers "404 page not
// found".
func Port() (int, error) {
	mu.Lock()
	defer mu.Unlock()
	// A port handed out before stays bound until the search ends: the
	// kernel, asked again, often answers with the port just closed.
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for range 1000 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		if !given[port] {
			l.Close()
			given[port] = true
			return port, nil
		}
		held = append(held, l)
	}
	return 0, errors.New("no loopback port not handed out before")
}
