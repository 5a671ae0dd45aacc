package load

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

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

// streamEvent is what any dialect's stream event may carry.
type streamEvent struct {
	Type    string          `json:"type"`
	Error   json.RawMessage `json:"error"`
	Delta   json.RawMessage `json:"delta"` // Anthropic: {"text"}; Responses: a string
	Choices []struct {
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
	} `json:"choices"`
	Candidates []geminiCandidate `json:"candidates"`
}

type geminiCandidate struct {
	Content struct {
		Parts []struct {
			Text    string `json:"text"`
			Thought bool   `json:"thought"`
		} `json:"parts"`
	} `json:"content"`
	FinishReason string `json:"finishReason"`
}

func (c *geminiCandidate) text() string {
	var s strings.Builder
	for _, p := range c.Content.Parts {
		if !p.Thought {
			s.WriteString(p.Text)
		}
	}
	return s.String()
}

// checkStream requires every event to carry JSON data (or [DONE]) and the
// stream to end with its terminal event (a Gemini stream: a chunk with a
// finishReason), or with an error event after which nothing follows.
func checkStream(k Kind, body []byte, wantText string) (Verdict, string) {
	var text strings.Builder
	complete := func(last bool, what string) (Verdict, string) {
		if !last {
			return Dirty, "events after " + what
		}
		if wantText != "" && text.String() != wantText {
			return Dirty, fmt.Sprintf("stream text %q, want %q", clip(text.String()), clip(wantText))
		}
		return Complete, ""
	}
	body = bytes.ReplaceAll(body, []byte("\r\n"), []byte("\n")) // Gemini's lines end in CRLF
	events := bytes.Split(bytes.TrimRight(body, "\n"), []byte("\n\n"))
	finished := false // a Gemini chunk with a finishReason was the last so far
	for i, raw := range events {
		name, data := parseEvent(raw)
		last := i == len(events)-1
		if k.Dialect == OpenAI && string(data) == "[DONE]" {
			return complete(last, "[DONE]")
		}
		if data == nil && name == "" {
			continue // a comment
		}
		var ev streamEvent
		if err := json.Unmarshal(data, &ev); err != nil {
			return Dirty, fmt.Sprintf("event %d carries data that is not JSON: %s", i, clip(string(raw)))
		}
		if name == "error" || ev.Type == "error" || len(ev.Error) > 0 && string(ev.Error) != "null" {
			if !last {
				return Dirty, "events after an error event"
			}
			if msg, ok := errorBody(k, data); ok {
				return CleanError, "error event: " + clip(msg)
			}
			return Dirty, "error event not in the dialect's shape: " + clip(string(data))
		}
		switch k.Dialect {
		case Anthropic:
			var d struct {
				Text string `json:"text"`
			}
			_ = json.Unmarshal(ev.Delta, &d)
			text.WriteString(d.Text)
			if name == "message_stop" {
				return complete(last, "message_stop")
			}
		case OpenAI:
			for _, c := range ev.Choices {
				text.WriteString(c.Delta.Content)
			}
		case Responses:
			switch ev.Type {
			case "response.output_text.delta":
				var d string
				_ = json.Unmarshal(ev.Delta, &d)
				text.WriteString(d)
			case "response.completed", "response.incomplete":
				return complete(last, ev.Type)
			case "response.failed":
				if !last {
					return Dirty, "events after response.failed"
				}
				return CleanError, "response.failed"
			}
		case Gemini:
			finished = false
			for _, c := range ev.Candidates {
				text.WriteString(c.text())
				finished = finished || c.FinishReason != ""
			}
			if finished && last {
				return complete(true, "")
			}
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
			Status  string `json:"status"` // Gemini's
			Code    any    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) != nil || e.Error == nil || e.Error.Message == "" {
		return "", false
	}
	switch k.Dialect {
	case Gemini:
		if e.Error.Status == "" || e.Error.Code == nil {
			return "", false
		}
		return e.Error.Status + ": " + e.Error.Message, true
	case Anthropic:
		if e.Type != "error" {
			return "", false
		}
	}
	if e.Error.Type == "" {
		return "", false
	}
	return e.Error.Type + ": " + e.Error.Message, true
}

// completionText returns the text of a complete non-streaming answer.
func completionText(k Kind, b []byte) (string, bool) {
	switch k.Dialect {
	case OpenAI:
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
	case Responses:
		var r struct {
			Object string `json:"object"`
			Status string `json:"status"`
			Output []struct {
				Type    string `json:"type"`
				Content []struct {
					Type string `json:"type"`
					Text string `json:"text"`
				} `json:"content"`
			} `json:"output"`
		}
		if json.Unmarshal(b, &r) != nil || r.Object != "response" || r.Status != "completed" {
			return "", false
		}
		var s strings.Builder
		for _, o := range r.Output {
			for _, c := range o.Content {
				if o.Type == "message" && c.Type == "output_text" {
					s.WriteString(c.Text)
				}
			}
		}
		return s.String(), true
	case Gemini:
		var g struct {
			Candidates []geminiCandidate `json:"candidates"`
		}
		if json.Unmarshal(b, &g) != nil || len(g.Candidates) == 0 || g.Candidates[0].FinishReason == "" {
			return "", false
		}
		return g.Candidates[0].text(), true
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
