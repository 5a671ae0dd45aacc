package sim

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
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
func askWire(t *testing.T, w prefillWire, url string, stream bool, p *string) (status int, body []byte, a prefillAnswer) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url+w.path(stream), strings.NewReader(w.body(stream, p)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(w.headers); i += 2 {
		req.Header.Set(w.headers[i], w.headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
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

// prefillCases are prefills of DefaultText in deltas of one word each:
// want is the answer, covered the deltas the prefill covers completely.
var prefillCases = []struct {
	name, prefill, want string
	covered             int
}{
	{"mid-delta", "The quick", " brown fox jumps over the lazy dog.", 1},
	{"mid-word", "The qu", "ick brown fox jumps over the lazy dog.", 1},
	{"delta boundary", "The quick ", "brown fox jumps over the lazy dog.", 2}, // Anthropic: trailing whitespace
	{"whole answer", DefaultText, "", prefillTokens},
	{"empty", "", DefaultText, 0},
}

// TestPrefillContinuation sends, on every wire, streaming and not, each
// prefill and its twin that is not a prefix (the first letter changed, the
// same length, so the same base input tokens): the prefill gets only the
// rest of the answer, and the input tokens it adds plus the output tokens
// of the rest are the output tokens of the full answer, which the twin gets.
func TestPrefillContinuation(t *testing.T) {
	for _, w := range prefillWires {
		t.Run(w.name, func(t *testing.T) {
			cfg := w.cfg
			cfg.Tokens = prefillTokens
			s, srv := serve(t, cfg)
			prefills := int64(0)
			for _, stream := range []bool{false, true} {
				for _, tc := range prefillCases {
					p := tc.prefill
					status, body, a := askWire(t, w, srv.URL, stream, &p)
					prefills++
					if rec := lastRecord(t, s); !rec.Prefilled || rec.Prefill != p {
						t.Errorf("stream %v %s: record prefill %v %q", stream, tc.name, rec.Prefilled, rec.Prefill)
					}
					if w.family == "anthropic" && strings.HasSuffix(p, " ") {
						if status != http.StatusBadRequest || !strings.Contains(string(body), `"`+PrefillTrailingWhitespace+`"`) ||
							(w.cfg.Wire == WireBedrock) != strings.HasPrefix(string(body), "ValidationException ") ||
							(w.cfg.Wire != WireBedrock) != strings.Contains(string(body), `"type":"invalid_request_error"`) {
							t.Errorf("stream %v %s: %d %s, want 400 trailing whitespace", stream, tc.name, status, body)
						}
						continue
					}
					if status != http.StatusOK || a.text != tc.want || a.output != prefillTokens-tc.covered {
						t.Errorf("stream %v %s: %d %q output %d, want %q output %d (%s)",
							stream, tc.name, status, a.text, a.output, tc.want, prefillTokens-tc.covered, body)
					}
					if rec := lastRecord(t, s); stream && (a.deltas != a.output || rec.Deltas != a.output) {
						t.Errorf("stream %s: %d deltas read, %d sent, output tokens %d", tc.name, a.deltas, rec.Deltas, a.output)
					}
					if p == "" {
						continue
					}
					twin := "X" + p[1:]
					status, body, full := askWire(t, w, srv.URL, stream, &twin)
					prefills++
					if status != http.StatusOK || full.text != DefaultText || full.output != prefillTokens {
						t.Fatalf("stream %v %s not a prefix: %d %q output %d (%s)", stream, tc.name, status, full.text, full.output, body)
					}
					if added := a.input - full.input; added != tc.covered || added+a.output != full.output {
						t.Errorf("stream %v %s: input %d, without a prefix %d: +%d, want +%d; +%d + output %d != %d",
							stream, tc.name, a.input, full.input, added, tc.covered, added, a.output, full.output)
					}
				}
			}
			status, body, a := askWire(t, w, srv.URL, true, nil)
			if status != http.StatusOK || a.text != DefaultText || a.output != prefillTokens || lastRecord(t, s).Prefilled {
				t.Errorf("no prefill: %d %q output %d (%s)", status, a.text, a.output, body)
			}
			if st := s.Stats(); st.Prefills != prefills || st.Requests != prefills+1 {
				t.Errorf("stats %+v, want %d prefills", st, prefills)
			}
		})
	}
}

// TestPrefillOff: a model without prefill refuses a conversation ending in
// an assistant turn with a 400 in the wire's shape that names "assistant
// message prefill", before any fault, and serves the others.
func TestPrefillOff(t *testing.T) {
	for _, w := range prefillWires {
		t.Run(w.name, func(t *testing.T) {
			cfg := w.cfg
			cfg.Prefill, cfg.Tokens = PrefillOff, prefillTokens
			cfg.Faults = []Fault{{Kind: FaultStatus, Status: 503, Count: 1}}
			s, srv := serve(t, cfg)
			for _, stream := range []bool{false, true} {
				p := "The quick"
				status, body, _ := askWire(t, w, srv.URL, stream, &p)
				var want string
				switch {
				case w.cfg.Wire == WireBedrock:
					want = "ValidationException " + string(mustJSON(map[string]string{"message": PrefillUnsupportedAnthropic}))
				case w.family == "anthropic":
					want = string(anthropicWire{}.errorBody(400, PrefillUnsupportedAnthropic))
				case w.family == "openai":
					want = `{"error":{"message":"` + PrefillUnsupportedOpenAI + `","type":"invalid_request_error","param":"messages","code":null}}`
				case w.family == "responses":
					want = `{"error":{"message":"` + PrefillUnsupportedOpenAI + `","type":"invalid_request_error","param":"input","code":null}}`
				case w.family == "gemini":
					want = `{"error":{"code":400,"message":"` + PrefillUnsupportedGemini + `","status":"INVALID_ARGUMENT"}}`
				}
				if status != http.StatusBadRequest || string(body) != want || !strings.Contains(want, "assistant message prefill") {
					t.Errorf("stream %v: %d %s\nwant 400 %s", stream, status, body, want)
				}
			}
			if st := s.Stats(); st.Prefills != 2 || st.Faulted != 0 {
				t.Errorf("stats %+v, want 2 prefills and no fault", st)
			}
			if status, _, _ := askWire(t, w, srv.URL, false, nil); status != http.StatusServiceUnavailable {
				t.Errorf("the fault: %d", status)
			}
			if status, body, a := askWire(t, w, srv.URL, true, nil); status != http.StatusOK || a.text != DefaultText {
				t.Errorf("no prefill: %d %q (%s)", status, a.text, body)
			}
		})
	}
}

// TestPrefillFaults: faults apply to a continuation, and after counts the
// deltas of the rest.
func TestPrefillFaults(t *testing.T) {
	for _, w := range prefillWires {
		t.Run(w.name, func(t *testing.T) {
			cfg := w.cfg
			cfg.Tokens = prefillTokens
			cfg.Faults = []Fault{{Kind: FaultCut, After: 2}}
			s, srv := serve(t, cfg)
			p := "The quick"
			status, body, a := askWire(t, w, srv.URL, true, &p)
			if status != http.StatusOK || a.text != " brown " || a.output != 0 || lastRecord(t, s).Deltas != 2 {
				t.Errorf("%d %q output %d, want \" brown \" cut (%s)", status, a.text, a.output, body)
			}
		})
	}
}

// TestPrefillSampling: sampled answers differ from one request to the next
// and from the configured text, keeping its first two words and its words;
// deterministic ones are the text. A prefix of the sampled answer is
// continued.
func TestPrefillSampling(t *testing.T) {
	sorted := func(s string) string {
		w := strings.Fields(s)
		slices.Sort(w)
		return strings.Join(w, " ")
	}
	for _, w := range prefillWires {
		t.Run(w.name, func(t *testing.T) {
			for _, sampling := range []string{"", SamplingDeterministic, SamplingSampled} {
				cfg := w.cfg
				cfg.Tokens, cfg.Sampling, cfg.Seed = prefillTokens, sampling, 7
				_, srv := serve(t, cfg)
				var texts []string
				for _, stream := range []bool{false, true, true} {
					status, body, a := askWire(t, w, srv.URL, stream, nil)
					if status != http.StatusOK || a.output != prefillTokens {
						t.Fatalf("%s: %d output %d (%s)", sampling, status, a.output, body)
					}
					texts = append(texts, a.text)
				}
				for i, text := range texts {
					switch {
					case sampling != SamplingSampled && text != DefaultText:
						t.Errorf("%q: answer %d %q, want %q", sampling, i, text, DefaultText)
					case sampling != SamplingSampled:
					case text == DefaultText || !strings.HasPrefix(text, "The quick ") || sorted(text) != sorted(DefaultText):
						t.Errorf("sampled answer %d %q", i, text)
					case i > 0 && text == texts[i-1]:
						t.Errorf("sampled answers %d and %d are both %q", i-1, i, text)
					}
				}
			}
		})
	}
}

func TestSample(t *testing.T) {
	r := &lockedRand{r: rand.New(rand.NewPCG(1, 2))}
	prev := ""
	for range 200 {
		got := r.sample("a b c d e")
		if got == "a b c d e" || got == prev || !strings.HasPrefix(got, "a b ") || len(got) != len("a b c d e") {
			t.Fatalf("sample %q after %q", got, prev)
		}
		prev = got
	}
	// Only one other order: it is used every time.
	for range 3 {
		if got := r.sample("a b c  d"); got != "a b d c" {
			t.Errorf("sample = %q, want a b d c", got)
		}
	}
	for _, text := range []string{"a b c", "a b c c c"} {
		if got := r.sample(text); got != text {
			t.Errorf("sample(%q) = %q", text, got)
		}
	}
}
