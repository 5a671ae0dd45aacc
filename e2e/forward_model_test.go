package e2e

import (
	"encoding/json"
	"net/http"
	"testing"
)

// A token count or a model's GET is about one model: it goes to the
// providers that serve that model, with their model rewrite applied, as a
// completion does (docs/operations.md "Forwarded calls").
func TestForwardedModelCallFollowsModels(t *testing.T) {
	haiku, sonnet := newSeenUpstream(t), newSeenUpstream(t)
	gem := newSeenUpstream(t)
	p := startProxy(t,
		provider("haiku", haiku.upstream, "priority 0", "models claude-haiku-*")+
			provider("sonnet", sonnet.upstream, "priority 1", "models claude-sonnet-*", "model claude-sonnet-4-5 claude-sonnet-4-5-20250929")+
			provider("gem", gem.upstream, "api gemini", "key sk-operator", "models gemini-2.5-*", "model gemini-2.5-pro gemini-2.5-pro-002"))

	count := func(model string) (int, string) {
		return postEncoded(t, p, "/v1/messages/count_tokens", "identity", []byte(`{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`))
	}
	if status, resp := count("claude-sonnet-4-5"); status != http.StatusOK {
		t.Fatalf("count_tokens for sonnet: status %d: %.300s", status, resp)
	}
	if status, resp := count("claude-haiku-4-5"); status != http.StatusOK {
		t.Fatalf("count_tokens for haiku: status %d: %.300s", status, resp)
	}
	lastModel := func(u *seenUpstream) (string, string, int) {
		u.mu.Lock()
		defer u.mu.Unlock()
		if len(u.bodies) == 0 {
			return "", "", 0
		}
		var b struct {
			Model string `json:"model"`
		}
		_ = json.Unmarshal(u.bodies[len(u.bodies)-1], &b)
		return b.Model, u.paths[len(u.paths)-1], len(u.bodies)
	}
	if m, path, n := lastModel(sonnet); n != 1 || m != "claude-sonnet-4-5-20250929" || path != "/v1/messages/count_tokens" {
		t.Fatalf("the sonnet provider got %d calls, the last for %q on %s; want 1, rewritten to claude-sonnet-4-5-20250929", n, m, path)
	}
	if m, _, n := lastModel(haiku); n != 1 || m != "claude-haiku-4-5" {
		t.Fatalf("the haiku provider got %d calls, the last for %q; want 1 (the sonnet count must not reach it)", n, m)
	}

	status, resp := count("claude-opus-4")
	var e struct {
		Type  string `json:"type"`
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if status != http.StatusNotFound || json.Unmarshal([]byte(resp), &e) != nil || e.Type != "error" {
		t.Fatalf("count_tokens for a model no provider serves: status %d, want 404 in Anthropic's shape: %.300s", status, resp)
	}

	// Gemini names the model in the path: the rewrite is a path segment.
	badInputPost(t, p, "/v1beta/models/gemini-2.5-pro:countTokens", `{"contents":[{"parts":[{"text":"hi"}]}]}`)
	if _, path, n := lastModel(gem); n != 1 || path != "/v1beta/models/gemini-2.5-pro-002:countTokens" {
		t.Fatalf("the Gemini provider got %d calls, the last on %s; want the rewritten model in the path", n, path)
	}
	if status, resp := badInputPost(t, p, "/v1beta/models/gemini-1.0-pro:countTokens", `{"contents":[]}`); status != http.StatusNotFound {
		t.Fatalf("countTokens for a Gemini model no provider serves: status %d, want 404: %.300s", status, resp)
	}
	haiku.mu.Lock()
	defer haiku.mu.Unlock()
	sonnet.mu.Lock()
	defer sonnet.mu.Unlock()
	if len(haiku.bodies)+len(sonnet.bodies) != 2 {
		t.Fatalf("the Anthropic providers got %d calls, want 2: a refused call reached one", len(haiku.bodies)+len(sonnet.bodies))
	}
}
