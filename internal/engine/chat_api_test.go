package engine

import (
	"net/http"
	"strings"
	"testing"

	"github.com/llmhedge/caddy-llm-hedge/internal/health"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// newTestEngine builds an Engine of cfg and providers as New does, with
// health entries of its own (no shared pool).
func newTestEngine(t testing.TB, cfg Config, providers ...ProviderConfig) (*Engine, error) {
	t.Helper()
	e, err := New(cfg, providers, Env{Health: func(name, baseURL, vendor string) (*health.Provider, error) {
		return &health.Provider{Name: name, BaseURL: baseURL, Latency: health.NewLatencyTracker()}, nil
	}})
	t.Cleanup(e.Close)
	return e, err
}

// api chat is an OpenAI-compatible server: Chat Completions natively, the
// models list, and what it translates; never the Responses API, files or
// other OpenAI paths.
func TestChatOnlyProvider(t *testing.T) {
	if err := CheckAPI("chat"); err != nil {
		t.Fatalf("CheckAPI(chat): %v", err)
	}
	if !strings.Contains(APINames(), "chat") {
		t.Fatalf("APINames() = %q, want chat listed", APINames())
	}
	e, err := newTestEngine(t, testConfig(),
		ProviderConfig{Name: "vllm", BaseURL: "http://127.0.0.1:9/v1x", API: "chat", Keys: []string{"k"}, Translate: []string{"anthropic"}},
		ProviderConfig{Name: "oai", BaseURL: "http://127.0.0.1:9/oai", API: "openai"})
	if err != nil {
		t.Fatal(err)
	}
	chat, oai := e.providers[0], e.providers[1]
	if !chat.serves(dialectOpenAI, "m") || chat.translation(dialectOpenAI) != nil {
		t.Error("api chat does not serve Chat clients natively")
	}
	if chat.serves(dialectResponses, "m") {
		t.Error("api chat serves Responses clients without translate responses")
	}
	if !chat.serves(dialectAnthropic, "m") || chat.translation(dialectAnthropic) == nil {
		t.Error("api chat with translate anthropic does not serve Anthropic clients by translation")
	}
	if !oai.serves(dialectResponses, "m") {
		t.Error("api openai stopped serving Responses clients")
	}
	for _, d := range dialects {
		for _, p := range e.auxCandidates(d) {
			if p == chat {
				t.Errorf("api chat is a candidate for %s's other paths", d)
			}
		}
	}
	for _, tc := range []struct {
		method, path string
		want         bool
	}{
		{http.MethodGet, "/v1/models", true},
		{http.MethodGet, "/v1/models/", true},
		{http.MethodGet, "/v1/models/llama-3", true},
		{http.MethodGet, "/v1/models/a/b", false},
		{http.MethodPost, "/v1/models", false},
		{http.MethodGet, "/v1/files", false},
		{http.MethodGet, "/v1/modelsx", false},
	} {
		if got := chatModelsPath(tc.method, tc.path); got != tc.want {
			t.Errorf("chatModelsPath(%s %s) = %v, want %v", tc.method, tc.path, got, tc.want)
		}
	}
	if got := withChatOnly(e.providers, []*provider{oai}); len(got) != 2 || got[0] != oai && got[1] != oai {
		t.Errorf("withChatOnly = %v", got)
	}
	// Translating the format it speaks is refused, as for any provider.
	if _, err := newTestEngine(t, testConfig(),
		ProviderConfig{Name: "x", BaseURL: "http://127.0.0.1:9", API: "chat", Keys: []string{"k"}, Translate: []string{"openai"}}); err == nil ||
		!strings.Contains(err.Error(), "natively") {
		t.Errorf("translate openai on api chat: %v", err)
	}
}

// A streamed Gemini client names its stream mode in the path: the body a
// translation reads says it, else the target is asked for one whole
// answer while the client waits for a stream.
func TestClientBodyGeminiStream(t *testing.T) {
	body := []byte(`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`)
	if got := clientBody(&wire.Request{Dialect: dialectGemini, Stream: true, Body: body}); !strings.Contains(string(got), `"stream":true`) {
		t.Fatalf("streamed Gemini body %s, want the stream marked", got)
	}
	for _, req := range []*wire.Request{{Dialect: dialectGemini, Body: body}, {Dialect: dialectAnthropic, Stream: true, Body: body}} {
		if got := clientBody(req); string(got) != string(body) {
			t.Fatalf("%s stream=%v: body %s changed", req.Dialect, req.Stream, got)
		}
	}
}
