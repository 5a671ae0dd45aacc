package e2e

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/llmhedge/caddy-llm-hedge/internal/engine"
	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// `api chat` (an OpenAI-compatible server: Chat Completions and the models
// list only) serves openai-go Chat clients natively, stream and not: the
// exact text, no translation header, the request on /v1/chat/completions
// with the provider's key.
func TestChatAPINative(t *testing.T) {
	vllm := newUpstream(t, sim.Config{Key: "sk-vllm"})
	p := startProxy(t, provider("chatapi-native", vllm, "api chat", "key sk-vllm"))
	c := openaiClient(p, "sk-client")
	for _, stream := range []bool{false, true} {
		var resp *http.Response
		var text, finish string
		ctx := ctxTimeout(t, 10*time.Second)
		if !stream {
			cc, err := c.Chat.Completions.New(ctx, openaiParams("llama-3"), ooption.WithResponseInto(&resp))
			if err != nil {
				t.Fatalf("non-stream: %v", err)
			}
			text, finish = cc.Choices[0].Message.Content, cc.Choices[0].FinishReason
		} else {
			s := c.Chat.Completions.NewStreaming(ctx, openaiParams("llama-3"), ooption.WithResponseInto(&resp))
			var acc openai.ChatCompletionAccumulator
			for s.Next() {
				acc.AddChunk(s.Current())
			}
			if err := s.Err(); err != nil {
				t.Fatalf("stream: %v", err)
			}
			text, finish = acc.Choices[0].Message.Content, acc.Choices[0].FinishReason
		}
		if text != wantText || finish != "stop" {
			t.Fatalf("stream=%v: %q finish %q", stream, text, finish)
		}
		if h := resp.Header.Get(engine.HeaderTranslated); h != "" {
			t.Fatalf("stream=%v: a native answer names a translation: %q", stream, h)
		}
	}
	for _, r := range vllm.Requests() {
		if r.Path != "/v1/chat/completions" || r.Authorization != "Bearer sk-vllm" || r.Status != 200 {
			t.Fatalf("the chat provider got %s %s (auth %q) status %d", r.Method, r.Path, r.Authorization, r.Status)
		}
	}
	if n := len(vllm.Requests()); n != 2 {
		t.Fatalf("the chat provider got %d requests, want 2", n)
	}
}

// GET /v1/models and /v1/models/{id} reach the `api chat` provider.
func TestChatAPIModels(t *testing.T) {
	vllm := newUpstream(t, sim.Config{Key: "sk-vllm", Model: "llama-3"})
	p := startProxy(t, provider("chatapi-models", vllm, "api chat", "key sk-vllm"))
	page, err := openaiClient(p, "sk-client").Models.List(ctxTimeout(t, 10*time.Second))
	if err != nil || len(page.Data) == 0 {
		t.Fatalf("models list: %v (%+v)", err, page)
	}
	req, _ := http.NewRequestWithContext(ctxTimeout(t, 10*time.Second), http.MethodGet, p.URL+"/v1/models/llama-3", nil)
	req.Header.Set("Authorization", "Bearer sk-client")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	var paths []string
	for _, r := range vllm.Requests() {
		if r.Method != http.MethodGet || r.Authorization != "Bearer sk-vllm" {
			t.Fatalf("the chat provider got %s %s with auth %q", r.Method, r.Path, r.Authorization)
		}
		paths = append(paths, r.Path)
	}
	if strings.Join(paths, " ") != "/v1/models /v1/models/llama-3" {
		t.Fatalf("the chat provider got %v, want the list then the model", paths)
	}
}

// A Responses request to a pool of only an `api chat` provider without
// `translate responses` gets a 404 in the Responses dialect (openai-go
// reads it, stream and not), and the provider sees nothing.
func TestChatAPIRefusesResponses(t *testing.T) {
	vllm := newUpstream(t, sim.Config{Key: "sk-vllm"})
	p := startProxy(t, provider("chatapi-noresp", vllm, "api chat", "key sk-vllm"))
	c := openaiClient(p, "sk-client")
	params := responses.ResponseNewParams{Model: "llama-3", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")}}
	_, err := c.Responses.New(ctxTimeout(t, 10*time.Second), params)
	s := c.Responses.NewStreaming(ctxTimeout(t, 10*time.Second), params)
	for s.Next() {
		t.Fatalf("stream: an event %s", s.Current().Type)
	}
	for i, err := range []error{err, s.Err()} {
		var e *openai.Error
		if !errors.As(err, &e) || e.StatusCode != http.StatusNotFound || e.Type != "invalid_request_error" || !strings.Contains(e.Message, "responses") {
			t.Fatalf("request %d: %v, want a 404 in the Responses dialect", i, err)
		}
		t.Logf("request %d: %d %s", i, e.StatusCode, e.RawJSON())
	}
	if n := len(vllm.Requests()); n != 0 {
		t.Fatalf("the chat provider got %d requests, want 0", n)
	}
}

// `forward /v1/files*` never sends files to an `api chat` provider: with
// an `api openai` provider beside it, the upload and the list go there,
// although the chat provider comes first; with the chat provider alone,
// the client gets an error and the provider sees nothing.
func TestChatAPIFilesNeverForwarded(t *testing.T) {
	vllm, oai := newUpstream(t, sim.Config{Key: "sk-vllm"}), newUpstream(t, sim.Config{Key: "sk-oai"})
	p := startProxy(t, provider("chatapi-files-vllm", vllm, "api chat", "key sk-vllm")+
		provider("chatapi-files-oai", oai, "api openai", "key sk-oai", "priority 1")+objectsForward)
	id := uploadOpenAIFile(t, p)
	c := openaiClient(p, "sk-client")
	if _, err := c.Files.Get(ctxTimeout(t, 10*time.Second), id); err != nil {
		t.Fatalf("get the uploaded file: %v", err)
	}
	if n := len(vllm.Requests()); n != 0 {
		t.Fatalf("the chat provider got %d requests, want 0", n)
	}
	var files int
	for _, r := range oai.Requests() {
		if strings.HasPrefix(r.Path, "/v1/files") {
			files++
		}
	}
	if files != 2 {
		t.Fatalf("the openai provider got %d files requests, want 2", files)
	}

	alone := newUpstream(t, sim.Config{Key: "sk-vllm"})
	p = startProxy(t, provider("chatapi-files-alone", alone, "api chat", "key sk-vllm")+objectsForward)
	_, err := openaiClient(p, "sk-client").Files.List(ctxTimeout(t, 10*time.Second), openai.FileListParams{})
	var e *openai.Error
	if !errors.As(err, &e) || e.StatusCode < 400 {
		t.Fatalf("files list with only a chat provider: %v, want an error", err)
	}
	t.Logf("files with only a chat provider: %d %s", e.StatusCode, e.RawJSON())
	if n := len(alone.Requests()); n != 0 {
		t.Fatalf("the lone chat provider got %d requests, want 0", n)
	}
}
