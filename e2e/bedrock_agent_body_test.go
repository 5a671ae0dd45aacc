package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"testing"

	"github.com/llmhedge/caddy-llm-hedge/internal/cloud"
	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// Agent-sized turns through Bedrock, several at once: each body is
// rewritten for Bedrock as pieces of its request's pooled body and the new
// bytes (cloud.Bodies), signed and sent; the simulator verifies every
// signature against the bytes it read, and each body it read is the
// client's, rewritten, byte for byte (no request read another's buffer).
func TestBedrockAgentBodies(t *testing.T) {
	awsTestEnv(t)
	agent, err := os.ReadFile("../bench/agentbody/testdata/anthropic.json")
	if err != nil {
		t.Fatal(err)
	}
	br := newBedrock(t)
	p := startProxy(t, bedrockProvider("bedrock", br)+"hedge off")
	const n = 6
	want := make(map[string]bool, n)
	bodies := make([][]byte, n)
	for i := range bodies {
		b := bytes.Replace(agent, []byte(`"model":"agent-bench","max_tokens":32000`), fmt.Appendf(nil, `"model":"claude-test","max_tokens":%d`, 32000+i), 1)
		if bytes.Equal(b, agent) {
			t.Fatal("the agent body's head changed: update the test")
		}
		cb, err := cloud.CloudBody(b, []string{"model", "stream"}, map[string]json.RawMessage{"anthropic_version": json.RawMessage(cloud.BedrockAnthropicVersion)})
		if err != nil {
			t.Fatal(err)
		}
		want[string(cb)], bodies[i] = true, b
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for _, b := range bodies {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, p.URL+"/v1/messages", bytes.NewReader(b))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Anthropic-Version", "2023-06-01")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			out, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != 200 || !bytes.Contains(out, []byte("event: message_stop")) {
				errs <- fmt.Errorf("status %d, %v, answer %.200q", resp.StatusCode, err, out)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	recs := br.Requests()
	if len(recs) != n {
		t.Fatalf("bedrock saw %d requests, want %d", len(recs), n)
	}
	for i, rec := range recs {
		if rec.Status != 200 || !want[string(rec.CloudBody)] {
			t.Errorf("request %d: status %d, body of %d bytes one of the clients' rewritten: %v", i, rec.Status, len(rec.CloudBody), want[string(rec.CloudBody)])
		}
		delete(want, string(rec.CloudBody))
	}
}

// An agent's turn on a Bedrock account that answers 503
// (ServiceUnavailableException): the retry on it and the failover to
// another account sign the hash the request made at its first attempt
// (cloud.PayloadSums), and every signature verifies against the bytes the
// cloud read (an attempt answered 503 passed authentication first: the
// simulator checks the signature before its faults).
func TestBedrockAgentBodyAttemptsSignOneHash(t *testing.T) {
	awsTestEnv(t)
	agent, err := os.ReadFile("../bench/agentbody/testdata/anthropic.json")
	if err != nil {
		t.Fatal(err)
	}
	agent = bytes.Replace(agent, []byte(`"model":"agent-bench"`), []byte(`"model":"claude-test"`), 1)
	want, err := cloud.CloudBody(agent, []string{"model", "stream"}, map[string]json.RawMessage{"anthropic_version": json.RawMessage(cloud.BedrockAnthropicVersion)})
	if err != nil {
		t.Fatal(err)
	}
	unavailable := newBedrock(t, sim.Fault{Kind: sim.FaultStatus, Status: 503})
	other := newBedrock(t)
	p := startProxy(t, bedrockProvider("east", unavailable, "priority 0")+bedrockProvider("west", other, "priority 1")+
		"hedge off\nretry {\n same_provider 1\n }\ncooldown {\n failures 100\n }")
	req, _ := http.NewRequest(http.MethodPost, p.URL+"/v1/messages", bytes.NewReader(agent))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || !bytes.Contains(out, []byte("event: message_stop")) {
		t.Fatalf("status %d, %v, answer %.200q", resp.StatusCode, err, out)
	}
	recs := append(unavailable.Requests(), other.Requests()...)
	if len(recs) != 3 {
		t.Fatalf("the clouds saw %d requests, want 2 on the unavailable account and 1 on the other", len(recs))
	}
	for i, rec := range recs {
		if wantStatus := []int{503, 503, 200}[i]; rec.Status != wantStatus || !bytes.Equal(rec.CloudBody, want) {
			t.Errorf("attempt %d: status %d (want %d), its body the client's rewritten: %v", i, rec.Status, wantStatus, bytes.Equal(rec.CloudBody, want))
		}
	}
}
