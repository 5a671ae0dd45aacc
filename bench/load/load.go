// Package load is the client side of the llm_hedge benchmark and soak:
// completion requests in both dialects, an HTTP client tuned for loopback
// load, and the check that a response is either complete or a clean error
// in the client's dialect. The bench program and the soak test share it.
package load

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"
)

// Kind is the shape of one request.
type Kind struct {
	OpenAI bool // OpenAI Chat Completions; else Anthropic Messages
	Stream bool
}

func (k Kind) String() string {
	s := "anthropic"
	if k.OpenAI {
		s = "openai"
	}
	if k.Stream {
		return s + "-stream"
	}
	return s
}

// Path is the endpoint of the kind's dialect.
func (k Kind) Path() string {
	if k.OpenAI {
		return "/v1/chat/completions"
	}
	return "/v1/messages"
}

// Kinds are the four request shapes, for a mixed workload.
var Kinds = []Kind{{false, true}, {false, false}, {true, true}, {true, false}}

// Body is a small completion request of kind k for model.
func Body(k Kind, model string) []byte {
	if k.OpenAI {
		return fmt.Appendf(nil, `{"model":%q,"stream":%t,"messages":[{"role":"user","content":"Write a short paragraph about the sea."}]}`, model, k.Stream)
	}
	return fmt.Appendf(nil, `{"model":%q,"max_tokens":1024,"stream":%t,"messages":[{"role":"user","content":"Write a short paragraph about the sea."}]}`, model, k.Stream)
}

// NewRequest builds a request of kind k with body to baseURL.
func NewRequest(ctx context.Context, baseURL string, k Kind, body []byte) *http.Request {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+k.Path(), bytes.NewReader(body))
	if err != nil {
		panic(err) // baseURL is ours
	}
	req.Header.Set("Content-Type", "application/json")
	if k.OpenAI {
		req.Header.Set("Authorization", "Bearer sk-load")
	} else {
		req.Header.Set("X-Api-Key", "sk-load")
		req.Header.Set("Anthropic-Version", "2023-06-01")
	}
	return req
}

// NewTransport is an HTTP/1.1 client transport for conns concurrent
// loopback connections: every connection stays pooled between requests,
// so the load measures the server, not connection setup.
func NewTransport(conns int) *http.Transport {
	return &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns * 2,
		MaxIdleConnsPerHost: conns * 2,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
		WriteBufferSize:     16 << 10,
		ReadBufferSize:      16 << 10,
	}
}

// Verdict is what a response turned out to be.
type Verdict int

const (
	Complete   Verdict = iota // the whole answer: a terminal event, or a complete JSON body
	CleanError                // an error in the client's dialect: a JSON error body, or an error event ending the stream
	Dirty                     // anything else: truncated, malformed, silent end, transport error
)

func (v Verdict) String() string {
	return [...]string{"complete", "clean_error", "dirty"}[v]
}

// Result is one request's outcome.
type Result struct {
	Verdict Verdict
	Status  int
	Reason  string // why it is a clean error or dirty
	Latency time.Duration
	Bytes   int
}

// Do sends one request of kind k and judges the response. buf is reused
// for the body (pass the same buffer from one worker).
func Do(ctx context.Context, c *http.Client, baseURL string, k Kind, body []byte, wantText string, buf *bytes.Buffer) Result {
	start := time.Now()
	resp, err := c.Do(NewRequest(ctx, baseURL, k, body))
	if err != nil {
		return Result{Verdict: Dirty, Reason: "transport: " + err.Error(), Latency: time.Since(start)}
	}
	buf.Reset()
	_, err = buf.ReadFrom(resp.Body)
	resp.Body.Close()
	res := Result{Status: resp.StatusCode, Latency: time.Since(start), Bytes: buf.Len()}
	if err != nil {
		res.Verdict, res.Reason = Dirty, fmt.Sprintf("status %d, reading body: %v", resp.StatusCode, err)
		return res
	}
	res.Verdict, res.Reason = Check(k, resp.StatusCode, resp.Header.Get("Content-Type"), buf.Bytes(), wantText)
	return res
}

// Check judges a whole response of kind k. wantText, when set, is the
// text a complete answer must carry.
func Check(k Kind, status int, contentType string, body []byte, wantText string) (Verdict, string) {
	if status != http.StatusOK {
		if msg, ok := errorBody(k, body); ok {
			return CleanError, fmt.Sprintf("status %d: %s", status, clip(msg))
		}
		return Dirty, fmt.Sprintf("status %d with a body that is not an error in the %s dialect: %s", status, k, clip(string(body)))
	}
	if !k.Stream {
		text, ok := completionText(k, body)
		if !ok {
			return Dirty, "200 body is not a complete completion: " + clip(string(body))
		}
		if wantText != "" && text != wantText {
			return Dirty, fmt.Sprintf("200 body text %q, want %q", clip(text), clip(wantText))
		}
		return Complete, ""
	}
	if !strings.HasPrefix(contentType, "text/event-stream") {
		return Dirty, "200 stream with Content-Type " + contentType
	}
	return checkStream(k, body, wantText)
}

// checkStream requires every event to carry JSON data (or [DONE]) and the
// stream to end with its terminal event, or with an error event after
// which nothing follows.
func checkStream(k Kind, body []byte, wantText string) (Verdict, string) {
	var text strings.Builder
	events := bytes.Split(bytes.TrimRight(body, "\n"), []byte("\n\n"))
	for i, raw := range events {
		name, data := parseEvent(raw)
		last := i == len(events)-1
		if k.OpenAI && string(data) == "[DONE]" {
			if !last {
				return Dirty, "events after [DONE]"
			}
			if wantText != "" && text.String() != wantText {
				return Dirty, fmt.Sprintf("stream text %q, want %q", clip(text.String()), clip(wantText))
			}
			return Complete, ""
		}
		if data == nil && name == "" {
			continue // a comment
		}
		var ev struct {
			Type  string          `json:"type"`
			Error json.RawMessage `json:"error"`
			Delta struct {
				Text string `json:"text"`
			} `json:"delta"`
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(data, &ev); err != nil {
			return Dirty, fmt.Sprintf("event %d carries data that is not JSON: %s", i, clip(string(raw)))
		}
		if name == "error" || ev.Type == "error" || len(ev.Error) > 0 {
			if !last {
				return Dirty, "events after an error event"
			}
			if msg, ok := errorBody(k, data); ok {
				return CleanError, "error event: " + clip(msg)
			}
			return Dirty, "error event not in the dialect's shape: " + clip(string(data))
		}
		text.WriteString(ev.Delta.Text)
		for _, c := range ev.Choices {
			text.WriteString(c.Delta.Content)
		}
		if !k.OpenAI && name == "message_stop" {
			if !last {
				return Dirty, "events after message_stop"
			}
			if wantText != "" && text.String() != wantText {
				return Dirty, fmt.Sprintf("stream text %q, want %q", clip(text.String()), clip(wantText))
			}
			return Complete, ""
		}
	}
	return Dirty, fmt.Sprintf("stream ended without its terminal event or an error event after %d events", len(events))
}

func parseEvent(raw []byte) (name string, data []byte) {
	for _, line := range bytes.Split(raw, []byte("\n")) {
		switch {
		case bytes.HasPrefix(line, []byte("event:")):
			name = string(bytes.TrimSpace(line[len("event:"):]))
		case bytes.HasPrefix(line, []byte("data:")):
			d := bytes.TrimPrefix(line[len("data:"):], []byte(" "))
			if data != nil {
				data = append(append(data, '\n'), d...)
			} else {
				data = append([]byte{}, d...)
			}
		}
	}
	return name, data
}

// errorBody reports whether b is an error object in k's dialect and
// returns its message.
func errorBody(k Kind, b []byte) (string, bool) {
	var e struct {
		Type  string `json:"type"`
		Error *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) != nil || e.Error == nil || e.Error.Message == "" || e.Error.Type == "" {
		return "", false
	}
	if !k.OpenAI && e.Type != "error" {
		return "", false
	}
	return e.Error.Type + ": " + e.Error.Message, true
}

// completionText returns the text of a complete non-streaming answer.
func completionText(k Kind, b []byte) (string, bool) {
	if k.OpenAI {
		var c struct {
			Object  string `json:"object"`
			Choices []struct {
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
		}
		if json.Unmarshal(b, &c) != nil || c.Object != "chat.completion" || len(c.Choices) == 0 || c.Choices[0].FinishReason == "" {
			return "", false
		}
		return c.Choices[0].Message.Content, true
	}
	var m struct {
		Type    string `json:"type"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		StopReason *string `json:"stop_reason"`
	}
	if json.Unmarshal(b, &m) != nil || m.Type != "message" || m.StopReason == nil {
		return "", false
	}
	var s strings.Builder
	for _, c := range m.Content {
		s.WriteString(c.Text)
	}
	return s.String(), true
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}
