package sim

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
)

func anthropicClient(srv *httptest.Server, key string) anthropic.Client {
	return anthropic.NewClient(
		aoption.WithBaseURL(srv.URL),
		aoption.WithAPIKey(key),
		aoption.WithMaxRetries(0),
		aoption.WithHTTPClient(srv.Client()),
	)
}

func openaiClient(srv *httptest.Server, key string) openai.Client {
	return openai.NewClient(
		ooption.WithBaseURL(srv.URL+"/v1"),
		ooption.WithAPIKey(key),
		ooption.WithMaxRetries(0),
		ooption.WithHTTPClient(srv.Client()),
	)
}

var anthropicParams = anthropic.MessageNewParams{
	Model:     "claude-test",
	MaxTokens: 100,
	Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say something."))},
}

var openaiParams = openai.ChatCompletionNewParams{
	Model:    "gpt-test",
	Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say something.")},
}

func TestAnthropicSDK(t *testing.T) {
	tests := []struct {
		name      string
		cfg       Config
		stream    bool
		wantText  string
		wantModel string
	}{
		{"default", Config{}, false, "The quick brown fox jumps over the lazy dog. The quick brown", "claude-test"},
		{"default stream", Config{}, true, "The quick brown fox jumps over the lazy dog. The quick brown", "claude-test"},
		{"configured", Config{Text: "Hello there, world.", Tokens: 2, Model: "claude-sim", CacheRead: 42, Pings: new(3)}, false, "Hello there, world.", "claude-sim"},
		{"configured stream", Config{Text: "Hello there, world.", Tokens: 2, Model: "claude-sim", CacheRead: 42, Pings: new(3)}, true, "Hello there, world.", "claude-sim"},
		{"no pings stream", Config{Pings: new(0), Tokens: 1, Text: "ok"}, true, "ok", "claude-test"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, srv := serve(t, tt.cfg)
			client := anthropicClient(srv, "test")
			var msg anthropic.Message
			if tt.stream {
				stream := client.Messages.NewStreaming(t.Context(), anthropicParams)
				for stream.Next() {
					if err := msg.Accumulate(stream.Current()); err != nil {
						t.Fatalf("accumulating: %v", err)
					}
				}
				if err := stream.Err(); err != nil {
					t.Fatalf("stream: %v", err)
				}
				stream.Close()
			} else {
				m, err := client.Messages.New(t.Context(), anthropicParams)
				if err != nil {
					t.Fatalf("Messages.New: %v", err)
				}
				msg = *m
			}

			cfg := s.Config()
			if len(msg.Content) != 1 || msg.Content[0].Text != tt.wantText {
				t.Errorf("content = %+v, want one text block %q", msg.Content, tt.wantText)
			}
			if msg.Model != tt.wantModel || msg.Role != "assistant" || msg.StopReason != anthropic.StopReasonEndTurn {
				t.Errorf("model, role, stop = %q, %q, %q", msg.Model, msg.Role, msg.StopReason)
			}
			if !strings.HasPrefix(msg.ID, "msg_sim_") {
				t.Errorf("id = %q, want msg_sim_...", msg.ID)
			}
			u := msg.Usage
			if u.OutputTokens != int64(cfg.Tokens) || u.InputTokens < 1 || u.CacheReadInputTokens != int64(cfg.CacheRead) {
				t.Errorf("usage = %+v, want output %d, input >= 1, cache read %d", u, cfg.Tokens, cfg.CacheRead)
			}

			rec := lastRecord(t, s)
			if rec.Model != "claude-test" || rec.Stream != tt.stream || rec.Status != http.StatusOK || rec.Deltas != cfg.Tokens {
				t.Errorf("record = %+v", rec)
			}
			if rec.APIKey != "test" || rec.BodySize == 0 || rec.FirstDelta.IsZero() || rec.End.Before(rec.FirstDelta) || rec.Canceled {
				t.Errorf("record = %+v", rec)
			}
			if want := max(1, int(rec.BodySize)/4); u.InputTokens != int64(want) {
				t.Errorf("input tokens = %d, want body/4 = %d", u.InputTokens, want)
			}
		})
	}
}

func TestOpenAISDK(t *testing.T) {
	tests := []struct {
		name         string
		cfg          Config
		stream       bool
		includeUsage bool
		wantText     string
	}{
		{"default", Config{}, false, false, "The quick brown fox jumps over the lazy dog. The quick brown"},
		{"stream with usage", Config{}, true, true, "The quick brown fox jumps over the lazy dog. The quick brown"},
		{"stream without usage", Config{}, true, false, "The quick brown fox jumps over the lazy dog. The quick brown"},
		{"configured", Config{Text: "One two three four", Tokens: 3, CacheRead: 7}, false, false, "One two three four"},
		{"configured stream", Config{Text: "One two three four", Tokens: 3, CacheRead: 7}, true, true, "One two three four"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, srv := serve(t, tt.cfg)
			client := openaiClient(srv, "test")
			params := openaiParams
			if tt.includeUsage {
				params.StreamOptions.IncludeUsage = openai.Bool(true)
			}
			var got openai.ChatCompletion
			if tt.stream {
				var acc openai.ChatCompletionAccumulator
				stream := client.Chat.Completions.NewStreaming(t.Context(), params)
				for stream.Next() {
					if !acc.AddChunk(stream.Current()) {
						t.Fatalf("chunk rejected: %+v", stream.Current())
					}
				}
				if err := stream.Err(); err != nil {
					t.Fatalf("stream: %v", err)
				}
				stream.Close()
				got = acc.ChatCompletion
			} else {
				c, err := client.Chat.Completions.New(t.Context(), params)
				if err != nil {
					t.Fatalf("Completions.New: %v", err)
				}
				got = *c
			}

			cfg := s.Config()
			if len(got.Choices) != 1 || got.Choices[0].Message.Content != tt.wantText || got.Choices[0].FinishReason != "stop" {
				t.Fatalf("choices = %+v, want %q finished by stop", got.Choices, tt.wantText)
			}
			if got.Model != "gpt-test" || !strings.HasPrefix(got.ID, "chatcmpl-sim-") {
				t.Errorf("model, id = %q, %q", got.Model, got.ID)
			}
			u := got.Usage
			if tt.stream && !tt.includeUsage {
				if u.TotalTokens != 0 {
					t.Errorf("usage without include_usage = %+v", u)
				}
				return
			}
			if u.CompletionTokens != int64(cfg.Tokens) || u.PromptTokens < 1+int64(cfg.CacheRead) ||
				u.TotalTokens != u.PromptTokens+u.CompletionTokens || u.PromptTokensDetails.CachedTokens != int64(cfg.CacheRead) {
				t.Errorf("usage = %+v", u)
			}
			if rec := lastRecord(t, s); rec.Authorization != "Bearer test" || rec.Deltas != cfg.Tokens {
				t.Errorf("record = %+v", rec)
			}
		})
	}
}

func TestModelsAndCountTokens(t *testing.T) {
	_, srv := serve(t, Config{Model: "sim-model"})

	aclient, oclient := anthropicClient(srv, "k"), openaiClient(srv, "k")
	ap, err := aclient.Models.List(t.Context(), anthropic.ModelListParams{})
	if err != nil || len(ap.Data) != 1 || ap.Data[0].ID != "sim-model" {
		t.Errorf("anthropic models = %+v, %v", ap, err)
	}
	op, err := oclient.Models.List(t.Context())
	if err != nil || len(op.Data) != 1 || op.Data[0].ID != "sim-model" {
		t.Errorf("openai models = %+v, %v", op, err)
	}
	count, err := aclient.Messages.CountTokens(t.Context(), anthropic.MessageCountTokensParams{
		Model:    "claude-test",
		Messages: anthropicParams.Messages,
	})
	if err != nil || count.InputTokens < 1 {
		t.Errorf("count_tokens = %+v, %v", count, err)
	}
}

func TestKey(t *testing.T) {
	s, srv := serve(t, Config{Key: "right"})

	wrongA, wrongO := anthropicClient(srv, "wrong"), openaiClient(srv, "wrong")
	rightA, rightO := anthropicClient(srv, "right"), openaiClient(srv, "right")
	_, err := wrongA.Messages.New(t.Context(), anthropicParams)
	var aerr *anthropic.Error
	if !errors.As(err, &aerr) || aerr.StatusCode != http.StatusUnauthorized || aerr.Type() != "authentication_error" {
		t.Errorf("anthropic with a wrong key: %v", err)
	}
	_, err = wrongO.Chat.Completions.New(t.Context(), openaiParams)
	var oerr *openai.Error
	if !errors.As(err, &oerr) || oerr.StatusCode != http.StatusUnauthorized || oerr.Code != "invalid_api_key" {
		t.Errorf("openai with a wrong key: %v", err)
	}
	if _, err := rightA.Messages.New(t.Context(), anthropicParams); err != nil {
		t.Errorf("anthropic with the right key: %v", err)
	}
	if _, err := rightO.Chat.Completions.New(t.Context(), openaiParams); err != nil {
		t.Errorf("openai with the right key: %v", err)
	}

	recs := s.Requests()
	if len(recs) != 4 || recs[0].APIKey != "wrong" || recs[1].Authorization != "Bearer wrong" || recs[0].Status != 401 {
		t.Errorf("records = %+v", recs)
	}
}
