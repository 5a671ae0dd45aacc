package fleettest

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// streamClients stream chat completions through the balancer without
// pause until stopped, and count what they saw.
type streamClients struct {
	ok, failed atomic.Int64
	mu         sync.Mutex
	served     map[string]int // complete streams per instance
	failures   []string
	changed    chan struct{} // closed and replaced on every complete stream
}

func (sc *streamClients) record(instance, failure string) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if failure != "" {
		sc.failed.Add(1)
		if len(sc.failures) < 10 {
			sc.failures = append(sc.failures, instance+": "+failure)
		}
		return
	}
	sc.ok.Add(1)
	sc.served[instance]++
	close(sc.changed)
	sc.changed = make(chan struct{})
}

// waitServed waits until instance has completed more than n streams.
func (sc *streamClients) waitServed(t *testing.T, instance string, n int) {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		sc.mu.Lock()
		got, changed := sc.served[instance], sc.changed
		sc.mu.Unlock()
		if got > n {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("%s served no stream through the balancer", instance)
		}
	}
}

func (sc *streamClients) servedBy(instance string) int {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.served[instance]
}

// stream runs one streaming completion and says what went wrong, if
// anything: an error, a truncated or duplicated text, no finish.
func stream(ctx context.Context, c openai.Client) (instance, failure string) {
	var httpResp *http.Response
	params := openai.ChatCompletionNewParams{
		Model:    "gpt-test",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
	}
	s := c.Chat.Completions.NewStreaming(ctx, params, option.WithResponseInto(&httpResp))
	defer s.Close()
	var acc openai.ChatCompletionAccumulator
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if httpResp != nil {
		instance = httpResp.Header.Get("X-Fleet-Instance")
	}
	switch {
	case s.Err() != nil:
		return instance, s.Err().Error()
	case len(acc.Choices) != 1 || acc.Choices[0].Message.Content != wantText:
		return instance, "text " + acc.Choices[0].Message.Content
	case acc.Choices[0].FinishReason != "stop":
		return instance, "no finish_reason"
	}
	return instance, ""
}

// rollingRestartUnderLoad: 20 clients stream through the balancer while
// each instance in turn is stopped (SIGTERM, `caddy stop`, SIGTERM) and
// started again, then reloaded (with net.ipv4.tcp_migrate_req on, as
// docs/fleet.md asks): no request fails, no stream is cut or doubled.
// Streams last longer than shutdown_delay, so some are still flowing when
// the server's grace period starts.
func (f *fleet) rollingRestartUnderLoad(t *testing.T) {
	for _, name := range []string{"a", "b"} {
		cfg := f.sims[name].Config()
		cfg.TokenDelay = simDuration(150)
		if err := f.sims[name].SetConfig(cfg); err != nil {
			t.Fatal(err)
		}
		defer func() {
			cfg.TokenDelay = simDuration(20)
			_ = f.sims[name].SetConfig(cfg)
		}()
	}
	sc := &streamClients{served: map[string]int{}, changed: make(chan struct{})}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	c := client(f.balancer.URL())
	for range 20 {
		wg.Go(func() {
			for ctx.Err() == nil {
				one, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				instance, failure := stream(one, c)
				cancel()
				sc.record(instance, failure)
			}
		})
	}
	defer func() { stop(); wg.Wait() }()

	for i, in := range f.instances {
		sc.waitServed(t, in.name, 0)
		flowing := f.sims["a"].Stats().InFlight + f.sims["b"].Stats().InFlight
		switch i {
		case 0:
			in.terminateDraining(t)
		case 1:
			in.stop(t)
		default:
			in.terminate(t)
		}
		in.start(t)
		sc.waitServed(t, in.name, sc.servedBy(in.name))
		t.Logf("%s restarted with %d streams in flight at the providers", in.name, flowing)
	}
	// Reloads, under the same load: no delay, old streams drain on the
	// old handler. Without tcp_migrate_req a reload can reset a
	// connection queued on the old socket, which no handler sees
	// (reuseport_test.go): where it cannot be set, the reloads show as a
	// skipped subtest.
	t.Run("Reloads", func(t *testing.T) {
		if !migrateQueuedConnections(t) {
			t.Skip("net.ipv4.tcp_migrate_req is off and this process may not set it")
		}
		for _, in := range f.instances {
			served := sc.servedBy(in.name)
			in.reload(t)
			sc.waitServed(t, in.name, served)
		}
	})
	stop()
	wg.Wait()
	if n := sc.failed.Load(); n > 0 {
		t.Fatalf("%d of %d streams failed during the rolling restart: %v", n, n+sc.ok.Load(), sc.failures)
	}
	t.Logf("rolling restart: %d streams, none failed; per instance %v", sc.ok.Load(), sc.served)
}

// deadPrimaryBound: a provider answering every request 503 is the first
// choice for claude-* on every instance. Each instance learns the outage
// alone: across the fleet the dead provider sees at most instances x
// cooldown failures attempts (no probe within the cooldown), and every
// request is answered by the next provider.
func (f *fleet) deadPrimaryBound(t *testing.T) {
	const requests, failures = 30, 2 // the fleet's `cooldown { failures 2 duration 5m }`
	dead := f.sims["dead"]
	dead.ResetStats()
	c := anthropic.NewClient(aoption.WithBaseURL(f.balancer.URL()), aoption.WithAPIKey("sk-fleet"), aoption.WithMaxRetries(0))
	for n := range requests {
		msg, err := c.Messages.New(ctxTimeout(t, 30*time.Second), anthropic.MessageNewParams{
			Model:     "claude-test",
			MaxTokens: 64,
			Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))},
		})
		if err != nil {
			t.Fatalf("request %d: %v", n+1, err)
		}
		if len(msg.Content) == 0 || msg.Content[0].Text != wantText {
			t.Fatalf("request %d: %+v", n+1, msg.Content)
		}
	}
	bound := instances * failures
	if got := dead.Stats().Requests; got > int64(bound) {
		t.Fatalf("the dead provider saw %d attempts across the fleet, bound %d", got, bound)
	} else if got != int64(bound) {
		t.Fatalf("the dead provider saw %d attempts: want %d, each instance learning alone", got, bound)
	}
}
