package e2e

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"sync"
	"testing"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// netTrap returns the environment that sends a CLI's HTTP(S) requests to
// any host but loopback (NO_PROXY, cliBaseEnv) through a proxy that refuses
// them and records what was asked; the test fails if anything was. The
// CLIs' own network checks (strace: their only connect is to the proxy)
// are in the comments of their helpers; this keeps them honest in CI.
func netTrap(t *testing.T) []string {
	t.Helper()
	var mu sync.Mutex
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.Method+" "+r.Host+r.URL.Path)
		mu.Unlock()
		http.Error(w, "no network in e2e", http.StatusForbidden)
	}))
	t.Cleanup(func() {
		srv.Close()
		mu.Lock()
		defer mu.Unlock()
		if len(asked) > 0 {
			t.Errorf("the CLI asked hosts besides the proxy: %v", slices.Clone(asked))
		}
	})
	return []string{
		"HTTP_PROXY=" + srv.URL, "HTTPS_PROXY=" + srv.URL, "ALL_PROXY=" + srv.URL,
		"http_proxy=" + srv.URL, "https_proxy=" + srv.URL, "all_proxy=" + srv.URL,
	}
}

// responsesAttemptsOn lists the requests on path of the named upstreams in
// the order they started, as "<name> stream" or "<name> plain".
func responsesAttemptsOn(ups map[string]*upstream, path string) []string {
	type rec struct {
		name string
		r    sim.RequestRecord
	}
	var all []rec
	for name, u := range ups {
		for _, r := range u.Requests() {
			if r.Path == path {
				all = append(all, rec{name, r})
			}
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].r.Start.Before(all[j].r.Start) })
	out := make([]string, len(all))
	for i, a := range all {
		kind := "plain"
		if a.r.Stream {
			kind = "stream"
		}
		out[i] = a.name + " " + kind
	}
	return out
}
