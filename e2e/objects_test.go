package e2e

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/responses"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

const objectsForward = "forward /v1/files /v1/files/*"

// uploadOpenAIFile uploads a file through the openai-go client of p.
func uploadOpenAIFile(t *testing.T, p *proxy) string {
	t.Helper()
	f, err := openaiClient(p, "sk-client").Files.New(ctxTimeout(t, 10*time.Second), openai.FileNewParams{
		File:    openai.File(strings.NewReader("a document"), "notes.txt", "text/plain"),
		Purpose: openai.FilePurposeUserData,
	})
	if err != nil {
		t.Fatalf("upload: %v", err)
	}
	return f.ID
}

// chatWithFile is a chat completion naming an uploaded file.
func chatWithFile(id string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model: "gpt-test",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
			openai.FileContentPart(openai.ChatCompletionContentPartFileFileParam{FileID: openai.String(id)}),
			openai.TextContentPart("summarize"),
		})},
	}
}

// A file uploaded through the proxy lands on one provider (the first of
// the forward order, b); the completions naming it go there, although
// the plan would put a first (weight 1000 to 1): the proxy remembered
// the upload's holder.
func TestObjectsUploadedFilePinsCompletion(t *testing.T) {
	a, b := newUpstream(t, sim.Config{}), newUpstream(t, sim.Config{})
	p := startProxy(t, provider("b", b, "weight 1")+provider("a", a, "weight 1000")+discoverBlock+"\n"+objectsForward)
	id := uploadOpenAIFile(t, p)
	c := openaiClient(p, "sk-client")
	for n := range 4 {
		got, err := c.Chat.Completions.New(ctxTimeout(t, 10*time.Second), chatWithFile(id))
		if err != nil || got.Choices[0].Message.Content != wantText {
			t.Fatalf("completion %d naming the file: %v", n+1, err)
		}
	}
	if completions(a) != 0 || completions(b) != 4 {
		t.Fatalf("a saw %d completions, b %d: want all at b, the file's holder", completions(a), completions(b))
	}
	got, err := c.Files.Get(ctxTimeout(t, 10*time.Second), id)
	if err != nil || got.ID != id {
		t.Fatalf("GET the file by id: %v", err)
	}
}

// Files the proxy never saw uploaded (another instance, a restart) are
// discovered: a chat completion and an Anthropic message naming one, and
// the calls on it by id, reach the provider holding it; the other's
// not-found answer charges nothing.
func TestObjectsFileDiscovered(t *testing.T) {
	a, b := newUpstream(t, sim.Config{}), newUpstream(t, sim.Config{})
	p := startProxy(t, provider("a", a, "priority 0")+provider("b", b, "priority 1")+discoverBlock+"\n"+objectsForward)
	direct := &proxy{URL: b.URL}
	found := metricValue(t, p, `caddy_llm_hedge_discoveries_total{outcome="found"}`)

	id := uploadOpenAIFile(t, direct)
	c := openaiClient(p, "sk-client")
	for n := range 2 { // the second goes straight to b
		got, err := c.Chat.Completions.New(ctxTimeout(t, 10*time.Second), chatWithFile(id))
		if err != nil || got.Choices[0].Message.Content != wantText {
			t.Fatalf("completion %d naming a file held by b: %v", n+1, err)
		}
	}
	if completions(a) != 1 || completions(b) != 2 {
		t.Fatalf("a saw %d, b %d: want a's miss, then b twice", completions(a), completions(b))
	}
	if v := hedgeProviderView(t, p, a); v["state"] != "closed" || v["consecutive_failures"] != 0.0 {
		t.Fatalf("a's breaker was charged for not holding the file: %v", v)
	}

	meta, err := anthropicClient(direct, "sk-client").Beta.Files.Upload(ctxTimeout(t, 10*time.Second), anthropic.BetaFileUploadParams{
		File: anthropic.File(strings.NewReader("a document"), "notes.txt", "text/plain"),
	})
	if err != nil {
		t.Fatalf("anthropic upload at b: %v", err)
	}
	msg, err := anthropicClient(p, "sk-client").Beta.Messages.New(ctxTimeout(t, 10*time.Second), anthropic.BetaMessageNewParams{
		Model:     "claude-test",
		MaxTokens: 64,
		Betas:     []anthropic.AnthropicBeta{anthropic.AnthropicBetaFilesAPI2025_04_14},
		Messages: []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(
			anthropic.BetaContentBlockParamUnion{OfDocument: &anthropic.BetaRequestDocumentBlockParam{
				Source: anthropic.BetaRequestDocumentBlockSourceUnionParam{OfFile: &anthropic.BetaFileDocumentSourceParam{FileID: meta.ID}},
			}},
			anthropic.NewBetaTextBlock("summarize"),
		)},
	})
	if err != nil || len(msg.Content) == 0 || msg.Content[0].Text != wantText {
		t.Fatalf("anthropic message naming a file held by b: %v", err)
	}

	other := uploadOpenAIFile(t, direct)
	if got, err := c.Files.Get(ctxTimeout(t, 10*time.Second), other); err != nil || got.ID != other {
		t.Fatalf("GET a file held by b: %v", err)
	}
	if _, err := c.Files.Delete(ctxTimeout(t, 10*time.Second), other); err != nil {
		t.Fatalf("DELETE a file held by b: %v", err)
	}
	if got := metricValue(t, p, `caddy_llm_hedge_discoveries_total{outcome="found"}`); got != found+3 {
		t.Fatalf("discoveries found went from %v to %v, want 3 more (chat, anthropic, GET)", found, got)
	}
}

// A file no provider holds: the client gets the provider's own 404
// naming it, each candidate asked once.
func TestObjectsFileHeldByNobody(t *testing.T) {
	a, b := newUpstream(t, sim.Config{}), newUpstream(t, sim.Config{})
	p := startProxy(t, provider("a", a, "priority 0")+provider("b", b, "priority 1")+discoverBlock+"\n"+objectsForward)
	_, err := openaiClient(p, "sk-client").Chat.Completions.New(ctxTimeout(t, 10*time.Second), chatWithFile("file-nowhere"))
	var oerr *openai.Error
	if !errors.As(err, &oerr) || oerr.StatusCode != http.StatusNotFound || !strings.Contains(oerr.Message, "file-nowhere") {
		t.Fatalf("want the providers' 404 naming the file, got %v", err)
	}
	if completions(a) != 1 || completions(b) != 1 {
		t.Fatalf("a saw %d, b %d: each candidate once", completions(a), completions(b))
	}
}

const conversationsForward = "forward /v1/conversations /v1/conversations/*"

// turnInConversation is a Responses turn in conversation id.
func turnInConversation(id string) responses.ResponseNewParams {
	params := responsesParams("gpt-test")
	params.Conversation = responses.ResponseNewParamsConversationUnion{OfString: openai.String(id)}
	return params
}

// A conversation created through the proxy lands on b (the first of the
// forward order); the turns in it go there, though the plan puts a first.
// One created elsewhere is discovered, for a turn and for a GET by id.
func TestObjectsConversation(t *testing.T) {
	a, b := newUpstream(t, sim.Config{}), newUpstream(t, sim.Config{})
	p := startProxy(t, provider("b", b, "weight 1")+provider("a", a, "weight 1000")+discoverBlock+"\n"+conversationsForward)
	c := openaiClient(p, "sk-client")
	conv, err := c.Conversations.New(ctxTimeout(t, 10*time.Second), conversations.ConversationNewParams{})
	if err != nil {
		t.Fatalf("creating a conversation: %v", err)
	}
	for n := range 3 {
		if _, err := c.Responses.New(ctxTimeout(t, 10*time.Second), turnInConversation(conv.ID)); err != nil {
			t.Fatalf("turn %d in the conversation: %v", n+1, err)
		}
	}
	if responsesCalls(a) != 0 || responsesCalls(b) != 3 {
		t.Fatalf("a saw %d turns, b %d: want all at b, the conversation's holder", responsesCalls(a), responsesCalls(b))
	}

	elsewhere, err := openaiClient(&proxy{URL: b.URL}, "sk-direct").Conversations.New(ctxTimeout(t, 10*time.Second), conversations.ConversationNewParams{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Conversations.Get(ctxTimeout(t, 10*time.Second), elsewhere.ID)
	if err != nil || got.ID != elsewhere.ID {
		t.Fatalf("GET a conversation created elsewhere: %v", err)
	}
	other, _ := openaiClient(&proxy{URL: b.URL}, "sk-direct").Conversations.New(ctxTimeout(t, 10*time.Second), conversations.ConversationNewParams{})
	aBefore := responsesCalls(a)
	if _, err := c.Responses.New(ctxTimeout(t, 10*time.Second), turnInConversation(other.ID)); err != nil {
		t.Fatalf("a turn in a conversation created elsewhere: %v", err)
	}
	if v := hedgeProviderView(t, p, a); v["state"] != "closed" || v["consecutive_failures"] != 0.0 {
		t.Fatalf("a's breaker was charged for not holding the conversation: %v", v)
	}
	if responsesCalls(a) > aBefore+1 {
		t.Fatalf("a was asked %d times for one conversation", responsesCalls(a)-aBefore)
	}
}
