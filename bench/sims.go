package main

// The simulated providers of a run and the proxies' site blocks over them.

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// simServer is a simulated provider on a loopback port of this process.
type simServer struct {
	*sim.Simulator
	srv *http.Server
	URL string
	// requests and h2 count what the proxies sent, and over which protocol.
	requests, h2 atomic.Int64
}

func startSim(cfg sim.Config) (*simServer, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ss := &simServer{Simulator: sim.New(cfg), URL: "http://" + l.Addr().String()}
	ss.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ss.requests.Add(1)
		if r.ProtoMajor == 2 {
			ss.h2.Add(1)
		}
		ss.Simulator.ServeHTTP(w, r)
	})}
	if upstream.server != nil {
		ss.srv.TLSConfig = upstream.server.Clone()
		ss.URL = "https://" + l.Addr().String()
		go ss.srv.ServeTLS(l, "", "") // HTTP/2 by ALPN, as net/http sets it up
		return ss, nil
	}
	go ss.srv.Serve(l)
	return ss, nil
}

// closeIdle drops the idle keep-alive connections into the simulator, so
// the proxy's pooled upstream connections (and their goroutines) go away.
func (s *simServer) closeIdle() {
	s.srv.SetKeepAlivesEnabled(false)
	s.srv.SetKeepAlivesEnabled(true)
}

func startSims(n int, cfg sim.Config) ([]*simServer, error) {
	var out []*simServer
	for i := range n {
		c := cfg
		c.Seed = int64(i + 1)
		s, err := startSim(c)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func stopSims(sims []*simServer) {
	for _, s := range sims {
		_ = s.srv.Close()
	}
}

// site is the Caddyfile site body of a proxied configuration.
func site(config string, sims []*simServer, extra string) string {
	host := func(i int) string { return strings.TrimPrefix(sims[i].URL, "http://") }
	provider := func(name string, i int, more string) string {
		if trust := hedgeUpstreamTLS(); trust != "" || more != "" {
			return fmt.Sprintf("\t\tprovider %s %s {\n%s%s\t\t}\n", name, sims[i].URL, more, trust)
		}
		return fmt.Sprintf("\t\tprovider %s %s\n", name, sims[i].URL)
	}
	switch config {
	case "reverse_proxy", controlConfig:
		tr := rpUpstreamTLS()
		if *rpIdle > 0 {
			tr += fmt.Sprintf("\t\t\tkeepalive_idle_conns_per_host %d\n", *rpIdle)
		}
		if tr == "" {
			return "\treverse_proxy " + host(0)
		}
		return fmt.Sprintf("\treverse_proxy %s {\n\t\ttransport http {\n%s\t\t}\n\t}", host(0), tr)
	case "llm_hedge":
		return "\tllm_hedge {\n" + provider("sim-a", 0, "") + extra + "\t}"
	case "llm_hedge_3":
		return "\tllm_hedge {\n" + provider("sim-a", 0, "\t\t\tvendor a\n") + provider("sim-b", 1, "\t\t\tvendor b\n") +
			provider("sim-c", 2, "\t\t\tvendor c\n") + "\t\thedge {\n\t\t\tafter 10s\n\t\t}\n" + extra + "\t}"
	}
	panic("unknown configuration " + config)
}
