package engine

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"regexp"
	"testing"

	"github.com/llmhedge/caddy-llm-hedge/internal/dialect/responses"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/stream"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// Zero allocations per event on every dialect's relay path (issue 24): a
// committed stream of 400 output tokens costs the allocations of one of
// 20, but for the continuation transcript's doublings (it keeps the text
// delivered: a handful in all, none per event).
func TestRelayAllocsPerEvent(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops buffers at random: allocations are counted without it")
	}
	few, many := relayCases(t, 20), relayCases(t, 400)
	for i := range few {
		allocs := func(c relayCase) float64 {
			run := newRelayRun(c)
			return testing.AllocsPerRun(20, func() {
				var u wire.Usage
				if res, _ := run.run(t, &u); !res.Complete {
					t.Fatalf("%s: %+v", c.name, res)
				}
			})
		}
		a, b := allocs(few[i]), allocs(many[i])
		t.Logf("%s: %v allocations per stream of 20 tokens, %v of 400", few[i].name, a, b)
		if b > a+6 {
			t.Errorf("%s: %v allocations for 20 tokens, %v for 400: the relay allocates per event", few[i].name, a, b)
		}
	}
}

// The resumers' fast paths (inspect's Plain and Seq) leave a resumer as
// its own walk of every event does.
func TestResumerFastPathsMatch(t *testing.T) {
	reqs := map[wire.Dialect]*wire.Request{}
	for _, c := range relayCases(t, 3) {
		if !c.bedrock {
			reqs[c.d] = c.req
		}
	}
	rng := rand.New(rand.NewPCG(24, 3))
	for name, stream := range equivStreams(t) {
		for round := range 20 {
			// Round 0 is the stream as recorded; the others mutate some events.
			checkResumerFastPaths(t, fmt.Sprintf("%s round %d", name, round), dialectOfStream(name), reqs, parseEvents(t, string(stream)), rng, round > 0)
		}
	}
}

func checkResumerFastPaths(t *testing.T, name string, d wire.Dialect, reqs map[wire.Dialect]*wire.Request, evs []sse.Event, rng *rand.Rand, mutate bool) {
	t.Helper()
	{
		fast, slow := wire.NewResumer(d, reqs[d]), wire.NewResumer(d, reqs[d])
		if fast == nil {
			t.Fatalf("%s: no resumer", name)
		}
		var cs wire.ChoiceSet
		plain := 0
		for _, ev := range evs {
			if mutate && rng.IntN(8) == 0 {
				ev = mutateEvent(rng, ev)
			}
			info := d.Inspect(ev, true, &cs)
			if info.Plain {
				plain++
			}
			fast.Track(ev, info)
			info.Plain, info.Seq, info.UsageRead, info.Usage = false, nil, false, nil
			slow.Track(ev, info)
			if fast.Text() != slow.Text() || fast.Finished() != slow.Finished() || fast.Ineligible() != slow.Ineligible() {
				t.Fatalf("%s: after %q: fast %q %v %q, slow %q %v %q", name, ev.Raw, fast.Text(), fast.Finished(), fast.Ineligible(),
					slow.Text(), slow.Finished(), slow.Ineligible())
			}
			if f, ok := fast.(wire.TokenCounter); ok && f.Tokens() != slow.(wire.TokenCounter).Tokens() {
				t.Fatalf("%s: after %q: %d tokens, walking counts %d", name, ev.Raw, f.Tokens(), slow.(wire.TokenCounter).Tokens())
			}
			if f, ok := fast.(*responses.Resumer); ok && f.Seq != slow.(*responses.Resumer).Seq {
				t.Fatalf("%s: after %q: sequence %d, walking finds %d", name, ev.Raw, f.Seq, slow.(*responses.Resumer).Seq)
			}
		}
		// The end a continuation writes holds what the resumer kept of the
		// stream (Responses: the response.created object).
		// Responses stamps completed_at with the second it writes the end:
		// the two ends may be written either side of a second's turn.
		var fe, se bytes.Buffer
		ferr, serr := fast.WriteEnd(&fe, wire.ContEnd{Finish: "stop"}), slow.WriteEnd(&se, wire.ContEnd{Finish: "stop"})
		if (ferr == nil) != (serr == nil) || unstamped(fe.String()) != unstamped(se.String()) {
			t.Fatalf("%s: the end written: fast %q %v, slow %q %v", name, fe.String(), ferr, se.String(), serr)
		}
		if !mutate && (d == dialectGemini || d == dialectOpenAI) && plain == 0 {
			t.Errorf("%s: no chunk took the fast path", name)
		}
	}
}

// A resumer told the events as the gate reads them ends as one set up
// from the gate's buffer after the commit (trackCommitted).
func TestGateTrackMatchesReplay(t *testing.T) {
	reqs := map[wire.Dialect]*wire.Request{}
	for _, c := range relayCases(t, 3) {
		if !c.bedrock {
			reqs[c.d] = c.req
		}
	}
	for name, s := range equivStreams(t) {
		d := dialectOfStream(name)
		g := stream.NewGate(d, nil, 0, 0)
		g.Track = wire.NewResumer(d, reqs[d])
		for _, ev := range parseEvents(t, string(s)) {
			if g.Feed(ev) != stream.GateHold {
				break
			}
		}
		live, replay := g.Track, trackCommitted(d, reqs[d], g)
		if live.Text() != replay.Text() || live.Finished() != replay.Finished() || live.Ineligible() != replay.Ineligible() {
			t.Errorf("%s: told %q %v %q, replayed %q %v %q", name, live.Text(), live.Finished(), live.Ineligible(),
				replay.Text(), replay.Finished(), replay.Ineligible())
		}
		if l, ok := live.(*responses.Resumer); ok && l.Seq != replay.(*responses.Resumer).Seq {
			t.Errorf("%s: sequence %d, replayed %d", name, l.Seq, replay.(*responses.Resumer).Seq)
		}
	}
}

// completedAt is the time a continuation's Responses end is stamped with.
var completedAt = regexp.MustCompile(`"completed_at":[0-9]+`)

// unstamped is an end written by a resumer without its completed_at time.
func unstamped(end string) string { return completedAt.ReplaceAllString(end, `"completed_at":0`) }
