package sim

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/genai"

	"github.com/caddyserver/caddy/v2"
)

const geminiBody = `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`

func geminiClient(t *testing.T, srv *httptest.Server, key string) *genai.Client {
	t.Helper()
	c, err := genai.NewClient(t.Context(), &genai.ClientConfig{
		APIKey:      key,
		Backend:     genai.BackendGeminiAPI,
		HTTPClient:  srv.Client(),
		HTTPOptions: genai.HTTPOptions{BaseURL: srv.URL},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// geminiStream collects a GenerateContentStream: the text, the last chunk,
// and the first error.
func geminiStream(t *testing.T, c *genai.Client, model string) (text string, last *genai.GenerateContentResponse, chunks int, err error) {
	t.Helper()
	for resp, err := range c.Models.GenerateContentStream(t.Context(), model, genai.Text("Say something."), nil) {
		if err != nil {
			return text, last, chunks, err
		}
		chunks++
		text += resp.Text()
		last = resp
	}
	return text, last, chunks, nil
}

func TestGeminiSDK(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "generate", true: "stream"}[stream], func(t *testing.T) {
			s, srv := serve(t, Config{Text: "Hello there, world.", Tokens: 3, CacheRead: 7, Key: "gk"})
			c := geminiClient(t, srv, "gk")
			var text string
			var resp *genai.GenerateContentResponse
			if stream {
				var chunks int
				var err error
				text, resp, chunks, err = geminiStream(t, c, "gemini-test")
				if err != nil {
					t.Fatal(err)
				}
				if chunks != 4 {
					t.Errorf("chunks = %d, want 3 deltas and the final one", chunks)
				}
			} else {
				var err error
				resp, err = c.Models.GenerateContent(t.Context(), "gemini-test", genai.Text("Say something."), nil)
				if err != nil {
					t.Fatal(err)
				}
				text = resp.Text()
			}
			if text != "Hello there, world." {
				t.Errorf("text = %q", text)
			}
			if got := resp.Candidates[0].FinishReason; got != genai.FinishReasonStop {
				t.Errorf("finishReason = %q", got)
			}
			if resp.Candidates[0].Content.Role != "model" || resp.ModelVersion != "gemini-test" || !strings.HasPrefix(resp.ResponseID, "sim-gemini-") {
				t.Errorf("role %q, modelVersion %q, responseId %q", resp.Candidates[0].Content.Role, resp.ModelVersion, resp.ResponseID)
			}
			u := resp.UsageMetadata
			if u == nil || u.CandidatesTokenCount != 3 || u.CachedContentTokenCount != 7 || u.PromptTokenCount < 8 ||
				u.TotalTokenCount != u.PromptTokenCount+3 {
				t.Errorf("usage = %+v", u)
			}
			rec := lastRecord(t, s)
			wantPath := "/v1beta/models/gemini-test:generateContent"
			if stream {
				wantPath = "/v1beta/models/gemini-test:streamGenerateContent"
			}
			if rec.Path != wantPath || rec.Model != "gemini-test" || rec.Stream != stream || rec.GoogAPIKey != "gk" ||
				rec.KeyParam != "" || rec.Status != 200 || rec.Deltas != 3 {
				t.Errorf("record = %+v", rec)
			}
			if s.Stats().Requests != 1 {
				t.Errorf("stats = %+v", s.Stats())
			}
		})
	}
}

func TestGeminiSDKCountAndModels(t *testing.T) {
	_, srv := serve(t, Config{Model: "gemini-sim"})
	c := geminiClient(t, srv, "k")
	ct, err := c.Models.CountTokens(t.Context(), "gemini-test", genai.Text("Say something."), nil)
	if err != nil || ct.TotalTokens < 1 {
		t.Fatalf("CountTokens = %+v, %v", ct, err)
	}
	m, err := c.Models.Get(t.Context(), "gemini-x", nil)
	if err != nil || m.Name != "models/gemini-x" || m.InputTokenLimit == 0 {
		t.Fatalf("Get = %+v, %v", m, err)
	}
	var listed []string
	for m, err := range c.Models.All(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, m.Name)
	}
	if len(listed) != 1 || listed[0] != "models/gemini-sim" {
		t.Errorf("listed %v", listed)
	}
}

// TestGeminiSDKFaults is what the genai SDK makes of each fault.
func TestGeminiSDKFaults(t *testing.T) {
	apiErr := func(t *testing.T, err error, code int, status string) genai.APIError {
		t.Helper()
		var ae genai.APIError
		if !errors.As(err, &ae) || ae.Code != code || ae.Status != status || ae.Message == "" {
			t.Fatalf("err = %#v, want APIError %d %s", err, code, status)
		}
		return ae
	}
	t.Run("status 503", func(t *testing.T) {
		_, srv := serve(t, Config{Faults: []Fault{{Kind: FaultStatus, Status: 503}}})
		_, err := geminiClient(t, srv, "k").Models.GenerateContent(t.Context(), "gemini-test", genai.Text("hi"), nil)
		apiErr(t, err, 503, "UNAVAILABLE")
		_, _, _, err = geminiStream(t, geminiClient(t, srv, "k"), "gemini-test")
		apiErr(t, err, 503, "UNAVAILABLE")
	})
	t.Run("status 429 retry info", func(t *testing.T) {
		_, srv := serve(t, Config{Faults: []Fault{{Kind: FaultStatus, Status: 429, RetryAfter: "17"}}})
		_, err := geminiClient(t, srv, "k").Models.GenerateContent(t.Context(), "gemini-test", genai.Text("hi"), nil)
		ae := apiErr(t, err, 429, "RESOURCE_EXHAUSTED")
		if len(ae.Details) != 1 || ae.Details[0]["@type"] != "type.googleapis.com/google.rpc.RetryInfo" || ae.Details[0]["retryDelay"] != "17s" {
			t.Errorf("details = %v", ae.Details)
		}
	})
	t.Run("status 400 and 500", func(t *testing.T) {
		_, srv := serve(t, Config{Faults: []Fault{{Kind: FaultStatus, Status: 400, Count: 1}, {Kind: FaultStatus}}})
		c := geminiClient(t, srv, "k")
		_, err := c.Models.GenerateContent(t.Context(), "gemini-test", genai.Text("hi"), nil)
		apiErr(t, err, 400, "INVALID_ARGUMENT")
		_, err = c.Models.GenerateContent(t.Context(), "gemini-test", genai.Text("hi"), nil)
		apiErr(t, err, 500, "INTERNAL")
	})
	t.Run("fake200", func(t *testing.T) {
		// The SDK reports the error chunk of a 200 stream as an APIError,
		// and a 200 error body (non-streaming) as well.
		_, srv := serve(t, Config{Faults: []Fault{{Kind: FaultFake200}}})
		c := geminiClient(t, srv, "k")
		_, _, chunks, err := geminiStream(t, c, "gemini-test")
		apiErr(t, err, 503, "UNAVAILABLE")
		if chunks != 0 {
			t.Errorf("%d chunks before the error", chunks)
		}
		// A 200 error body is no error to GenerateContent: it returns an
		// empty response.
		resp, err := c.Models.GenerateContent(t.Context(), "gemini-test", genai.Text("hi"), nil)
		if err != nil || len(resp.Candidates) != 0 {
			t.Errorf("non-streaming fake200: resp %+v, err %v", resp, err)
		}
	})
	t.Run("cut", func(t *testing.T) {
		// A stream that ends without finishReason is no error to the SDK:
		// only the missing finishReason tells.
		_, srv := serve(t, Config{Tokens: 4, Faults: []Fault{{Kind: FaultCut, After: 2}}})
		text, last, chunks, err := geminiStream(t, geminiClient(t, srv, "k"), "gemini-test")
		if err != nil || chunks != 2 || last.Candidates[0].FinishReason != "" {
			t.Errorf("text %q, chunks %d, err %v", text, chunks, err)
		}
		_, err = geminiClient(t, srv, "k").Models.GenerateContent(t.Context(), "gemini-test", genai.Text("hi"), nil)
		if err == nil {
			t.Error("a cut body is no error")
		}
		t.Logf("non-streaming cut: %v", err)
	})
	t.Run("malformed", func(t *testing.T) {
		_, srv := serve(t, Config{Tokens: 4, Faults: []Fault{{Kind: FaultMalformed, After: 1}}})
		_, _, chunks, err := geminiStream(t, geminiClient(t, srv, "k"), "gemini-test")
		if err == nil || !strings.Contains(err.Error(), "error unmarshalling data") || chunks != 1 {
			t.Errorf("chunks %d, err %v", chunks, err)
		}
		t.Logf("malformed chunk: %v", err)
	})
	t.Run("stall", func(t *testing.T) {
		s, srv := serve(t, Config{Tokens: 4, Faults: []Fault{{Kind: FaultStall, After: 1}}})
		c := geminiClient(t, srv, "k")
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		got := 0
		for _, err := range c.Models.GenerateContentStream(ctx, "gemini-test", genai.Text("hi"), nil) {
			if err != nil {
				t.Logf("stalled stream after cancel: %v", err)
				break
			}
			got++
			cancel() // the stream stalls after this chunk
		}
		if got != 1 {
			t.Errorf("%d chunks, want 1", got)
		}
		if rec := lastRecord(t, s); !rec.Canceled || rec.Deltas != 1 {
			t.Errorf("record = %+v", rec)
		}
	})
	t.Run("bad key", func(t *testing.T) {
		_, srv := serve(t, Config{Key: "right"})
		_, err := geminiClient(t, srv, "wrong").Models.GenerateContent(t.Context(), "gemini-test", genai.Text("hi"), nil)
		ae := apiErr(t, err, 400, "INVALID_ARGUMENT")
		if ae.Details[0]["reason"] != "API_KEY_INVALID" {
			t.Errorf("details = %v", ae.Details)
		}
	})
}

// TestGeminiWire checks the bytes on the wire: SSE framing, the JSON array
// without alt=sse, /v1 paths, ?key= auth and the error chunk.
func TestGeminiWire(t *testing.T) {
	s, srv := serve(t, Config{Text: "a b", Tokens: 2, Key: "qk", FirstToken: caddy.Duration(0)})

	resp := mustPost(t, srv, "/v1/models/gemini-x:streamGenerateContent?alt=sse&key=qk", geminiBody)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	frames := strings.Split(strings.TrimSuffix(string(body), "\r\n\r\n"), "\r\n\r\n")
	if len(frames) != 3 {
		t.Fatalf("frames %q", frames)
	}
	for i, f := range frames {
		var chunk genai.GenerateContentResponse
		data, ok := strings.CutPrefix(f, "data: ")
		if !ok || json.Unmarshal([]byte(data), &chunk) != nil {
			t.Fatalf("frame %d: %q", i, f)
		}
		if (chunk.Candidates[0].FinishReason == genai.FinishReasonStop) != (i == 2) {
			t.Errorf("frame %d finishReason: %s", i, f)
		}
	}
	rec := lastRecord(t, s)
	if rec.KeyParam != "qk" || rec.GoogAPIKey != "" || rec.Model != "gemini-x" {
		t.Errorf("record = %+v", rec)
	}

	resp = mustPost(t, srv, "/v1beta/models/gemini-x:streamGenerateContent", geminiBody, "X-Goog-Api-Key", "qk")
	body, _ = io.ReadAll(resp.Body)
	var arr []genai.GenerateContentResponse
	if err := json.Unmarshal(body, &arr); err != nil || len(arr) != 3 || arr[0].Text() != "a " || arr[2].Candidates[0].FinishReason != "STOP" {
		t.Fatalf("array stream %v: %s", err, body)
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Errorf("content type %q", resp.Header.Get("Content-Type"))
	}

	resp = mustPost(t, srv, "/v1beta/models/gemini-x:generateContent", geminiBody)
	body, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != 403 || !strings.Contains(string(body), `"status":"PERMISSION_DENIED"`) {
		t.Errorf("no key: %d %s", resp.StatusCode, body)
	}

	resp = mustPost(t, srv, "/v1beta/models/gemini-x:embedContent", geminiBody, "X-Goog-Api-Key", "qk")
	body, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != 404 || !strings.Contains(string(body), `"status":"NOT_FOUND"`) {
		t.Errorf("unknown method: %d %s", resp.StatusCode, body)
	}

	s.SetFaults([]Fault{{Kind: FaultFake200, Status: 429, RetryAfter: "3"}})
	resp = mustPost(t, srv, "/v1beta/models/gemini-x:streamGenerateContent?alt=sse", geminiBody, "X-Goog-Api-Key", "qk")
	body, _ = io.ReadAll(resp.Body)
	want := `data: {"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"3s"}]}}` + "\r\n\r\n"
	if resp.StatusCode != 200 || string(body) != want || resp.Header.Get("Retry-After") != "3" {
		t.Errorf("fake200: %d %q", resp.StatusCode, body)
	}

	// Faults match the model of the path.
	s.SetFaults([]Fault{{Kind: FaultStatus, Status: 504, Model: "gemini-p*"}})
	for model, want := range map[string]int{"gemini-pro": 504, "gemini-x": 200} {
		resp = mustPost(t, srv, "/v1beta/models/"+model+":generateContent", geminiBody, "X-Goog-Api-Key", "qk")
		body, _ = io.ReadAll(resp.Body)
		if resp.StatusCode != want || (want == 504) != strings.Contains(string(body), `"status":"DEADLINE_EXCEEDED"`) {
			t.Errorf("%s: %d %s", model, resp.StatusCode, body)
		}
	}

	s.SetFaults([]Fault{{Kind: FaultCut, After: 1}})
	resp = mustPost(t, srv, "/v1beta/models/gemini-x:streamGenerateContent", geminiBody, "X-Goog-Api-Key", "qk")
	body, _ = io.ReadAll(bufio.NewReader(resp.Body))
	if json.Valid(body) || !strings.HasPrefix(string(body), `[{"candidates"`) {
		t.Errorf("cut array: %q", body)
	}
}
