// Command demo sends the demo's load (package bench/demo) to an llm_hedge
// proxy on loopback until Ctrl-C: `make -f xcaddy.mk demo` starts it
// beside ./caddy serving Caddyfile.demo.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/bench/demo"
)

func main() {
	proxy := flag.String("url", "http://127.0.0.1:8080", "the llm_hedge proxy (loopback only)")
	board := flag.String("dashboard", "http://127.0.0.1:2020/llm_hedge/ui/", "the dashboard's address, printed for you to open")
	workers := flag.Int("workers", 4, "clients sending one request after another")
	wait := flag.Duration("wait", time.Minute, "how long to wait for the proxy to listen")
	flag.Parse()
	u, err := url.Parse(*proxy)
	if err != nil || u.Hostname() != "127.0.0.1" && u.Hostname() != "localhost" && u.Hostname() != "::1" {
		fmt.Fprintf(os.Stderr, "demo: -url %q: the demo talks to a proxy on loopback only\n", *proxy)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := waitListening(ctx, u.Host, *wait); err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("demo: sending requests to %s; open %s (Ctrl-C stops)\n", *proxy, *board)
	s := demo.Run(ctx, demo.Options{URL: *proxy, Workers: *workers, Progress: func(s demo.Stats) { fmt.Println("demo:", s) }})
	fmt.Println("demo: stopped after", s)
}

// waitListening waits until addr accepts a connection.
func waitListening(ctx context.Context, addr string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s does not listen after %v: %v", addr, d, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
