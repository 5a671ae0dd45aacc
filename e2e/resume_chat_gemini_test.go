package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"google.golang.org/genai"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// resumeCut40 is a simulator whose first stream of longText is cut after 40
// of its 60 deltas.
func resumeCut40(t *testing.T) *upstream {
	return newUpstream(t, sim.Config{Tokens: 60, Text: longText, Faults: []sim.Fault{{Kind: sim.FaultCut, After: 40, Count: 1}}})
}

// resumeCutAlways is a simulator whose every stream of longText is cut after 40
// deltas.
func resumeCutAlways(t *testing.T) *upstream {
	return newUpstream(t, sim.Config{Tokens: 60, Text: longText, Faults: []sim.Fault{{Kind: sim.FaultCut, After: 40}}})
}

// resumeStreamChat streams through openai-go, checking that the accumulator
// takes every chunk (it refuses a chunk with another id), and returns the
// accumulation, the ids seen and the SDK's error.
func resumeStreamChat(ctx context.Context, c *openai.Client, params openai.ChatCompletionNewParams) (openai.ChatCompletionAccumulator, map[string]bool, error) {
	stream := c.Chat.Completions.NewStreaming(ctx, params)
	defer stream.Close()
	var acc openai.ChatCompletionAccumulator
	ids := map[string]bool{}
	for stream.Next() {
		ch := stream.Current()
		ids[ch.ID] = true
		if !acc.AddChunk(ch) {
			return acc, ids, fmt.Errorf("the accumulator refused chunk %s", ch.RawJSON())
		}
	}
	return acc, ids, stream.Err()
}

func resumeChatText(acc openai.ChatCompletionAccumulator) string {
	if len(acc.Choices) == 0 {
		return ""
	}
	return acc.Choices[0].Message.Content
}

// A Chat Completions stream cut after 40 deltas is finished by
// replay-match on a provider giving the same answer: openai-go reads the
// whole text under one id, one finish, and the usage chunk it asked for
// reports the answer's tokens.
func TestResumeReplayChat(t *testing.T) {
	cut := resumeCut40(t)
	other := newUpstream(t, sim.Config{Tokens: 60, Text: longText})
	p := startProxy(t, provider("cut", cut, "priority 1")+provider("other", other, "priority 2", "prefill off"))

	params := openaiParams("gpt-test")
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	acc, ids, err := resumeStreamChat(ctxTimeout(t, 10*time.Second), openaiClient(p, "k"), params)
	if err != nil {
		t.Fatalf("continued stream: %v (text so far %q)", err, resumeChatText(acc))
	}
	if got := resumeChatText(acc); got != longText {
		t.Fatalf("text = %q\nwant %q", got, longText)
	}
	if len(ids) != 1 {
		t.Errorf("chunk ids = %v, want one (each simulator's ids are its own)", ids)
	}
	if len(acc.Choices) != 1 || acc.Choices[0].FinishReason != "stop" {
		t.Errorf("choices = %d, finish %q; want one, stop", len(acc.Choices), acc.Choices[0].FinishReason)
	}
	u := acc.Usage
	if u.CompletionTokens != 60 || u.PromptTokens <= 0 || u.TotalTokens != u.PromptTokens+60 {
		t.Errorf("usage = %+v, want 60 completion tokens and the prompt's", u)
	}
	if n := completions(other); n != 1 {
		t.Errorf("other saw %d completions, want 1", n)
	}
}

// The Gemini stream is continued the same way: genai reads the whole
// text under one responseId, and the last usage is the answer's.
func TestResumeReplayGemini(t *testing.T) {
	cut := resumeCut40(t)
	other := newUpstream(t, sim.Config{Tokens: 60, Text: longText})
	p := startProxy(t, provider("cut", cut, "priority 1")+provider("other", other, "priority 2", "prefill off"))

	c := geminiClient(t, p, "k")
	var b strings.Builder
	ids := map[string]bool{}
	var um *genai.GenerateContentResponseUsageMetadata
	var finish genai.FinishReason
	for resp, err := range c.Models.GenerateContentStream(ctxTimeout(t, 10*time.Second), "gemini-test", genai.Text("hello"), nil) {
		if err != nil {
			t.Fatalf("continued stream: %v (text so far %q)", err, b.String())
		}
		b.WriteString(resp.Text())
		ids[resp.ResponseID] = true
		if resp.UsageMetadata != nil {
			um = resp.UsageMetadata
		}
		if len(resp.Candidates) > 0 && resp.Candidates[0].FinishReason != "" {
			if finish != "" {
				t.Errorf("a second finish %q after %q", resp.Candidates[0].FinishReason, finish)
			}
			finish = resp.Candidates[0].FinishReason
		}
	}
	if got := b.String(); got != longText {
		t.Fatalf("text = %q\nwant %q", got, longText)
	}
	if len(ids) != 1 {
		t.Errorf("responseIds = %v, want one", ids)
	}
	if finish != genai.FinishReasonStop {
		t.Errorf("finish = %q, want STOP", finish)
	}
	if um == nil || um.CandidatesTokenCount != 60 || um.PromptTokenCount <= 0 || um.TotalTokenCount != um.PromptTokenCount+60 {
		t.Errorf("usage = %+v, want 60 candidate tokens and the prompt's", um)
	}
	if n := geminiCompletions(other); n != 1 {
		t.Errorf("other saw %d completions, want 1", n)
	}
}

// A continuation that says something else is never spliced: the client
// gets the error, and its text is a prefix of the answer.
func TestResumeDivergedChatGemini(t *testing.T) {
	t.Run("chat", func(t *testing.T) {
		cut := resumeCutAlways(t)
		other := newUpstream(t, sim.Config{Tokens: 60, Text: "something else entirely"})
		p := startProxy(t, provider("cut", cut, "priority 1")+provider("other", other, "priority 2", "prefill off"))
		acc, _, err := resumeStreamChat(ctxTimeout(t, 10*time.Second), openaiClient(p, "k"), openaiParams("gpt-test"))
		if err == nil {
			t.Fatalf("diverged continuation finished cleanly: %q", resumeChatText(acc))
		}
		if got := resumeChatText(acc); got == "" || !strings.HasPrefix(longText, got) {
			t.Fatalf("client text %q is not a prefix of the answer", got)
		}
	})
	t.Run("gemini", func(t *testing.T) {
		cut := resumeCutAlways(t)
		other := newUpstream(t, sim.Config{Tokens: 60, Text: "something else entirely"})
		p := startProxy(t, provider("cut", cut, "priority 1")+provider("other", other, "priority 2", "prefill off"))
		text, _, err := geminiGenerate(ctxTimeout(t, 10*time.Second), geminiClient(t, p, "k"), "gemini-test", true)
		var apiErr genai.APIError
		if !errors.As(err, &apiErr) {
			t.Fatalf("diverged continuation: text %q, err %v; want an APIError", text, err)
		}
		if text == "" || !strings.HasPrefix(longText, text) {
			t.Fatalf("client text %q is not a prefix of the answer", text)
		}
	})
}

// With `stream { resume off }` a cut stream ends in the error event as
// before, and the other provider is never asked.
func TestResumeOffChatGemini(t *testing.T) {
	off := "\t\tstream {\n\t\t\tresume off\n\t\t}\n"
	t.Run("chat", func(t *testing.T) {
		cut := resumeCut40(t)
		other := newUpstream(t, sim.Config{Tokens: 60, Text: longText})
		p := startProxy(t, off+provider("cut", cut, "priority 1")+provider("other", other, "priority 2", "prefill off"))
		acc, _, err := resumeStreamChat(ctxTimeout(t, 10*time.Second), openaiClient(p, "k"), openaiParams("gpt-test"))
		if err == nil {
			t.Fatalf("cut stream finished cleanly with resume off: %q", resumeChatText(acc))
		}
		if n := completions(other); n != 0 {
			t.Errorf("other saw %d completions, want 0", n)
		}
	})
	t.Run("gemini", func(t *testing.T) {
		cut := resumeCut40(t)
		other := newUpstream(t, sim.Config{Tokens: 60, Text: longText})
		p := startProxy(t, off+provider("cut", cut, "priority 1")+provider("other", other, "priority 2", "prefill off"))
		text, _, err := geminiGenerate(ctxTimeout(t, 10*time.Second), geminiClient(t, p, "k"), "gemini-test", true)
		var apiErr genai.APIError
		if !errors.As(err, &apiErr) || apiErr.Code != 502 {
			t.Fatalf("cut stream with resume off: text %q, err %v; want a 502 APIError", text, err)
		}
		if n := geminiCompletions(other); n != 0 {
			t.Errorf("other saw %d completions, want 0", n)
		}
	})
}

// resumeCutAfter is a provider that streams the given events and then
// drops the connection (the simulator makes no tool calls).
func resumeCutAfter(t *testing.T, events ...string) *upstream {
	return resumeServe(t, true, events...)
}

// resumeServe is a provider that streams the given data events, then ends
// the body (cut: drops the connection).
func resumeServe(t *testing.T, cut bool, events ...string) *upstream {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for _, ev := range events {
			fmt.Fprintf(w, "data: %s\n\n", ev)
		}
		w.(http.Flusher).Flush()
		if cut {
			panic(http.ErrAbortHandler) // no terminal event, no finish
		}
	}))
	t.Cleanup(srv.Close)
	return &upstream{URL: srv.URL}
}

// A continuation whose chunks split the text elsewhere than the client's,
// and whose last chunk carries the last text with the finish (as Gemini
// and some OpenAI-compatible servers send it), is spliced whole: the
// client gets the remainder and one finish.
func TestResumeTextWithFinish(t *testing.T) {
	a, b := longText[:101], longText[101:]
	t.Run("chat", func(t *testing.T) {
		chunk := func(delta, finish string) string {
			return `{"id":"chatcmpl-other","object":"chat.completion.chunk","created":2,"model":"gpt-test","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `}]}`
		}
		other := resumeServe(t, false, chunk(`{"role":"assistant","content":""}`, "null"),
			chunk(`{"content":`+strconv.Quote(a)+`}`, "null"), chunk(`{"content":`+strconv.Quote(b)+`}`, `"length"`), "[DONE]")
		p := startProxy(t, provider("cut", resumeCut40(t), "priority 1")+provider("other", other, "priority 2", "prefill off"))
		acc, ids, err := resumeStreamChat(ctxTimeout(t, 10*time.Second), openaiClient(p, "k"), openaiParams("gpt-test"))
		if err != nil {
			t.Fatalf("continued stream: %v (text so far %q)", err, resumeChatText(acc))
		}
		if got := resumeChatText(acc); got != longText || len(ids) != 1 || ids["chatcmpl-other"] {
			t.Fatalf("text %q ids %v\nwant %q under the cut stream's id", got, ids, longText)
		}
		if f := acc.Choices[0].FinishReason; f != "length" {
			t.Errorf("finish = %q, want the continuation's length", f)
		}
	})
	t.Run("gemini", func(t *testing.T) {
		chunk := func(text, finish string) string {
			return `{"candidates":[{"content":{"parts":[{"text":` + strconv.Quote(text) + `}],"role":"model"},` + finish + `"index":0}],"modelVersion":"gemini-test","responseId":"other"}`
		}
		other := resumeServe(t, false, chunk(a, ""), chunk(b, `"finishReason":"MAX_TOKENS",`))
		p := startProxy(t, provider("cut", resumeCut40(t), "priority 1")+provider("other", other, "priority 2", "prefill off"))
		var text strings.Builder
		var finishes []genai.FinishReason
		for resp, err := range geminiClient(t, p, "k").Models.GenerateContentStream(ctxTimeout(t, 10*time.Second), "gemini-test", genai.Text("hello"), nil) {
			if err != nil {
				t.Fatalf("continued stream: %v (text so far %q)", err, text.String())
			}
			if resp.ResponseID == "other" {
				t.Errorf("a chunk with the continuation's responseId")
			}
			text.WriteString(resp.Text())
			if len(resp.Candidates) > 0 && resp.Candidates[0].FinishReason != "" {
				finishes = append(finishes, resp.Candidates[0].FinishReason)
			}
		}
		if text.String() != longText || len(finishes) != 1 || finishes[0] != genai.FinishReasonMaxTokens {
			t.Fatalf("text %q finishes %v\nwant %q and one MAX_TOKENS", text.String(), finishes, longText)
		}
	})
}

// A stream that has sent a tool call (Chat Completions) or a functionCall
// part (Gemini) and is then cut is not continued: the SDK gets the error,
// and the provider that would answer with text is never asked.
func TestResumeNonTextChatGemini(t *testing.T) {
	t.Run("chat", func(t *testing.T) {
		cut := resumeCutAfter(t,
			`{"id":"chatcmpl-t","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"role":"assistant","content":"Let me look."},"finish_reason":null}]}`,
			`{"id":"chatcmpl-t","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"lookup","arguments":"{\"q\":"}}]},"finish_reason":null}]}`)
		other := newUpstream(t, sim.Config{Tokens: 60, Text: longText})
		p := startProxy(t, provider("cut", cut, "priority 1")+provider("other", other, "priority 2", "prefill off"))
		acc, _, err := resumeStreamChat(ctxTimeout(t, 10*time.Second), openaiClient(p, "k"), openaiParams("gpt-test"))
		if err == nil {
			t.Fatalf("a cut tool call finished cleanly: %+v", acc.Choices)
		}
		if n := completions(other); n != 0 {
			t.Errorf("other saw %d completions, want 0", n)
		}
	})
	t.Run("gemini", func(t *testing.T) {
		cut := resumeCutAfter(t,
			`{"candidates":[{"content":{"parts":[{"text":"Let me look."}],"role":"model"},"index":0}],"modelVersion":"gemini-test","responseId":"r1"}`,
			`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"lookup","args":{"q":"x"}}}],"role":"model"},"index":0}],"modelVersion":"gemini-test","responseId":"r1"}`)
		other := newUpstream(t, sim.Config{Tokens: 60, Text: longText})
		p := startProxy(t, provider("cut", cut, "priority 1")+provider("other", other, "priority 2", "prefill off"))
		text, _, err := geminiGenerate(ctxTimeout(t, 10*time.Second), geminiClient(t, p, "k"), "gemini-test", true)
		var apiErr genai.APIError
		if !errors.As(err, &apiErr) {
			t.Fatalf("a cut functionCall: text %q, err %v; want an APIError", text, err)
		}
		if n := geminiCompletions(other); n != 0 {
			t.Errorf("other saw %d completions, want 0", n)
		}
	})
}

// resumePrefillTarget is a provider that continues an assistant turn
// left last in the request (what `prefill on` asserts): it answers with
// the rest of longText after that turn's text, and records the text.
func resumePrefillTarget(t *testing.T, gemini bool, got chan<- string) *upstream {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages []struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"messages"`
			Contents []struct {
				Role  string `json:"role"`
				Parts []struct {
					Text string `json:"text"`
				} `json:"parts"`
			} `json:"contents"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		prefill, ok := "", false
		switch {
		case gemini && len(body.Contents) == 2 && body.Contents[1].Role == "model" && len(body.Contents[1].Parts) == 1:
			prefill, ok = body.Contents[1].Parts[0].Text, true
		case !gemini && len(body.Messages) == 2 && body.Messages[1].Role == "assistant":
			prefill, ok = body.Messages[1].Content, true
		}
		if !ok || !strings.HasPrefix(longText, prefill) {
			http.Error(w, `{"error":{"message":"no assistant prefill"}}`, http.StatusBadRequest)
			return
		}
		got <- prefill
		rest := strconv.Quote(longText[len(prefill):])
		w.Header().Set("Content-Type", "text/event-stream")
		if gemini {
			fmt.Fprintf(w, "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":%s}],\"role\":\"model\"},\"finishReason\":\"STOP\",\"index\":0}],\"responseId\":\"other\"}\r\n\r\n", rest)
			return
		}
		fmt.Fprintf(w, "data: {\"id\":\"other\",\"object\":\"chat.completion.chunk\",\"created\":2,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%s},\"finish_reason\":null}]}\n\n", rest)
		fmt.Fprint(w, "data: {\"id\":\"other\",\"object\":\"chat.completion.chunk\",\"created\":2,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return &upstream{URL: srv.URL}
}

// With `prefill on` the continuation sends the delivered text as the
// assistant (Gemini: model) turn last, and the client gets what the
// target adds after it.
func TestResumePrefillChatGemini(t *testing.T) {
	for _, gemini := range []bool{false, true} {
		name := map[bool]string{false: "chat", true: "gemini"}[gemini]
		t.Run(name, func(t *testing.T) {
			got := make(chan string, 1)
			other := resumePrefillTarget(t, gemini, got)
			p := startProxy(t, provider("cut", resumeCut40(t), "priority 1")+provider("other", other, "priority 2", "prefill on"))
			var text string
			var err error
			if gemini {
				text, _, err = geminiGenerate(ctxTimeout(t, 10*time.Second), geminiClient(t, p, "k"), "gemini-test", true)
			} else {
				var acc openai.ChatCompletionAccumulator
				acc, _, err = resumeStreamChat(ctxTimeout(t, 10*time.Second), openaiClient(p, "k"), openaiParams("gpt-test"))
				text = resumeChatText(acc)
			}
			if err != nil || text != longText {
				t.Fatalf("continued stream: %v\ntext %q\nwant %q", err, text, longText)
			}
			select {
			case prefill := <-got:
				if words := len(strings.Fields(prefill)); words != 40 || strings.TrimSpace(prefill) != prefill {
					t.Errorf("prefill %q: want the 40 delivered words, trailing space trimmed", prefill)
				}
			default:
				t.Fatal("the target never got a prefill")
			}
		})
	}
}
