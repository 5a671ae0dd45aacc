package engine

import (
	"net/http"
	"testing"

	dresponses "github.com/llmhedge/caddy-llm-hedge/internal/dialect/responses"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// The readers of one top-level member answer the same from the parse's
// index as from a walk of the body: the session key of every dialect,
// Responses' store and previous_response_id.
func TestTopIndexReaders(t *testing.T) {
	h := http.Header{"X-Claude-Code-Session-Id": {"s-1"}, "Session-Id": {"c-1"}}
	for _, tc := range []struct {
		d    wire.Dialect
		path string
		body string
	}{
		{dialectAnthropic, "/v1/messages", `{"model":"m","metadata":{"user_id":"u-1"},"messages":[{"role":"user","content":"metadata"}]}`},
		{dialectAnthropic, "/v1/messages", `{"model":"m","metadata":{"user_id":"u-1"},"metadata":{"user_id":"u-2"}}`},
		{dialectAnthropic, "/v1/messages", `{"model":"m","messages":[]}`},
		{dialectOpenAI, "/v1/chat/completions", `{"model":"m","user":"u","prompt_cache_key":"k","safety_identifier":"s"}`},
		{dialectOpenAI, "/v1/chat/completions", `{"model":"m","safety_identifier":"s","messages":[{"role":"user","content":"user"}]}`},
		{dialectResponses, "/v1/responses", `{"model":"m","prompt_cache_key":"k","store":false,"previous_response_id":"resp_1"}`},
		{dialectResponses, "/v1/responses", `{"model":"m","store":false,"store":true,"previous_response_id":"resp_1","previous_response_id":null}`},
		{dialectResponses, "/v1/responses", `{"model":"m","input":[{"role":"user","content":"\"store\":false"}]}`},
		{dialectGemini, "/v1beta/models/gemini-2.5-pro:streamGenerateContent", `{"cachedContent":"cachedContents/c1","contents":[]}`},
		{dialectGemini, "/v1beta/models/gemini-2.5-pro:generateContent", `{"contents":[{"parts":[{"text":"cachedContent"}]}],"cachedContent":"cachedContents/c1","cachedContent":"cachedContents/c2"}`},
	} {
		body := []byte(tc.body)
		req, err := wire.ParseCompletion(tc.d, tc.path, "", body)
		if err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		if !req.Top.Holds(body) {
			t.Fatalf("%s: the parse left no index", tc.body)
		}
		if got, want := sessionKey(tc.d, body, &req.Top, h, ""), sessionKey(tc.d, body, nil, h, ""); got != want {
			t.Errorf("%s: session key %q from the index, %q from a walk", tc.body, got, want)
		}
		if tc.d != dialectResponses {
			continue
		}
		if got, want := dresponses.ResponseStored(body, &req.Top), dresponses.ResponseStored(body, nil); got != want {
			t.Errorf("%s: stored %v from the index, %v from a walk", tc.body, got, want)
		}
		if got, want := dresponses.PreviousResponseID(body, &req.Top), dresponses.PreviousResponseID(body, nil); got != want {
			t.Errorf("%s: previous id %q from the index, %q from a walk", tc.body, got, want)
		}
	}
}
