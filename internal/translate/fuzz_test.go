package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// checkAnthropicStream holds a client stream to Anthropic's grammar: one
// message_start first; blocks started at 0, 1, 2... and stopped before the
// next starts; deltas only into the open block, of its kind; tool input
// that parses as an object at its stop; message_delta then message_stop
// last, or an error event last. clean reports message_stop.
func checkAnthropicStream(t testing.TB, out []byte) (clean bool, err error) {
	started, open, next, delta := false, -1, 0, false
	kind := ""
	var input []byte
	evs := sseEvents(t, out)
	for i, ev := range evs {
		var e struct {
			Type         string
			Index        int
			ContentBlock struct{ Type string } `json:"content_block"`
			Delta        struct {
				Type        string
				PartialJSON string  `json:"partial_json"`
				StopReason  *string `json:"stop_reason"`
			}
		}
		if jerr := json.Unmarshal(ev.Data, &e); jerr != nil {
			return false, fmt.Errorf("event %d is not JSON: %v", i, jerr)
		}
		if e.Type != string(ev.Name) {
			return false, fmt.Errorf("event %d: name %q, type %q", i, ev.Name, e.Type)
		}
		last := i == len(evs)-1
		switch e.Type {
		case "error":
			if !last {
				return false, fmt.Errorf("events after the error event")
			}
			return false, nil
		case "message_start":
			if started {
				return false, fmt.Errorf("second message_start")
			}
			started = true
		case "content_block_start":
			if !started || open >= 0 || delta || e.Index != next {
				return false, fmt.Errorf("content_block_start %d (open %d, next %d)", e.Index, open, next)
			}
			open, kind, input = e.Index, e.ContentBlock.Type, input[:0]
			next++
		case "content_block_delta":
			if e.Index != open {
				return false, fmt.Errorf("delta for %d, open %d", e.Index, open)
			}
			if (kind == "text") != (e.Delta.Type == "text_delta") {
				return false, fmt.Errorf("%s delta into a %s block", e.Delta.Type, kind)
			}
			input = append(input, e.Delta.PartialJSON...)
		case "content_block_stop":
			if e.Index != open {
				return false, fmt.Errorf("stop for %d, open %d", e.Index, open)
			}
			if kind == "tool_use" && (!json.Valid(input) || bytes.TrimSpace(input)[0] != '{') {
				return false, fmt.Errorf("tool input %q does not parse as an object", input)
			}
			open = -1
		case "message_delta":
			if !started || open >= 0 || delta || e.Delta.StopReason == nil || !anthropicStopReasons[*e.Delta.StopReason] {
				return false, fmt.Errorf("message_delta out of place or without a stop reason: %s", ev.Data)
			}
			delta = true
		case "message_stop":
			if !delta {
				return false, fmt.Errorf("message_stop without message_delta")
			}
			if !last {
				return false, fmt.Errorf("events after message_stop")
			}
			return true, nil
		default:
			return false, fmt.Errorf("unknown event %q", e.Type)
		}
	}
	return false, nil
}

// fuzzStream runs one pair's stream decoder on arbitrary target bytes: it
// never panics, its output always follows the client's grammar, and it
// stops cleanly only when it reported no error (or the error came after
// the clean stop).
func fuzzStream(f *testing.F, client, target, seedDir string, check func(testing.TB, []byte) (bool, error)) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", seedDir, "*.sse"))
	for _, s := range seeds {
		b, _ := os.ReadFile(s)
		f.Add(b)
	}
	p, _ := For(client, target)
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := runStream(p, data, nil)
		clean, gerr := check(t, out)
		if gerr != nil {
			t.Fatalf("client stream breaks the grammar: %v\n%s", gerr, out)
		}
		if err == nil && !clean {
			t.Fatalf("no error and no clean stop\n%s", out)
		}
		if err != nil && clean && !errors.Is(err, ErrAfterEnd) {
			t.Fatalf("clean stop, then %v", err)
		}
	})
}

func FuzzChatToAnthropicStream(f *testing.F) {
	fuzzStream(f, Anthropic, OpenAI, "chat", checkAnthropicStream)
}

func FuzzAnthropicToResponsesStream(f *testing.F) {
	fuzzStream(f, Responses, Anthropic, "anthropic", checkResponsesClean)
}

func FuzzGeminiToAnthropicStream(f *testing.F) {
	fuzzStream(f, Anthropic, Gemini, "gemini", checkAnthropicStream)
}

func FuzzResponsesToAnthropicStream(f *testing.F) {
	fuzzStream(f, Anthropic, Responses, "responses", checkAnthropicStream)
}

func FuzzAnthropicToChatStream(f *testing.F) {
	fuzzStream(f, OpenAI, Anthropic, "anthropic", checkChatStream)
}

func FuzzGeminiToChatStream(f *testing.F) {
	fuzzStream(f, OpenAI, Gemini, "gemini", checkChatStream)
}

func FuzzResponsesToChatStream(f *testing.F) {
	fuzzStream(f, OpenAI, Responses, "responses", checkChatStream)
}

func FuzzAnthropicToGeminiClientStream(f *testing.F) {
	fuzzStream(f, Gemini, Anthropic, "anthropic", checkGeminiClean)
}

func FuzzChatToGeminiClientStream(f *testing.F) {
	fuzzStream(f, Gemini, OpenAI, "chat", checkGeminiClean)
}

func FuzzGeminiToResponsesStream(f *testing.F) {
	fuzzStream(f, Responses, Gemini, "gemini", checkResponsesClean)
}

func FuzzChatToResponsesStream(f *testing.F) {
	fuzzStream(f, Responses, OpenAI, "chat", checkResponsesClean)
}
