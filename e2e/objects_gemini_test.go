package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/genai"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

const geminiObjectsForward = "forward /v1beta/files /v1beta/files/* /v1beta/cachedContents /v1beta/cachedContents/*"

// geminiCreateFile creates a file with the Files API's metadata create
// (POST /v1beta/files) at base, as a raw client, and returns its name.
func geminiCreateFile(t *testing.T, base string) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctxTimeout(t, 10*time.Second), http.MethodPost, base+"/v1beta/files",
		strings.NewReader(`{"file":{"displayName":"notes","mimeType":"text/plain"}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Goog-Api-Key", "sk-client")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var created struct {
		File genai.File `json:"file"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&created); err != nil || resp.StatusCode != http.StatusOK || created.File.Name == "" {
		t.Fatalf("creating a file: %d %v", resp.StatusCode, err)
	}
	return created.File.Name
}

// geminiCalls counts the generateContent calls an upstream received.
func geminiCalls(u *upstream) int {
	n := 0
	for _, r := range u.Requests() {
		if strings.Contains(r.Path, ":generateContent") || strings.Contains(r.Path, ":streamGenerateContent") {
			n++
		}
	}
	return n
}

// withFile is a generateContent naming a file by its URI.
func withFile(name string) []*genai.Content {
	return []*genai.Content{genai.NewContentFromParts([]*genai.Part{
		genai.NewPartFromURI("https://generativelanguage.googleapis.com/v1beta/"+name, "text/plain"),
		genai.NewPartFromText("summarize"),
	}, genai.RoleUser)}
}

// Gemini answers 403 PERMISSION_DENIED for a file or cache another project
// holds: the calls by id discover the holder past it, as a 404 would.
func TestObjectsGeminiDiscoveredPast403(t *testing.T) {
	a, b := newUpstream(t, sim.Config{}), newUpstream(t, sim.Config{})
	p := startProxy(t, provider("a", a, "priority 0")+provider("b", b, "priority 1")+discoverBlock+"\n"+geminiObjectsForward)
	c := geminiClient(t, p, "sk-client")
	name := geminiCreateFile(t, b.URL)
	f, err := c.Files.Get(ctxTimeout(t, 10*time.Second), name, nil)
	if err != nil || f.Name != name {
		t.Fatalf("GET a file held by b: %v", err)
	}
	cache, err := geminiClient(t, &proxy{URL: b.URL}, "sk-client").Caches.Create(ctxTimeout(t, 10*time.Second), "gemini-test", nil)
	if err != nil {
		t.Fatalf("creating a cache at b: %v", err)
	}
	got, err := c.Caches.Get(ctxTimeout(t, 10*time.Second), cache.Name, nil)
	if err != nil || got.Name != cache.Name {
		t.Fatalf("GET a cache held by b: %v", err)
	}
	if v := hedgeProviderView(t, p, a); v["state"] != "closed" || v["consecutive_failures"] != 0.0 {
		t.Fatalf("a's breaker was charged for not holding them: %v", v)
	}
}

// A Gemini file and cache created through the proxy are remembered (the
// file create answers {"file": {"name": ...}}): the completions naming
// them go to their holder b, though the plan puts a first.
func TestObjectsGeminiCreatedPinsCompletion(t *testing.T) {
	a, b := newUpstream(t, sim.Config{}), newUpstream(t, sim.Config{})
	p := startProxy(t, provider("b", b, "weight 1")+provider("a", a, "weight 1000")+discoverBlock+"\n"+geminiObjectsForward)
	c := geminiClient(t, p, "sk-client")
	name := geminiCreateFile(t, p.URL)
	for n := range 3 {
		resp, err := c.Models.GenerateContent(ctxTimeout(t, 10*time.Second), "gemini-test", withFile(name), nil)
		if err != nil || resp.Text() != wantText {
			t.Fatalf("completion %d naming the file: %v", n+1, err)
		}
	}
	cache, err := c.Caches.Create(ctxTimeout(t, 10*time.Second), "gemini-test", nil)
	if err != nil {
		t.Fatalf("creating a cache: %v", err)
	}
	resp, err := c.Models.GenerateContent(ctxTimeout(t, 10*time.Second), "gemini-test", genai.Text("hello"),
		&genai.GenerateContentConfig{CachedContent: cache.Name})
	if err != nil || resp.Text() != wantText {
		t.Fatalf("completion naming the cache: %v", err)
	}
	if geminiCalls(a) != 0 || geminiCalls(b) != 4 {
		t.Fatalf("a saw %d completions, b %d: want all at b, the holder", geminiCalls(a), geminiCalls(b))
	}
}
