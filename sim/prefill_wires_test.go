package sim

// The wires of the prefill tests: how to send a conversation to each and
// read its answer.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

// The answer of the prefill tests: DefaultText in one delta per word,
// "The ", "quick ", "brown ", ..., "dog.".
const prefillTokens = 9

// prefillWire is one wire the simulator serves, with what it takes to send
// a conversation to it and read the answer.
type prefillWire struct {
	name    string
	cfg     Config                     // Wire and Key
	family  string                     // the body: anthropic, openai, responses or gemini
	path    func(bool) string          // by stream
	body    func(bool, *string) string // by stream and prefill (nil: none)
	headers []string
}

var prefillWires = func() []prefillWire {
	anthropicMessages := func(p *string, blocks bool) string {
		m := `[{"role":"user","content":"hi"}`
		switch {
		case p != nil && blocks: // the text in two blocks, joined
			half := len(*p) / 2
			m += `,{"role":"assistant","content":[{"type":"text","text":` + string(mustJSON((*p)[:half])) +
				`},{"type":"text","text":` + string(mustJSON((*p)[half:])) + `}]}`
		case p != nil:
			m += `,{"role":"assistant","content":` + string(mustJSON(*p)) + `}`
		}
		return m + "]"
	}
	chat := func(stream bool, p *string, parts bool) string {
		m := `[{"role":"user","content":"hi"}`
		switch {
		case p != nil && parts:
			m += `,{"role":"assistant","content":[{"type":"text","text":` + string(mustJSON(*p)) + `}]}`
		case p != nil:
			m += `,{"role":"assistant","content":` + string(mustJSON(*p)) + `}`
		}
		return `{"model":"gpt-test","stream":` + string(mustJSON(stream)) +
			`,"stream_options":{"include_usage":true},"messages":` + m + `]}`
	}
	responses := func(stream bool, p *string, parts bool) string {
		in := `[{"role":"user","content":"hi"}`
		switch {
		case p != nil && parts:
			in += `,{"type":"message","role":"assistant","content":[{"type":"output_text","text":` + string(mustJSON(*p)) + `}]}`
		case p != nil:
			in += `,{"role":"assistant","content":` + string(mustJSON(*p)) + `}`
		}
		return `{"model":"gpt-test","stream":` + string(mustJSON(stream)) + `,"input":` + in + `]}`
	}
	gemini := func(_ bool, p *string) string {
		c := `[{"role":"user","parts":[{"text":"hi"}]}`
		if p != nil {
			c += `,{"role":"model","parts":[{"text":` + string(mustJSON(*p)) + `}]}`
		}
		return `{"contents":` + c + `]}`
	}
	pick := func(stream bool, yes, no string) string {
		if stream {
			return yes
		}
		return no
	}
	const vertexBase = "/v1/projects/p/locations/us-east5/publishers/"
	return []prefillWire{
		{name: "anthropic", family: "anthropic",
			path: func(bool) string { return "/v1/messages" },
			body: func(stream bool, p *string) string {
				return `{"model":"claude-test","max_tokens":100,"stream":` + string(mustJSON(stream)) + `,"messages":` + anthropicMessages(p, false) + `}`
			}},
		{name: "bedrock", family: "anthropic", cfg: Config{Wire: WireBedrock, Key: "k"},
			path: func(s bool) string {
				return pick(s, "/model/claude-test/invoke-with-response-stream", "/model/claude-test/invoke")
			},
			body: func(_ bool, p *string) string {
				return `{"anthropic_version":"bedrock-2023-05-31","max_tokens":100,"messages":` + anthropicMessages(p, true) + `}`
			},
			headers: []string{"Authorization", "Bearer k"}},
		{name: "vertex anthropic", family: "anthropic", cfg: Config{Wire: WireVertex, Key: "k"},
			path: func(s bool) string {
				return vertexBase + "anthropic/models/claude-test:" + pick(s, "streamRawPredict", "rawPredict")
			},
			body: func(stream bool, p *string) string {
				return `{"anthropic_version":"vertex-2023-10-16","max_tokens":100,"stream":` + string(mustJSON(stream)) + `,"messages":` + anthropicMessages(p, true) + `}`
			},
			headers: []string{"Authorization", "Bearer k"}},
		{name: "openai chat", family: "openai",
			path: func(bool) string { return "/v1/chat/completions" },
			body: func(s bool, p *string) string { return chat(s, p, false) }},
		{name: "azure chat", family: "openai", cfg: Config{Wire: WireAzure, Key: "k"},
			path:    func(bool) string { return "/openai/v1/chat/completions" },
			body:    func(s bool, p *string) string { return chat(s, p, true) },
			headers: []string{"Api-Key", "k"}},
		{name: "responses", family: "responses",
			path: func(bool) string { return "/v1/responses" },
			body: func(s bool, p *string) string { return responses(s, p, false) }},
		{name: "azure responses", family: "responses", cfg: Config{Wire: WireAzure, Key: "k"},
			path:    func(bool) string { return "/openai/v1/responses" },
			body:    func(s bool, p *string) string { return responses(s, p, true) },
			headers: []string{"Api-Key", "k"}},
		{name: "gemini", family: "gemini",
			path: func(s bool) string {
				return "/v1beta/models/gemini-x:" + pick(s, "streamGenerateContent?alt=sse", "generateContent")
			},
			body: gemini},
		{name: "vertex gemini", family: "gemini", cfg: Config{Wire: WireVertex, Key: "k"},
			path: func(s bool) string {
				return vertexBase + "google/models/gemini-x:" + pick(s, "streamGenerateContent?alt=sse", "generateContent")
			},
			body:    gemini,
			headers: []string{"Authorization", "Bearer k"}},
	}
}()

// prefillAnswer is what a client read: the text, the usage, and the
// count of content deltas of a stream.
type prefillAnswer struct {
	text          string
	input, output int
	deltas        int
}

// askWire sends a conversation to the wire and reads the answer; body is
// the raw body of an error.
func askWire(t *testing.T, w prefillWire, srv *httptest.Server, stream bool, p *string) (status int, body []byte, a prefillAnswer) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+w.path(stream), strings.NewReader(w.body(stream, p)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(w.headers); i += 2 {
		req.Header.Set(w.headers[i], w.headers[i+1])
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the body: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		if w.cfg.Wire == WireBedrock {
			body = append([]byte(resp.Header.Get("X-Amzn-Errortype")+" "), body...)
		}
		return resp.StatusCode, body, a
	}
	var frames []string
	switch {
	case !stream:
		frames = []string{string(body)}
	case w.cfg.Wire == WireBedrock:
		frames = bedrockChunks(t, body)
	case w.family == "gemini":
		for f := range strings.SplitSeq(strings.TrimSuffix(string(body), "\r\n\r\n"), "\r\n\r\n") {
			frames = append(frames, strings.TrimPrefix(f, "data: "))
		}
	default:
		events, err := readEvents(bytes.NewReader(body))
		if !errors.Is(err, io.EOF) {
			t.Fatalf("reading the events: %v", err)
		}
		for _, ev := range events {
			frames = append(frames, ev.data)
		}
	}
	for _, f := range frames {
		if f != "[DONE]" {
			readFrame(t, w.family, stream, f, &a)
		}
	}
	return resp.StatusCode, body, a
}

// bedrockChunks decodes the event-stream frames into the Anthropic events
// they carry.
func bedrockChunks(t *testing.T, body []byte) []string {
	var out []string
	r, dec := bytes.NewReader(body), eventstream.NewDecoder()
	for r.Len() > 0 {
		msg, err := dec.Decode(r, nil)
		if err != nil {
			t.Fatalf("decoding a frame: %v", err)
		}
		var c struct{ Bytes string }
		json.Unmarshal(msg.Payload, &c)
		data, err := base64.StdEncoding.DecodeString(c.Bytes)
		if err != nil {
			t.Fatalf("frame %s: %v", msg.Payload, err)
		}
		out = append(out, string(data))
	}
	return out
}

// readFrame adds one event (or the whole non-streaming body) of a family to a.
func readFrame(t *testing.T, family string, stream bool, data string, a *prefillAnswer) {
	t.Helper()
	var f struct {
		Type    string          `json:"type"`
		Delta   json.RawMessage `json:"delta"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		Choices []struct {
			Delta, Message struct {
				Content string `json:"content"`
			}
		} `json:"choices"`
		Output []struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"output"`
		Response struct {
			Usage *responsesUsage `json:"usage"`
		} `json:"response"`
		Candidates []struct {
			Content struct {
				Parts []struct {
					Text string `json:"text"`
				} `json:"parts"`
			} `json:"content"`
		} `json:"candidates"`
		Usage         json.RawMessage `json:"usage"`
		UsageMetadata *struct {
			PromptTokenCount, CandidatesTokenCount int
		} `json:"usageMetadata"`
	}
	if err := json.Unmarshal([]byte(data), &f); err != nil {
		t.Fatalf("%s event %q: %v", family, data, err)
	}
	usage := func(raw json.RawMessage) {
		var m map[string]any
		if json.Unmarshal(raw, &m) == nil && m != nil {
			num := func(k string) int { v, _ := m[k].(float64); return int(v) }
			a.input, a.output = num("input_tokens")+num("prompt_tokens"), num("output_tokens")+num("completion_tokens")
		}
	}
	text := ""
	switch family {
	case "anthropic":
		if !stream && len(f.Content) > 0 {
			text = f.Content[0].Text
		}
		if f.Type == "content_block_delta" {
			var d struct{ Text string }
			json.Unmarshal(f.Delta, &d)
			text = d.Text
		}
		if f.Type == "message_delta" || !stream {
			usage(f.Usage)
		}
	case "openai":
		if len(f.Choices) > 0 {
			text = f.Choices[0].Delta.Content + f.Choices[0].Message.Content
		}
		usage(f.Usage)
	case "responses":
		if !stream && len(f.Output) > 0 && len(f.Output[0].Content) > 0 {
			text = f.Output[0].Content[0].Text
			usage(f.Usage)
		}
		if f.Type == "response.output_text.delta" {
			json.Unmarshal(f.Delta, &text)
		}
		if f.Type == "response.completed" {
			a.input, a.output = f.Response.Usage.InputTokens, f.Response.Usage.OutputTokens
		}
	case "gemini":
		if len(f.Candidates) > 0 && len(f.Candidates[0].Content.Parts) > 0 {
			text = f.Candidates[0].Content.Parts[0].Text
		}
		if m := f.UsageMetadata; m != nil && (m.CandidatesTokenCount > 0 || !stream || text == "") {
			a.input, a.output = m.PromptTokenCount, m.CandidatesTokenCount
		}
	}
	a.text += text
	if text != "" {
		a.deltas++
	}
}
