package e2e

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// azurePromptFiltered is Azure OpenAI's answer to a prompt its content
// filter blocks, as the service sends it.
const azurePromptFiltered = `{"error":{"code":"content_filter","message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy. ` +
	`Please modify your prompt and retry. To learn more about our content filtering policies please read our documentation: https://go.microsoft.com/fwlink/?linkid=2198766",` +
	`"param":"prompt","status":400,"innererror":{"code":"ResponsibleAIPolicyViolation","content_filter_result":{` +
	`"hate":{"filtered":false,"severity":"safe"},"jailbreak":{"filtered":false,"detected":false},"self_harm":{"filtered":false,"severity":"safe"},` +
	`"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":true,"severity":"high"}}}}}`

// A prompt Azure's content filter blocks is the client's answer: a 400 in
// the client's dialect, never failed over (another provider would refuse
// it again, or answer it against the operator's policy) and never cooling
// the provider down, however often it comes. An OpenAI client gets
// Azure's body as it is; an Anthropic client served by translation gets
// an Anthropic invalid_request_error with Azure's words.
func TestAzureContentFilterIsTheClients(t *testing.T) {
	for _, client := range []string{"openai", "anthropic"} {
		t.Run(client, func(t *testing.T) {
			url, hits := newCloudFake(t, cloudAnswer{status: 400, body: azurePromptFiltered})
			native := newUpstream(t, sim.Config{})
			block := provider("azure", &upstream{URL: url}, "api azure", "key az-key", "priority 0") +
				provider("native", native, "api openai", "key sk-op", "priority 1")
			if client == "anthropic" {
				block = provider("azure", &upstream{URL: url}, "api azure", "key az-key", "translate anthropic", "priority 0") +
					provider("native", native, "api anthropic", "key sk-op", "priority 1")
			}
			p := startProxy(t, block+"hedge off\nretry {\n same_provider 0\n }\ncooldown {\n failures 1\n }")
			const asks = 3
			for i := range asks {
				ctx := ctxTimeout(t, 10*time.Second)
				var status int
				var raw string
				if client == "openai" {
					_, err := openaiClient(p, "sk-client").Chat.Completions.New(ctx, openaiParams("gpt-test"))
					var e *openai.Error
					if !errors.As(err, &e) {
						t.Fatalf("ask %d: %v, want Azure's 400", i, err)
					}
					status, raw = e.StatusCode, e.RawJSON()
					if e.Code != "content_filter" || !strings.Contains(raw, `"ResponsibleAIPolicyViolation"`) {
						t.Errorf("ask %d: error %s, want Azure's body as it is", i, raw)
					}
				} else {
					_, err := anthropicClient(p, "sk-client").Messages.New(ctx, anthropicParams("claude-test"))
					var e *anthropic.Error
					if !errors.As(err, &e) {
						t.Fatalf("ask %d: %v, want a 400 in Anthropic's shape", i, err)
					}
					status, raw = e.StatusCode, e.RawJSON()
					if !strings.Contains(raw, `"type":"invalid_request_error"`) || !strings.Contains(raw, "content management policy") {
						t.Errorf("ask %d: error %s, want an Anthropic invalid_request_error with Azure's words", i, raw)
					}
				}
				if status != 400 {
					t.Errorf("ask %d: status %d, want 400", i, status)
				}
			}
			if n := len(native.Requests()); n != 0 {
				t.Errorf("the filtered prompt failed over: the other provider was asked %d times", n)
			}
			if n := hits.Load(); n != asks {
				t.Errorf("azure was asked %d times, want %d: a client's prompt cooled it down", n, asks)
			}
			if v := healthMustProvider(t, p, "azure", &upstream{URL: url}); v.State != "closed" || v.ConsecutiveFailures != 0 || v.Failures != 0 {
				t.Errorf("azure after the filtered prompts: state %s, consecutive failures %d, failures %d; want closed, 0, 0",
					v.State, v.ConsecutiveFailures, v.Failures)
			}
			chain := observeChain(t, observeRequestLines(t, p.LogFile, asks)[0])
			if len(chain) != 1 || chain[0]["error_class"] != "request_error" || chain[0]["outcome"] != "request_error" {
				t.Errorf("chain %v: want one attempt, a request_error", chain)
			}
		})
	}
}
