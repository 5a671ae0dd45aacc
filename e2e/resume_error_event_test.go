package e2e

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"google.golang.org/genai"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// erroringProvider relays a simulator's stream up to the event that
// carries "quick" (the second word: the stream has committed), then sends
// errEvent, the provider's own mid-stream error, and ends the response as
// a provider does after it.
func erroringProvider(t *testing.T, errEvent string) string {
	s := newUpstream(t, sim.Config{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, s.URL+r.URL.RequestURI(), bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		br := bufio.NewReader(resp.Body)
		var event bytes.Buffer
		for {
			line, err := br.ReadBytes('\n')
			event.Write(line)
			if len(bytes.TrimSpace(line)) == 0 && len(line) > 0 {
				w.Write(event.Bytes())
				if bytes.Contains(event.Bytes(), []byte("quick")) {
					w.Write([]byte(errEvent))
					return
				}
				event.Reset()
			}
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// A committed stream that the provider ends with its own error event
// (Anthropic's overloaded_error, a Chat error chunk, a Responses error or
// response.failed, a Gemini error chunk) is continued on the next
// provider (SPEC 12): each SDK reads the whole answer, ended by its
// terminal event, with no error.
func TestResumeAfterUpstreamErrorEvent(t *testing.T) {
	for _, tc := range []struct{ name, errEvent string }{
		{"anthropic", "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"},
		{"openai", "data: {\"error\":{\"message\":\"The server had an error\",\"type\":\"server_error\",\"code\":null}}\n\n"},
		{"responses", "event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"boom\",\"param\":null,\"sequence_number\":6}\n\n"},
		{"responses failed", "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"id\":\"resp_x\",\"object\":\"response\",\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"boom\"},\"output\":[]},\"sequence_number\":6}\n\n"},
		{"gemini", "data: {\"error\":{\"code\":503,\"message\":\"The model is overloaded.\",\"status\":\"UNAVAILABLE\"}}\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			other := newUpstream(t, sim.Config{})
			p := startProxy(t, "\t\tprovider erroring "+erroringProvider(t, tc.errEvent)+" {\n\t\t\tpriority 1\n\t\t}\n"+
				provider("other", other, "priority 2", "prefill off")+"\t\thedge off\n")
			ctx := ctxTimeout(t, 10*time.Second)
			var text string
			var terminal bool
			var err error
			switch dialect, _, _ := strings.Cut(tc.name, " "); dialect {
			case "anthropic":
				m, e := streamAnthropic(ctx, anthropicClient(p, "k"), anthropicParams("claude-test"))
				text, terminal, err = messageText(m), m.StopReason != "", e
			case "openai":
				acc, e := streamOpenAI(ctx, openaiClient(p, "k"), openaiParams("gpt-test"))
				if len(acc.Choices) == 1 {
					text, terminal = acc.Choices[0].Message.Content, acc.Choices[0].FinishReason != ""
				}
				err = e
			case "responses":
				params := responsesParams("gpt-test")
				params.Store = openai.Bool(false) // a stored response is not continued
				got := streamResponses(ctx, openaiClient(p, "k"), params)
				text, terminal, err = got.text, got.completed != nil, got.err
			case "gemini":
				for resp, e := range geminiClient(t, p, "k").Models.GenerateContentStream(ctx, "gemini-test", genai.Text("hello"), nil) {
					if err = e; e != nil {
						break
					}
					text += resp.Text()
					terminal = terminal || len(resp.Candidates) > 0 && resp.Candidates[0].FinishReason != ""
				}
			}
			if err != nil || !terminal || text != sim.DefaultText {
				t.Fatalf("err %v, terminal %v, text %q; want the whole answer %q", err, terminal, text, sim.DefaultText)
			}
			if _, resumes := resumeLine(t, p); len(resumes) != 1 || resumes[0]["outcome"] != "completed" {
				t.Errorf("resume entries %v, want one completed", resumes)
			}
		})
	}
}
