package main

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/llmhedge/caddy-llm-hedge/bench/load"
)

// benchMode is one response shape of the comparison: the request the load
// generator sends, the simulator's answer size, and the cheap check that
// an answer is complete (the load generator must not be the bottleneck).
type benchMode struct {
	tokens int               // output tokens of the simulator's answer
	path   string            // request path, with its query
	header map[string]string // besides Content-Type: application/json
	body   []byte
	check  func(b []byte) error // b is a 200 response's whole body
	events func(b []byte) int   // events of a complete answer; nil: countEvents

	// A cloud mode (bedrock.go): the simulators' wire, the request
	// direct and reverse_proxy send instead (the cloud's own), and further
	// llm_hedge configurations of this mode only.
	wire  string
	raw   *benchMode
	extra []string

	// A translating mode (translate.go): the client's format, and the
	// format llm_hedge's providers speak, translating the client's.
	client, translate string

	// api is the `api` of llm_hedge_key's provider (agent.go): the
	// client format's own; "" where llm_hedge already has api and key.
	api string
}

const prompt = "Write a short paragraph about the sea."

// benchModes are the response shapes, by -modes name. The three streams carry
// the same streamTokens output tokens, each in its own API's events.
var benchModes = map[string]benchMode{
	"non-stream": anthropicMode(load.Kind{}),
	"stream":     anthropicMode(load.Kind{Stream: true}),
	"responses-stream": {
		tokens: streamTokens,
		path:   "/v1/responses",
		header: map[string]string{"Authorization": "Bearer sk-load"},
		api:    "openai",
		body:   fmt.Appendf(nil, `{"model":"gpt-bench","stream":true,"store":false,"max_output_tokens":1024,"input":%q}`, prompt),
		check:  checkResponsesStream,
	},
	"openai-stream": {
		tokens: streamTokens,
		path:   "/v1/chat/completions",
		header: map[string]string{"Authorization": "Bearer sk-load"},
		api:    "openai",
		body:   fmt.Appendf(nil, `{"model":"gpt-bench","stream":true,"stream_options":{"include_usage":true},"max_tokens":1024,"messages":[{"role":"user","content":%q}]}`, prompt),
		check:  checkChatStream,
	},
	"gemini-stream": {
		tokens: streamTokens,
		path:   "/v1beta/models/gemini-bench:streamGenerateContent?alt=sse",
		header: map[string]string{"X-Goog-Api-Key": "sk-load"},
		api:    "gemini",
		body:   fmt.Appendf(nil, `{"contents":[{"role":"user","parts":[{"text":%q}]}],"generationConfig":{"maxOutputTokens":1024}}`, prompt),
		check:  checkGeminiStream,
	},
	"bedrock-stream": bedrockStreamMode(),
	// translate-stream/<client>-<target> and translate-stream: translate.go.
}

// anthropicMode is an Anthropic Messages shape; its answer ends in
// message_stop (stream) or carries "stop_reason":"end_turn".
func anthropicMode(k load.Kind) benchMode {
	m := benchMode{
		tokens: nonStreamTokens,
		path:   k.Path("claude-bench"),
		header: map[string]string{"X-Api-Key": "sk-load", "Anthropic-Version": "2023-06-01"},
		api:    "anthropic",
		body:   load.Body(k, "claude-bench"),
		check: func(b []byte) error {
			if !bytes.Contains(b, []byte(`"stop_reason":"end_turn"`)) {
				return fmt.Errorf("incomplete body: %.200s", b)
			}
			return nil
		},
	}
	if k.Stream {
		m.tokens = streamTokens
		m.check = func(b []byte) error {
			if !bytes.HasSuffix(b, []byte("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")) {
				return fmt.Errorf("stream without message_stop: %.200s", b[max(0, len(b)-200):])
			}
			return nil
		}
	}
	return m
}

func (m benchMode) newRequest(ctx context.Context, baseURL string) *http.Request {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+m.path, bytes.NewReader(m.body))
	if err != nil {
		panic(err) // baseURL is ours
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range m.header {
		req.Header.Set(k, v)
	}
	return req
}

// lastEvent splits off the stream's last event: the body must end with
// the blank line (LF or CRLF) that closes it.
func lastEvent(b []byte) ([]byte, bool) {
	var body []byte
	switch {
	case bytes.HasSuffix(b, []byte("\r\n\r\n")):
		body = b[:len(b)-4]
	case bytes.HasSuffix(b, []byte("\n\n")):
		body = b[:len(b)-2]
	default:
		return nil, false
	}
	i := max(bytes.LastIndex(body, []byte("\n\n")), bytes.LastIndex(body, []byte("\r\n\r\n")))
	if i < 0 {
		return body, true
	}
	return bytes.TrimLeft(body[i:], "\r\n"), true
}

// checkResponsesStream requires the last event to be response.completed.
func checkResponsesStream(b []byte) error {
	ev, ok := lastEvent(b)
	if !ok || !bytes.HasPrefix(ev, []byte("event: response.completed\ndata: {\"type\":\"response.completed\"")) {
		return fmt.Errorf("stream without response.completed: %.200s", b[max(0, len(b)-200):])
	}
	return nil
}

// checkChatStream requires the [DONE] that ends an OpenAI chat stream.
func checkChatStream(b []byte) error {
	ev, ok := lastEvent(b)
	if !ok || !bytes.HasPrefix(ev, []byte("data: [DONE]")) {
		return fmt.Errorf("stream without [DONE]: %.200s", b[max(0, len(b)-200):])
	}
	return nil
}

// checkGeminiStream requires the last chunk to carry a finishReason.
func checkGeminiStream(b []byte) error {
	ev, ok := lastEvent(b)
	if !ok || !bytes.HasPrefix(ev, []byte("data: {")) || !bytes.Contains(ev, []byte(`"finishReason":"`)) {
		return fmt.Errorf("stream without a finishReason chunk: %.200s", b[max(0, len(b)-200):])
	}
	return nil
}

// countEvents counts the events of m's complete answer b.
func (m benchMode) countEvents(b []byte) int {
	if m.events != nil {
		return m.events(b)
	}
	return countEvents(b)
}

// countEvents counts the SSE events of a stream body (0 for JSON).
func countEvents(b []byte) int {
	if bytes.HasPrefix(b, []byte("{")) {
		return 0
	}
	return bytes.Count(b, []byte("\n\n")) + bytes.Count(b, []byte("\r\n\r\n"))
}

// fileName is mode as a part of a file name (the scratch directory's
// Caddyfiles and logs, -profile's files): a translating mode's slash
// becomes '_'.
func fileName(mode string) string { return strings.ReplaceAll(mode, "/", "_") }

// parseModes reads -modes: mode names, and translate-all for every
// translating mode beside the native streams (translateAllModes),
// agent-all for every agent mode (agent.go); a mode
// named twice runs once.
func parseModes(s string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		names := []string{f}
		switch {
		case f == translateAll:
			names = translateAllModes()
		case f == agentAll:
			names = agentModeNames
		}
		if _, ok := benchModes[f]; !ok && len(names) == 1 {
			return nil, fmt.Errorf("unknown mode %q (have %s)", f, modeNames())
		}
		for _, n := range names {
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	return out, nil
}

// modeNames lists the -modes values.
func modeNames() string {
	names := []string{"non-stream", "stream", "openai-stream", "responses-stream", "gemini-stream", "bedrock-stream", "translate-stream"}
	for _, n := range slices.Sorted(maps.Keys(benchModes)) {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return strings.Join(append(names, translateAll, agentAll), ", ")
}
