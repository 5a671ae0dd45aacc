package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
	"google.golang.org/genai"

	"github.com/llmhedge/caddy-llm-hedge/internal/engine"
	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// Phase 2 of cross-vendor translation (issue 56), end to end with the
// official SDKs as clients: every new pair serves the scripted tool loop
// (the call with its id, name and arguments, the result round trip to the
// answer), a plain answer and a length stop, streamed and not, through a
// pool whose same-format provider answers 529; finish reasons and usage
// (cache reads included) in the client's words; the header naming the
// pair; and each translated upstream request reads as the target SDK's
// parameters.
//
// The simulator scripts one call per turn (sim.Config.ToolCalls: the first
// offered tool is called), so parallel calls to one function are not
// exercised here; the translate package's goldens and property tests
// cover them.

// xl2Cached is the cache-read input tokens every target reports.
const xl2Cached = 7

// xl2Exchange is one request a recorded upstream served: its path, its
// body and the bytes of its answer.
type xl2Exchange struct {
	path       string
	req, reply []byte
}

// xl2Upstream is a simulator behind a recorder: every finished exchange is
// sent on ex (buffered), so a test waits for it instead of sleeping.
type xl2Upstream struct {
	*upstream
	ex chan xl2Exchange
}

func newXL2Upstream(t *testing.T, cfg sim.Config) *xl2Upstream {
	t.Helper()
	if cfg.Tokens == 0 {
		cfg.Tokens = 9
	}
	s := sim.New(cfg)
	u := &xl2Upstream{ex: make(chan xl2Exchange, 64)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		tw := &teeWriter{ResponseWriter: w}
		s.ServeHTTP(tw, r)
		u.ex <- xl2Exchange{path: r.URL.Path, req: body, reply: tw.buf.Bytes()}
	}))
	t.Cleanup(srv.Close)
	u.upstream = &upstream{Simulator: s, URL: srv.URL}
	return u
}

// next waits for the next finished exchange.
func (u *xl2Upstream) next(t *testing.T) xl2Exchange {
	t.Helper()
	select {
	case e := <-u.ex:
		return e
	case <-time.After(20 * time.Second):
		t.Fatal("no exchange reached the upstream")
		return xl2Exchange{}
	}
}

type teeWriter struct {
	http.ResponseWriter
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *teeWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	w.buf.Write(b)
	w.mu.Unlock()
	return w.ResponseWriter.Write(b)
}

func (w *teeWriter) Flush()                      { w.ResponseWriter.(http.Flusher).Flush() }
func (w *teeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
func (w *teeWriter) Header() http.Header         { return w.ResponseWriter.Header() }
func (w *teeWriter) WriteHeader(code int)        { w.ResponseWriter.WriteHeader(code) }

// xl2Turn is one answer as the client's SDK read it, in the client's own
// words.
type xl2Turn struct {
	text           string
	calls          []xl2Call
	finish         string
	in, out, cache int64
	header         string
}

type xl2Call struct{ id, name, args string }

// xl2Client drives one client format's SDK through the proxy: a turn
// offering get_weather, the turn sending its result back, and a plain turn
// (no tools).
type xl2Client interface {
	toolTurn(t *testing.T, stream bool) xl2Turn
	resultTurn(t *testing.T, stream bool, calls []xl2Call, result string) xl2Turn
	plainTurn(t *testing.T, stream bool) xl2Turn
}

// xl2Stops are a client format's finish reasons for a tool call, a normal
// end and a length stop.
type xl2Stops struct{ tool, end, length string }

// xl2Pool is the proxy block: the client's own format answers 529, the
// target translates.
func xl2Pool(tag string, native *upstream, nativeAPI string, target *upstream, targetAPI, client string) string {
	return provider("native-"+tag+client+"-"+targetAPI, native, "api "+nativeAPI) +
		provider("xl-"+tag+client+"-"+targetAPI, target, "api "+targetAPI, "key sk-target", "translate "+client, "priority 1",
			"model * "+xl2TargetModel(targetAPI)) +
		"\t\thedge {\n\t\t\toff\n\t\t}\n"
}

// xl2Format is the wire format an api speaks (api chat speaks Chat
// Completions, the format named openai).
func xl2Format(api string) string {
	if api == "chat" {
		return "openai"
	}
	return api
}

// xl2LogOnFailure shows the proxy's request log lines when the test fails.
func xl2LogOnFailure(t *testing.T, p *proxy) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, line := range strings.Split(p.logs(t), "\n") {
			if strings.Contains(line, "llm_hedge") || strings.Contains(line, "provider") {
				t.Log(line)
			}
		}
	})
}

func xl2TargetModel(api string) string {
	switch api {
	case "anthropic":
		return "claude-sonnet-4-5"
	case "gemini":
		return "gemini-2.5-flash"
	}
	return "gpt-4o"
}

var xl2SimID = regexp.MustCompile(`(toolu|call)_sim_[0-9a-f]+`)

// runXL2 runs the whole acceptance of one pair: the tool loop and a plain
// answer, streamed and not, then a length stop, each translated.
func runXL2(t *testing.T, client, nativeAPI, targetAPI string, stops xl2Stops, newClient func(p *proxy) xl2Client) {
	native := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 529}}})
	target := newXL2Upstream(t, sim.Config{ToolCalls: xlCalls, ToolAnswer: xlAnswer, Key: "sk-target", CacheRead: xl2Cached})
	p := startProxy(t, xl2Pool("", native, nativeAPI, target.upstream, targetAPI, client))
	xl2LogOnFailure(t, p)
	t.Cleanup(func() {
		if t.Failed() {
			for _, r := range target.Requests() {
				t.Logf("target got %s %s status %d authorization %q x-api-key %q", r.Method, r.Path, r.Status, r.Authorization, r.APIKey)
			}
		}
	})
	c := newClient(p)
	pairName := client + "->" + xl2Format(targetAPI)
	for _, stream := range []bool{false, true} {
		call := c.toolTurn(t, stream)
		up := target.next(t)
		xl2CheckRequest(t, targetAPI, up.req)
		xl2CheckTurn(t, "tool call", stream, call, pairName, stops.tool)
		if len(call.calls) != 1 || call.calls[0].name != "get_weather" || call.calls[0].id == "" {
			t.Fatalf("stream=%v: calls %+v", stream, call.calls)
		}
		if got := compactJSON(t, json.RawMessage(call.calls[0].args)); got != `{"city":"Paris","unit":"c"}` {
			t.Fatalf("stream=%v: arguments %s", stream, got)
		}
		// The target's call id reaches the client as it is (a Gemini
		// target has none: the translation names the call).
		simID := xl2SimID.FindString(string(up.reply))
		if targetAPI == "gemini" {
			if simID != "" {
				t.Fatalf("the Gemini target sent an id %q", simID)
			}
		} else if simID == "" || call.calls[0].id != simID {
			t.Fatalf("stream=%v: the client's call id %q, the target's %q", stream, call.calls[0].id, simID)
		}

		answer := c.resultTurn(t, stream, call.calls, "sunny")
		up = target.next(t)
		xl2CheckRequest(t, targetAPI, up.req)
		if simID != "" && !bytes.Contains(up.req, []byte(`"`+simID+`"`)) {
			t.Fatalf("stream=%v: the tool result went upstream without the call id %s: %s", stream, simID, up.req)
		}
		xl2CheckTurn(t, "tool result", stream, answer, pairName, stops.end)
		if answer.text != "The tool returned: sunny" || len(answer.calls) != 0 {
			t.Fatalf("stream=%v: answer %q calls %+v", stream, answer.text, answer.calls)
		}

		plain := c.plainTurn(t, stream)
		xl2CheckRequest(t, targetAPI, target.next(t).req)
		xl2CheckTurn(t, "plain", stream, plain, pairName, stops.end)
		if plain.text != "The quick brown fox jumps over the lazy dog." {
			t.Fatalf("stream=%v: plain text %q", stream, plain.text)
		}
	}
	for _, r := range target.Requests() {
		if r.Status != 200 {
			t.Fatalf("the translating provider answered %d: %+v", r.Status, r)
		}
		// The client's credential never crosses vendors.
		for _, v := range []string{r.APIKey, r.Authorization, r.GoogAPIKey, r.KeyParam} {
			if strings.Contains(v, "client") {
				t.Fatalf("the client's key reached the translating provider: %+v", r)
			}
		}
	}
	if len(native.Requests()) == 0 {
		t.Fatal("the same-format provider was never tried")
	}

	// A length stop stays a length stop.
	long := newXL2Upstream(t, sim.Config{LengthStop: true, Key: "sk-target", CacheRead: xl2Cached})
	p = startProxy(t, xl2Pool("len-", native, nativeAPI, long.upstream, targetAPI, client))
	c = newClient(p)
	for _, stream := range []bool{false, true} {
		turn := c.plainTurn(t, stream)
		long.next(t)
		xl2CheckTurn(t, "length", stream, turn, pairName, stops.length)
		if turn.text != "The quick brown fox jumps over the lazy dog." {
			t.Fatalf("stream=%v: length-stopped text %q", stream, turn.text)
		}
	}
}

func xl2CheckTurn(t *testing.T, what string, stream bool, turn xl2Turn, pair, finish string) {
	t.Helper()
	if turn.header != pair {
		t.Fatalf("%s stream=%v: %s = %q, want %q", what, stream, engine.HeaderTranslated, turn.header, pair)
	}
	if turn.finish != finish {
		t.Fatalf("%s stream=%v: finish %q, want %q (text %q, calls %+v)", what, stream, turn.finish, finish, turn.text, turn.calls)
	}
	if turn.in <= 0 || turn.out <= 0 || turn.cache != xl2Cached {
		t.Fatalf("%s stream=%v: usage in %d out %d cache %d, want > 0, > 0, %d", what, stream, turn.in, turn.out, turn.cache, xl2Cached)
	}
}

// xl2CheckRequest: a translated upstream request reads as the target
// SDK's parameters.
func xl2CheckRequest(t *testing.T, api string, body []byte) {
	t.Helper()
	var err error
	switch api {
	case "anthropic":
		var p anthropic.MessageNewParams
		err = json.Unmarshal(body, &p)
		if err == nil && (len(p.Messages) == 0 || p.MaxTokens <= 0) {
			t.Fatalf("Messages request without messages or max_tokens: %s", body)
		}
	case "openai", "chat":
		var p openai.ChatCompletionNewParams
		err = json.Unmarshal(body, &p)
		if err == nil && len(p.Messages) == 0 {
			t.Fatalf("Chat request without messages: %s", body)
		}
	case "responses":
		var p responses.ResponseNewParams
		err = json.Unmarshal(body, &p)
	case "gemini":
		var p struct {
			Contents          []*genai.Content        `json:"contents"`
			SystemInstruction *genai.Content          `json:"systemInstruction"`
			Tools             []*genai.Tool           `json:"tools"`
			ToolConfig        *genai.ToolConfig       `json:"toolConfig"`
			GenerationConfig  *genai.GenerationConfig `json:"generationConfig"`
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		err = dec.Decode(&p)
		if err == nil && len(p.Contents) == 0 {
			t.Fatalf("Gemini request without contents: %s", body)
		}
	}
	if err != nil {
		t.Fatalf("the %s request does not read as its SDK's parameters: %v\n%s", api, err, body)
	}
}

// Chat Completions clients (openai-go) on Messages, Gemini and Responses
// providers.
func TestTranslatePhase2ChatClient(t *testing.T) {
	for _, target := range []string{"anthropic", "gemini", "responses"} {
		t.Run(target, func(t *testing.T) {
			runXL2(t, "openai", "openai", target, xl2Stops{"tool_calls", "stop", "length"},
				func(p *proxy) xl2Client { return &xl2Chat{c: openaiClient(p, "sk-client")} })
		})
	}
}

// Responses clients (openai-go) on Gemini and Chat-only providers.
func TestTranslatePhase2ResponsesClient(t *testing.T) {
	for _, target := range []string{"gemini", "chat"} {
		t.Run(target, func(t *testing.T) {
			runXL2(t, "responses", "responses", target, xl2Stops{"completed", "completed", "incomplete/max_output_tokens"},
				func(p *proxy) xl2Client { return &xl2Responses{c: openaiClient(p, "sk-client")} })
		})
	}
}

// Gemini clients (genai, streaming with alt=sse) on Messages and Chat
// providers.
func TestTranslatePhase2GeminiClient(t *testing.T) {
	for _, target := range []string{"anthropic", "openai"} {
		t.Run(target, func(t *testing.T) {
			runXL2(t, "gemini", "gemini", target, xl2Stops{"STOP", "STOP", "MAX_TOKENS"},
				func(p *proxy) xl2Client { return newXL2Gemini(t, p) })
		})
	}
}

// Anthropic clients (anthropic-sdk-go) on a Chat-only provider.
func TestTranslatePhase2AnthropicClient(t *testing.T) {
	runXL2(t, "anthropic", "anthropic", "chat", xl2Stops{"tool_use", "end_turn", "max_tokens"},
		func(p *proxy) xl2Client { return &xl2Anthropic{c: anthropicClient(p, "sk-client")} })
}

// --- Chat Completions (openai-go) ---

type xl2Chat struct {
	c       *openai.Client
	history []openai.ChatCompletionMessageParamUnion
}

func xl2ChatTool() openai.ChatCompletionToolUnionParam {
	return openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather",
		Description: openai.String("Weather of a city"),
		Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{
			"city": map[string]any{"type": "string"}, "unit": map[string]any{"type": "string"}}}})
}

func (x *xl2Chat) send(t *testing.T, stream bool, params openai.ChatCompletionNewParams) (xl2Turn, openai.ChatCompletionMessage) {
	t.Helper()
	params.Model = "gpt-4o"
	params.MaxCompletionTokens = openai.Int(256)
	var resp *http.Response
	ctx := ctxTimeout(t, 20*time.Second)
	var cc openai.ChatCompletion
	if !stream {
		r, err := x.c.Chat.Completions.New(ctx, params, ooption.WithResponseInto(&resp))
		if err != nil {
			t.Fatalf("chat non-stream: %v", err)
		}
		cc = *r
	} else {
		params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		s := x.c.Chat.Completions.NewStreaming(ctx, params, ooption.WithResponseInto(&resp))
		var acc openai.ChatCompletionAccumulator
		for s.Next() {
			acc.AddChunk(s.Current())
		}
		if err := s.Err(); err != nil {
			t.Fatalf("chat stream: %v", err)
		}
		cc = acc.ChatCompletion
	}
	if len(cc.Choices) != 1 {
		t.Fatalf("stream=%v: %d choices", stream, len(cc.Choices))
	}
	ch := cc.Choices[0]
	turn := xl2Turn{text: ch.Message.Content, finish: string(ch.FinishReason), header: resp.Header.Get(engine.HeaderTranslated),
		in: cc.Usage.PromptTokens, out: cc.Usage.CompletionTokens, cache: cc.Usage.PromptTokensDetails.CachedTokens}
	for _, tc := range ch.Message.ToolCalls {
		turn.calls = append(turn.calls, xl2Call{tc.ID, tc.Function.Name, tc.Function.Arguments})
	}
	return turn, ch.Message
}

func (x *xl2Chat) toolTurn(t *testing.T, stream bool) xl2Turn {
	x.history = []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are terse."), openai.UserMessage("Weather in Paris?")}
	turn, msg := x.send(t, stream, openai.ChatCompletionNewParams{Messages: x.history, Tools: []openai.ChatCompletionToolUnionParam{xl2ChatTool()}})
	x.history = append(x.history, msg.ToParam())
	return turn
}

func (x *xl2Chat) resultTurn(t *testing.T, stream bool, calls []xl2Call, result string) xl2Turn {
	for _, c := range calls {
		x.history = append(x.history, openai.ToolMessage(result, c.id))
	}
	turn, _ := x.send(t, stream, openai.ChatCompletionNewParams{Messages: x.history, Tools: []openai.ChatCompletionToolUnionParam{xl2ChatTool()}})
	return turn
}

func (x *xl2Chat) plainTurn(t *testing.T, stream bool) xl2Turn {
	turn, _ := x.send(t, stream, openai.ChatCompletionNewParams{Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")}})
	return turn
}

// --- Responses (openai-go) ---

type xl2Responses struct {
	c     *openai.Client
	input responses.ResponseInputParam
}

func xl2ResponsesTool() responses.ToolUnionParam {
	return responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{Name: "get_weather",
		Parameters: map[string]any{"type": "object", "properties": map[string]any{
			"city": map[string]any{"type": "string"}, "unit": map[string]any{"type": "string"}}}}}
}

func (x *xl2Responses) send(t *testing.T, stream bool, input responses.ResponseInputParam, tools bool) xl2Turn {
	t.Helper()
	params := responses.ResponseNewParams{Model: "gpt-5", MaxOutputTokens: openai.Int(256), Store: openai.Bool(false),
		Instructions: openai.String("You are terse."),
		Input:        responses.ResponseNewParamsInputUnion{OfInputItemList: input}}
	if tools {
		params.Tools = []responses.ToolUnionParam{xl2ResponsesTool()}
	}
	var resp *http.Response
	ctx := ctxTimeout(t, 20*time.Second)
	var r *responses.Response
	if !stream {
		var err error
		if r, err = x.c.Responses.New(ctx, params, ooption.WithResponseInto(&resp)); err != nil {
			t.Fatalf("responses non-stream: %v", err)
		}
	} else {
		s := x.c.Responses.NewStreaming(ctx, params, ooption.WithResponseInto(&resp))
		for s.Next() {
			switch ev := s.Current(); ev.Type {
			case "response.completed":
				done := ev.AsResponseCompleted().Response
				r = &done
			case "response.incomplete":
				done := ev.AsResponseIncomplete().Response
				r = &done
			}
		}
		if err := s.Err(); err != nil || r == nil {
			t.Fatalf("responses stream: %v (ended %v)", err, r != nil)
		}
	}
	turn := xl2Turn{text: r.OutputText(), finish: string(r.Status), header: resp.Header.Get(engine.HeaderTranslated),
		in: r.Usage.InputTokens, out: r.Usage.OutputTokens, cache: r.Usage.InputTokensDetails.CachedTokens}
	if r.Status == "incomplete" {
		turn.finish += "/" + r.IncompleteDetails.Reason
	}
	for _, item := range r.Output {
		if item.Type == "function_call" {
			fc := item.AsFunctionCall()
			turn.calls = append(turn.calls, xl2Call{fc.CallID, fc.Name, fc.Arguments})
		}
	}
	return turn
}

func (x *xl2Responses) toolTurn(t *testing.T, stream bool) xl2Turn {
	x.input = responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage("Weather in Paris?", responses.EasyInputMessageRoleUser)}
	return x.send(t, stream, x.input, true)
}

func (x *xl2Responses) resultTurn(t *testing.T, stream bool, calls []xl2Call, result string) xl2Turn {
	for _, c := range calls {
		out := responses.ResponseInputItemParamOfFunctionCallOutput(result)
		out.OfFunctionCallOutput.CallID = param.NewOpt(c.id)
		x.input = append(x.input, responses.ResponseInputItemParamOfFunctionCall(c.args, c.id, c.name), out)
	}
	return x.send(t, stream, x.input, true)
}

func (x *xl2Responses) plainTurn(t *testing.T, stream bool) xl2Turn {
	return x.send(t, stream, responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage("hello", responses.EasyInputMessageRoleUser)}, false)
}

// --- Gemini (genai) ---

// headerTransport keeps the last response's header.
type headerTransport struct {
	mu   sync.Mutex
	last http.Header
}

func (h *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil {
		h.mu.Lock()
		h.last = resp.Header
		h.mu.Unlock()
	}
	return resp, err
}

func (h *headerTransport) get(name string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last.Get(name)
}

type xl2Gemini struct {
	c        *genai.Client
	hdr      *headerTransport
	contents []*genai.Content
}

func newXL2Gemini(t *testing.T, p *proxy) *xl2Gemini {
	hdr := &headerTransport{}
	c, err := genai.NewClient(t.Context(), &genai.ClientConfig{Backend: genai.BackendGeminiAPI, APIKey: "client-key",
		HTTPClient: &http.Client{Transport: hdr}, HTTPOptions: genai.HTTPOptions{BaseURL: p.URL}})
	if err != nil {
		t.Fatal(err)
	}
	return &xl2Gemini{c: c, hdr: hdr}
}

func xl2GeminiConfig(tools bool) *genai.GenerateContentConfig {
	cfg := &genai.GenerateContentConfig{MaxOutputTokens: 256, SystemInstruction: genai.NewContentFromText("You are terse.", genai.RoleUser)}
	if tools {
		cfg.Tools = []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{{Name: "get_weather", Description: "Weather of a city",
			Parameters: &genai.Schema{Type: genai.TypeObject, Properties: map[string]*genai.Schema{
				"city": {Type: genai.TypeString}, "unit": {Type: genai.TypeString}}}}}}}
	}
	return cfg
}

func (x *xl2Gemini) send(t *testing.T, stream bool, contents []*genai.Content, cfg *genai.GenerateContentConfig) (xl2Turn, *genai.Content) {
	t.Helper()
	ctx := ctxTimeout(t, 20*time.Second)
	var chunks []*genai.GenerateContentResponse
	if !stream {
		r, err := x.c.Models.GenerateContent(ctx, "gemini-2.5-flash", contents, cfg)
		if err != nil {
			t.Fatalf("gemini non-stream: %v", err)
		}
		chunks = append(chunks, r)
	} else {
		for r, err := range x.c.Models.GenerateContentStream(ctx, "gemini-2.5-flash", contents, cfg) {
			if err != nil {
				t.Fatalf("gemini stream: %v", err)
			}
			chunks = append(chunks, r)
		}
	}
	turn := xl2Turn{header: x.hdr.get(engine.HeaderTranslated)}
	model := &genai.Content{Role: genai.RoleModel}
	var text strings.Builder
	for _, r := range chunks {
		if r.UsageMetadata != nil {
			turn.in, turn.out, turn.cache = int64(r.UsageMetadata.PromptTokenCount), int64(r.UsageMetadata.CandidatesTokenCount), int64(r.UsageMetadata.CachedContentTokenCount)
		}
		if len(r.Candidates) == 0 {
			continue
		}
		cand := r.Candidates[0]
		if cand.FinishReason != "" {
			turn.finish = string(cand.FinishReason)
		}
		if cand.Content == nil {
			continue
		}
		for _, part := range cand.Content.Parts {
			text.WriteString(part.Text)
			if fc := part.FunctionCall; fc != nil {
				args, _ := json.Marshal(fc.Args)
				turn.calls = append(turn.calls, xl2Call{fc.ID, fc.Name, string(args)})
			}
			if part.Text != "" || part.FunctionCall != nil {
				model.Parts = append(model.Parts, part)
			}
		}
	}
	turn.text = text.String()
	return turn, model
}

func (x *xl2Gemini) toolTurn(t *testing.T, stream bool) xl2Turn {
	x.contents = []*genai.Content{genai.NewContentFromText("Weather in Paris?", genai.RoleUser)}
	turn, model := x.send(t, stream, x.contents, xl2GeminiConfig(true))
	x.contents = append(x.contents, model)
	return turn
}

func (x *xl2Gemini) resultTurn(t *testing.T, stream bool, calls []xl2Call, result string) xl2Turn {
	user := &genai.Content{Role: genai.RoleUser}
	for _, c := range calls {
		user.Parts = append(user.Parts, &genai.Part{FunctionResponse: &genai.FunctionResponse{ID: c.id, Name: c.name,
			Response: map[string]any{"output": result}}})
	}
	x.contents = append(x.contents, user)
	turn, _ := x.send(t, stream, x.contents, xl2GeminiConfig(true))
	return turn
}

func (x *xl2Gemini) plainTurn(t *testing.T, stream bool) xl2Turn {
	turn, _ := x.send(t, stream, genai.Text("hello"), xl2GeminiConfig(false))
	return turn
}

// --- Anthropic Messages (anthropic-sdk-go) ---

type xl2Anthropic struct {
	c      *anthropic.Client
	params anthropic.MessageNewParams
}

func (x *xl2Anthropic) send(t *testing.T, stream bool, params anthropic.MessageNewParams) (xl2Turn, anthropic.Message) {
	t.Helper()
	var resp *http.Response
	ctx := ctxTimeout(t, 20*time.Second)
	var msg anthropic.Message
	if !stream {
		m, err := x.c.Messages.New(ctx, params, aoption.WithResponseInto(&resp))
		if err != nil {
			t.Fatalf("messages non-stream: %v", err)
		}
		msg = *m
	} else {
		s := x.c.Messages.NewStreaming(ctx, params, aoption.WithResponseInto(&resp))
		for s.Next() {
			if err := msg.Accumulate(s.Current()); err != nil {
				t.Fatalf("messages stream: accumulate: %v", err)
			}
		}
		if err := s.Err(); err != nil {
			t.Fatalf("messages stream: %v", err)
		}
	}
	turn := xl2Turn{text: messageText(msg), finish: string(msg.StopReason), header: resp.Header.Get(engine.HeaderTranslated),
		in: msg.Usage.InputTokens, out: msg.Usage.OutputTokens, cache: msg.Usage.CacheReadInputTokens}
	for _, b := range msg.Content {
		if b.Type == "tool_use" {
			turn.calls = append(turn.calls, xl2Call{b.ID, b.Name, string(b.Input)})
		}
	}
	return turn, msg
}

func (x *xl2Anthropic) toolTurn(t *testing.T, stream bool) xl2Turn {
	x.params = anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 256,
		System:   []anthropic.TextBlockParam{{Text: "You are terse."}},
		Tools:    []anthropic.ToolUnionParam{xlWeatherTool()},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Paris?"))}}
	turn, msg := x.send(t, stream, x.params)
	x.params.Messages = append(x.params.Messages, msg.ToParam())
	return turn
}

func (x *xl2Anthropic) resultTurn(t *testing.T, stream bool, calls []xl2Call, result string) xl2Turn {
	var results []anthropic.ContentBlockParamUnion
	for _, c := range calls {
		results = append(results, anthropic.NewToolResultBlock(c.id, result, false))
	}
	x.params.Messages = append(x.params.Messages, anthropic.NewUserMessage(results...))
	turn, _ := x.send(t, stream, x.params)
	return turn
}

func (x *xl2Anthropic) plainTurn(t *testing.T, stream bool) xl2Turn {
	turn, _ := x.send(t, stream, anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 256,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))}})
	return turn
}

// Every material loss of a client format skips the translating candidate
// before a byte is sent (its upstream sees nothing); with nothing else
// left the client gets a 400 in its own dialect naming the loss. Chat
// clients: n > 1 and logprobs on each target; Responses clients: output
// logprobs; Gemini clients: safetySettings and cachedContent; Anthropic
// clients: a server tool (web_search) on a Chat-only provider.
func TestTranslatePhase2Refusals(t *testing.T) {
	type refusal struct {
		name, want string
		send       func(t *testing.T, p *proxy) error
	}
	chat := func(mod func(*openai.ChatCompletionNewParams)) func(t *testing.T, p *proxy) error {
		return func(t *testing.T, p *proxy) error {
			params := openaiParams("gpt-4o")
			mod(&params)
			_, err := openaiClient(p, "sk-client").Chat.Completions.New(ctxTimeout(t, 10*time.Second), params)
			return err
		}
	}
	chatRefusals := []refusal{
		{"n", "n > 1", chat(func(p *openai.ChatCompletionNewParams) { p.N = openai.Int(2) })},
		{"logprobs", "logprobs", chat(func(p *openai.ChatCompletionNewParams) { p.Logprobs = openai.Bool(true) })},
	}
	respLogprobs := refusal{"logprobs", "message.output_text.logprobs", func(t *testing.T, p *proxy) error {
		_, err := openaiClient(p, "sk-client").Responses.New(ctxTimeout(t, 10*time.Second), responses.ResponseNewParams{Model: "gpt-5",
			Input:   responses.ResponseNewParamsInputUnion{OfString: openai.String("Say it.")},
			Include: []responses.ResponseIncludable{responses.ResponseIncludableMessageOutputTextLogprobs}})
		return err
	}}
	gemini := func(cfg *genai.GenerateContentConfig) func(t *testing.T, p *proxy) error {
		return func(t *testing.T, p *proxy) error {
			_, err := newXL2Gemini(t, p).c.Models.GenerateContent(ctxTimeout(t, 10*time.Second), "gemini-2.5-flash", genai.Text("hello"), cfg)
			return err
		}
	}
	geminiRefusals := []refusal{
		{"safetySettings", "safetySettings", gemini(&genai.GenerateContentConfig{SafetySettings: []*genai.SafetySetting{{
			Category: genai.HarmCategoryHarassment, Threshold: genai.HarmBlockThresholdBlockNone}}})},
		{"cachedContent", "cachedContent", gemini(&genai.GenerateContentConfig{CachedContent: "cachedContents/abc123"})},
	}
	webSearch := refusal{"web_search", "web_search", func(t *testing.T, p *proxy) error {
		params := anthropicParams("claude-sonnet-4-5")
		params.Tools = []anthropic.ToolUnionParam{{OfWebSearchTool20250305: &anthropic.WebSearchTool20250305Param{}}}
		_, err := anthropicClient(p, "sk-client").Messages.New(ctxTimeout(t, 10*time.Second), params)
		return err
	}}
	for _, tc := range []struct {
		client, target string
		refusals       []refusal
	}{
		{"openai", "anthropic", chatRefusals},
		{"openai", "gemini", chatRefusals},
		{"openai", "responses", chatRefusals},
		{"responses", "gemini", []refusal{respLogprobs}},
		{"responses", "chat", []refusal{respLogprobs}},
		{"gemini", "anthropic", geminiRefusals},
		{"gemini", "openai", geminiRefusals},
		{"anthropic", "chat", []refusal{webSearch}},
	} {
		t.Run(tc.client+"-"+tc.target, func(t *testing.T) {
			target := newUpstream(t, sim.Config{Key: "sk-target"})
			p := startProxy(t, provider("refuse-"+tc.client+"-"+tc.target, target, "api "+tc.target, "key sk-target",
				"translate "+tc.client, "model * "+xl2TargetModel(tc.target)))
			for _, r := range tc.refusals {
				err := r.send(t, p)
				status, msg := xl2ErrorOf(t, tc.client, err)
				if status != http.StatusBadRequest || !strings.Contains(msg, r.want) || !strings.Contains(msg, "faithfully") {
					t.Fatalf("%s: status %d message %q (err %v), want a 400 refusal naming %q", r.name, status, msg, err, r.want)
				}
				if n := len(target.Requests()); n != 0 {
					t.Fatalf("%s: the translating provider received %d requests, want 0", r.name, n)
				}
			}
		})
	}
}

// xl2ErrorOf reads a refusal the way the client's SDK does: its status
// and message, failing when the error is not the client's own dialect.
func xl2ErrorOf(t *testing.T, client string, err error) (int, string) {
	t.Helper()
	switch client {
	case "openai", "responses":
		var e *openai.Error
		if !errors.As(err, &e) {
			t.Fatalf("not an OpenAI error: %v", err)
		}
		if e.Type != "invalid_request_error" {
			t.Fatalf("OpenAI error type %q: %s", e.Type, e.RawJSON())
		}
		return e.StatusCode, e.Message
	case "gemini":
		var e genai.APIError
		if !errors.As(err, &e) {
			t.Fatalf("not a Gemini error: %v", err)
		}
		if e.Status != "INVALID_ARGUMENT" {
			t.Fatalf("Gemini error status %q: %+v", e.Status, e)
		}
		return e.Code, e.Message
	case "anthropic":
		var e *anthropic.Error
		if !errors.As(err, &e) {
			t.Fatalf("not an Anthropic error: %v", err)
		}
		if !strings.Contains(e.RawJSON(), `"invalid_request_error"`) {
			t.Fatalf("Anthropic error: %s", e.RawJSON())
		}
		return e.StatusCode, e.Error()
	}
	t.Fatalf("client %s", client)
	return 0, ""
}
