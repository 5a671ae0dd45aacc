package e2e

import (
	"testing"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// A reload never fails a request that is in flight, whatever it is doing:
// waiting in its gate, racing a hedge, backing off for a Retry-After, or
// being continued on another provider after a cut. Each finishes with the
// full answer, is logged once and counted once, and no upstream request
// is repeated for the new config.
func TestReloadKeepsEveryRequestInFlight(t *testing.T) {
	cases := []struct {
		name string
		// setup returns the providers block, the upstreams and when the
		// request has reached the point the reload must hit.
		setup func(t *testing.T) (block string, ups []*upstream, reached func() bool)
		// upstream requests the whole request makes
		want int
	}{
		{"in its gate", func(t *testing.T) (string, []*upstream, func() bool) {
			a := newUpstream(t, sim.Config{FirstToken: caddyDur(time.Second)})
			return provider("a", a) + "hedge off\n", []*upstream{a}, func() bool { return len(a.Requests()) == 1 }
		}, 1},
		{"racing a hedge", func(t *testing.T) (string, []*upstream, func() bool) {
			a := newUpstream(t, sim.Config{FirstToken: caddyDur(1500 * time.Millisecond)})
			b := newUpstream(t, sim.Config{FirstToken: caddyDur(time.Second)})
			return provider("a", a, "priority 0") + provider("b", b, "priority 1") + "hedge {\n after 200ms\n }\n",
				[]*upstream{a, b}, func() bool { return len(b.Requests()) == 1 }
		}, 2},
		{"backing off for a Retry-After", func(t *testing.T) (string, []*upstream, func() bool) {
			a := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 503, RetryAfter: "1", Count: 1}}})
			return provider("a", a) + "hedge off\n retry {\n same_provider 1\n }\n", []*upstream{a}, func() bool {
				rs := a.Requests()
				return len(rs) == 1 && !rs[0].End.IsZero()
			}
		}, 2},
		{"being continued", func(t *testing.T) (string, []*upstream, func() bool) {
			cut := newUpstream(t, sim.Config{Tokens: 60, Text: longText, Faults: []sim.Fault{{Kind: sim.FaultCut, After: 40, Count: 1}}})
			other := newUpstream(t, sim.Config{Tokens: 60, Text: longText, FirstToken: caddyDur(time.Second)})
			return provider("cut", cut, "priority 1", "api anthropic") + provider("other", other, "priority 2", "api anthropic") + "hedge off\n",
				[]*upstream{cut, other}, func() bool { return len(other.Requests()) == 1 }
		}, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			faultNoLeaks(t)
			block, ups, reached := tc.setup(t)
			p := startProxy(t, block)
			before := metricValue(t, p, `caddy_llm_hedge_requests_total{outcome="success"}`)
			wait := streamInBackground(t, p)
			observeEventually(t, reached, func() string { return "the request never reached its point" })
			p.reload(t, block+" timeouts {\n idle 91s\n }\n")
			text, err := wait()
			if err != nil {
				t.Fatalf("across the reload: %v", err)
			}
			if text == "" {
				t.Fatal("no text")
			}
			lines := logLines(t, p, "llm request", 1)
			if len(lines) != 1 || lines[0]["outcome"] != "success" {
				t.Fatalf("log lines: %v", lines)
			}
			if got := metricValue(t, p, `caddy_llm_hedge_requests_total{outcome="success"}`); got != before+1 {
				t.Fatalf("success counted %v times", got-before)
			}
			n := 0
			for _, u := range ups {
				n += len(u.Requests())
			}
			if n != tc.want {
				t.Fatalf("%d upstream requests, want %d", n, tc.want)
			}
		})
	}
}

// streamInBackground streams an Anthropic answer from p while the test goes
// on; wait returns its text and error once it ended.
func streamInBackground(t *testing.T, p *proxy) (wait func() (string, error)) {
	done := make(chan error, 1)
	var text string
	go func() {
		msg, err := streamAnthropic(ctxTimeout(t, 20*time.Second), anthropicClient(p, "k"), anthropicParams("claude-test"))
		text = messageText(msg)
		done <- err
	}()
	return func() (string, error) {
		err := <-done
		return text, err
	}
}
