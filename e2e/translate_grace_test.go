package e2e

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// An Anthropic client (anthropic-sdk-go) streaming through a Chat provider
// whose server sends the finish_reason and then neither the usage chunk,
// [DONE] nor its end: the answer is complete after the finish grace, as a
// native Chat stream is, not at the idle timeout (an hour here, so only
// that ends it: before, the client waited the whole of it). The server is
// still holding when the client has the whole message: its request ends
// only because the proxy gives it up.
func TestTranslatedChatFinishThenHold(t *testing.T) {
	released := make(chan struct{}) // the proxy gave the held request up
	chat := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, c := range []string{
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-5","choices":[{"index":0,"delta":{"role":"assistant","content":"hello "},"finish_reason":null}]}`,
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-5","choices":[{"index":0,"delta":{"content":"from chat"},"finish_reason":"stop"}]}`,
		} {
			_, _ = io.WriteString(w, "data: "+c+"\n\n")
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(released)
	}))
	t.Cleanup(chat.Close)
	claude := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 503}}})
	p := startProxy(t, provider("claude", claude, "api anthropic")+
		"\t\tprovider gpt "+chat.URL+" {\n\t\t\tapi openai\n\t\t\tkey sk-openai-own\n\t\t\ttranslate anthropic\n\t\t\tpriority 1\n\t\t\tmodel * gpt-5\n\t\t}\n"+
		"hedge off\n retry {\n same_provider 0\n }\n timeouts {\n idle 1h\n }\n")

	s := anthropicClient(p, "sk-client").Messages.NewStreaming(t.Context(), anthropicParams("claude-sonnet-4-5"))
	var msg anthropic.Message
	for s.Next() {
		if err := msg.Accumulate(s.Current()); err != nil {
			t.Fatalf("accumulate: %v", err)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream: %v\n%s", err, p.logs(t))
	}
	if msg.StopReason != anthropic.StopReasonEndTurn || len(msg.Content) != 1 || msg.Content[0].Text != "hello from chat" {
		t.Fatalf("message %s, want end_turn with the text", msg.RawJSON())
	}
	<-released // and the held connection is not left open
}
