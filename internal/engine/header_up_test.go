package engine

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/llmhedge/caddy-llm-hedge/internal/cloud"
)

// header_up's rules act on the attempt's header alone: a rule that
// rewrites a value in place (Caddy's replace) or appends to a repeated
// header (add) leaves the client's header as it came, the next attempt's
// header is built from that, and an attempt's header is not written by
// the next attempt's rules. Natively and on a cloud (whose header keeps
// the client's User-Agent and Accept).
func TestHeaderUpOwnsTheAttemptsValues(t *testing.T) {
	n := 0
	rules := func(h http.Header, _ *http.Request) {
		n++
		if v := h["User-Agent"]; len(v) > 0 {
			v[0] = "rewritten-" + v[0]
		}
		h["Accept"] = append(h["Accept"], fmt.Sprint("added-", n))
	}
	accept := make([]string, 3, 4) // a header sent three times: room for a fourth
	copy(accept, []string{"a", "b", "c"})
	client := http.Header{"User-Agent": {"agent"}, "Accept": accept}
	r := &http.Request{Header: client}
	for _, p := range []*provider{
		{cfg: &ProviderConfig{HeaderUp: rules}, dialect: dialectGemini},
		{cfg: &ProviderConfig{HeaderUp: rules}, dialect: dialectGemini, proto: struct{ cloud.Protocol }{}},
	} {
		cloud := p.proto != nil
		first := p.upstreamHeader(r, dialectGemini, "")
		second := p.upstreamHeader(r, dialectGemini, "")
		if got := client.Get("User-Agent"); got != "agent" {
			t.Fatalf("cloud %v: the client's User-Agent became %q", cloud, got)
		}
		if first.Get("User-Agent") != "rewritten-agent" || second.Get("User-Agent") != "rewritten-agent" {
			t.Fatalf("cloud %v: User-Agent: first %q, second %q; want each rewritten once", cloud, first.Get("User-Agent"), second.Get("User-Agent"))
		}
		if f, s := first["Accept"], second["Accept"]; len(f) != 4 || len(s) != 4 || f[3] == s[3] || len(client["Accept"]) != 3 {
			t.Fatalf("cloud %v: Accept: first %q, second %q, client %q; want each attempt's own addition", cloud, f, s, client["Accept"])
		}
	}
}
