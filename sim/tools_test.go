package sim

import (
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
	"google.golang.org/genai"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// toolScript calls Read on a file (Missing is never offered, so it is
// skipped) and quotes the result.
var toolScript = Config{
	ToolCalls: []ToolCall{
		{Name: "Missing", Arguments: json.RawMessage(`{"x":1}`)},
		{Name: "Read", Arguments: json.RawMessage(`{ "file_path": "/tmp/ünïcode/notes.txt", "limit": 20 }`)},
	},
	ToolAnswer: "The file says: {result}",
}

const (
	toolArgs   = `{"file_path":"/tmp/ünïcode/notes.txt","limit":20}`
	toolResult = "TOKEN-7f3a is the secret"
	toolFinal  = "The file says: TOKEN-7f3a is the secret"
)

// toolTurns is one dialect's two turns through its SDK: the first returns
// the call's name, id and arguments; the second sends the result and
// returns the answer's text.
type toolTurns struct {
	call   func(t *testing.T, srv *httptest.Server, stream bool) (name, id, args string)
	answer func(t *testing.T, srv *httptest.Server, stream bool, id, result string) string
}

var toolDialects = map[string]toolTurns{
	"anthropic": {anthropicToolCall, anthropicToolAnswer},
	"chat":      {chatToolCall, chatToolAnswer},
	"responses": {responsesToolCall, responsesToolAnswer},
	"gemini":    {geminiToolCall, geminiToolAnswer},
}

// Item 12: each SDK reads the scripted call (the first scripted tool the
// request offers) in its dialect's shape, streamed and not, then the final
// answer quoting the tool result it sent back.
func TestToolLoopScriptedInEveryDialect(t *testing.T) {
	for name, d := range toolDialects {
		for _, stream := range []bool{false, true} {
			t.Run(name+map[bool]string{false: " plain", true: " stream"}[stream], func(t *testing.T) {
				s, srv := serve(t, toolScript)
				callName, id, args := d.call(t, srv, stream)
				if callName != "Read" || args != toolArgs {
					t.Fatalf("call %s(%s), want Read(%s)", callName, args, toolArgs)
				}
				if name != "gemini" && id == "" {
					t.Fatal("the call has no id")
				}
				if got := d.answer(t, srv, stream, id, toolResult); got != toolFinal {
					t.Fatalf("answer %q, want %q", got, toolFinal)
				}
				recs := s.Requests()
				if len(recs) != 2 || recs[0].ToolCall != "Read" || recs[0].ToolResult || recs[1].ToolCall != "" || !recs[1].ToolResult {
					t.Fatalf("records: %+v", recs)
				}
				if want := len(splitPieces(toolArgs, argumentPiece)); name != "gemini" && stream && recs[0].Deltas != want {
					t.Errorf("call deltas %d, want %d pieces of arguments", recs[0].Deltas, want)
				}
			})
		}
	}
}

func readSchema() map[string]any {
	return map[string]any{"type": "object", "properties": map[string]any{"file_path": map[string]any{"type": "string"}}}
}

func anthropicTools() []anthropic.ToolUnionParam {
	return []anthropic.ToolUnionParam{
		{OfTool: &anthropic.ToolParam{Name: "Bash", InputSchema: anthropic.ToolInputSchemaParam{}}},
		{OfTool: &anthropic.ToolParam{Name: "Read", InputSchema: anthropic.ToolInputSchemaParam{Properties: readSchema()["properties"]}}},
	}
}

func anthropicToolMessage(t *testing.T, srv *httptest.Server, stream bool, params anthropic.MessageNewParams) anthropic.Message {
	t.Helper()
	client := anthropicClient(srv, "k")
	if !stream {
		m, err := client.Messages.New(t.Context(), params)
		if err != nil {
			t.Fatal(err)
		}
		return *m
	}
	var m anthropic.Message
	st := client.Messages.NewStreaming(t.Context(), params)
	defer st.Close()
	for st.Next() {
		if err := m.Accumulate(st.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	return m
}

var anthropicToolFirst = []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Read my notes."))}

func anthropicToolCall(t *testing.T, srv *httptest.Server, stream bool) (string, string, string) {
	m := anthropicToolMessage(t, srv, stream, anthropic.MessageNewParams{Model: "claude-test", MaxTokens: 100, Messages: anthropicToolFirst, Tools: anthropicTools()})
	if m.StopReason != anthropic.StopReasonToolUse || len(m.Content) != 1 || m.Content[0].Type != "tool_use" {
		t.Fatalf("stop %q, content %+v: want one tool_use", m.StopReason, m.Content)
	}
	c := m.Content[0]
	return c.Name, c.ID, string(c.Input)
}

func anthropicToolAnswer(t *testing.T, srv *httptest.Server, stream bool, id, result string) string {
	msgs := append(append([]anthropic.MessageParam{}, anthropicToolFirst...),
		anthropic.NewAssistantMessage(anthropic.NewToolUseBlock(id, json.RawMessage(toolArgs), "Read")),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock(id, result, false)))
	m := anthropicToolMessage(t, srv, stream, anthropic.MessageNewParams{Model: "claude-test", MaxTokens: 100, Messages: msgs, Tools: anthropicTools()})
	if m.StopReason != anthropic.StopReasonEndTurn {
		t.Errorf("stop reason %q after the result", m.StopReason)
	}
	var b strings.Builder
	for _, c := range m.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

func chatCompletion(t *testing.T, srv *httptest.Server, stream bool, params openai.ChatCompletionNewParams) openai.ChatCompletion {
	t.Helper()
	params.Model = "gpt-test"
	params.Tools = []openai.ChatCompletionToolUnionParam{
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "shell"}),
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "Read", Parameters: readSchema()}),
	}
	client := openaiClient(srv, "k")
	if !stream {
		c, err := client.Chat.Completions.New(t.Context(), params)
		if err != nil {
			t.Fatal(err)
		}
		return *c
	}
	var acc openai.ChatCompletionAccumulator
	st := client.Chat.Completions.NewStreaming(t.Context(), params)
	defer st.Close()
	for st.Next() {
		acc.AddChunk(st.Current())
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	return acc.ChatCompletion
}

var chatToolFirst = []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Read my notes.")}

func chatToolCall(t *testing.T, srv *httptest.Server, stream bool) (string, string, string) {
	c := chatCompletion(t, srv, stream, openai.ChatCompletionNewParams{Messages: chatToolFirst})
	if len(c.Choices) != 1 || c.Choices[0].FinishReason != "tool_calls" || len(c.Choices[0].Message.ToolCalls) != 1 {
		t.Fatalf("choices %+v: want one tool call", c.Choices)
	}
	tc := c.Choices[0].Message.ToolCalls[0]
	return tc.Function.Name, tc.ID, tc.Function.Arguments
}

func chatToolAnswer(t *testing.T, srv *httptest.Server, stream bool, id, result string) string {
	call := openai.ChatCompletionMessageParamUnion{OfAssistant: &openai.ChatCompletionAssistantMessageParam{
		ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
			ID: id, Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "Read", Arguments: toolArgs},
		}}},
	}}
	msgs := append(append([]openai.ChatCompletionMessageParamUnion{}, chatToolFirst...), call, openai.ToolMessage(result, id))
	c := chatCompletion(t, srv, stream, openai.ChatCompletionNewParams{Messages: msgs})
	if len(c.Choices) != 1 || c.Choices[0].FinishReason != "stop" {
		t.Fatalf("choices %+v after the result", c.Choices)
	}
	return c.Choices[0].Message.Content
}

func responsesResponse(t *testing.T, srv *httptest.Server, stream bool, input responses.ResponseInputParam) responses.Response {
	t.Helper()
	params := responses.ResponseNewParams{
		Model: "gpt-test",
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input},
		Tools: []responses.ToolUnionParam{
			responses.ToolParamOfFunction("exec_command", nil, false),
			responses.ToolParamOfFunction("Read", readSchema(), false),
		},
	}
	client := openaiClient(srv, "k")
	if !stream {
		r, err := client.Responses.New(t.Context(), params)
		if err != nil {
			t.Fatal(err)
		}
		return *r
	}
	st := client.Responses.NewStreaming(t.Context(), params)
	defer st.Close()
	var args strings.Builder
	var done responses.Response
	for st.Next() {
		switch ev := st.Current(); ev.Type {
		case "response.function_call_arguments.delta":
			args.WriteString(ev.Delta)
		case "response.function_call_arguments.done":
			if ev.Arguments != args.String() {
				t.Errorf("arguments done %q, the deltas made %q", ev.Arguments, args.String())
			}
		case "response.completed":
			done = ev.Response
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	return done
}

var responsesToolFirst = responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage("Read my notes.", responses.EasyInputMessageRoleUser)}

func responsesToolCall(t *testing.T, srv *httptest.Server, stream bool) (string, string, string) {
	r := responsesResponse(t, srv, stream, responsesToolFirst)
	if len(r.Output) != 1 || r.Output[0].Type != "function_call" {
		t.Fatalf("output %+v: want one function_call", r.Output)
	}
	fc := r.Output[0].AsFunctionCall()
	return fc.Name, fc.CallID, fc.Arguments
}

func responsesToolAnswer(t *testing.T, srv *httptest.Server, stream bool, id, result string) string {
	out := responses.ResponseInputItemParamOfFunctionCallOutput(result)
	out.OfFunctionCallOutput.CallID = param.NewOpt(id)
	input := append(append(responses.ResponseInputParam{}, responsesToolFirst...),
		responses.ResponseInputItemParamOfFunctionCall(toolArgs, id, "Read"), out)
	return responsesResponse(t, srv, stream, input).OutputText()
}

func geminiContent(t *testing.T, srv *httptest.Server, stream bool, contents []*genai.Content) []*genai.Part {
	t.Helper()
	cfg := &genai.GenerateContentConfig{Tools: []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{
		{Name: "run_shell_command"}, {Name: "Read", ParametersJsonSchema: readSchema()},
	}}}}
	c := geminiClient(t, srv, "k")
	if !stream {
		r, err := c.Models.GenerateContent(t.Context(), "gemini-test", contents, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return r.Candidates[0].Content.Parts
	}
	var parts []*genai.Part
	for r, err := range c.Models.GenerateContentStream(t.Context(), "gemini-test", contents, cfg) {
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, r.Candidates[0].Content.Parts...)
	}
	return parts
}

var geminiToolFirst = []*genai.Content{genai.NewContentFromText("Read my notes.", genai.RoleUser)}

func geminiToolCall(t *testing.T, srv *httptest.Server, stream bool) (string, string, string) {
	var calls []*genai.FunctionCall
	for _, p := range geminiContent(t, srv, stream, geminiToolFirst) {
		if p.FunctionCall != nil {
			calls = append(calls, p.FunctionCall)
		}
	}
	if len(calls) != 1 {
		t.Fatalf("%d function calls, want 1", len(calls))
	}
	args, _ := json.Marshal(calls[0].Args) // a map: keys sorted, as toolArgs has them
	return calls[0].Name, calls[0].ID, string(args)
}

func geminiToolAnswer(t *testing.T, srv *httptest.Server, stream bool, _, result string) string {
	var args map[string]any
	json.Unmarshal([]byte(toolArgs), &args)
	contents := append(append([]*genai.Content{}, geminiToolFirst...),
		genai.NewContentFromFunctionCall("Read", args, genai.RoleModel),
		genai.NewContentFromFunctionResponse("Read", map[string]any{"output": result}, genai.RoleUser))
	var b strings.Builder
	for _, p := range geminiContent(t, srv, stream, contents) {
		if p.FunctionCall != nil {
			t.Errorf("a function call after the result: %+v", p.FunctionCall)
		}
		b.WriteString(p.Text)
	}
	return b.String()
}

// Item 12: a fault with a turn strikes only that turn of the loop: the
// call's stream is whole, the answer's is cut; a request without tools, or
// offering none of the scripted ones, gets the plain text.
func TestToolLoopFaultTurnAndPlainRequests(t *testing.T) {
	cfg := toolScript
	cfg.Text, cfg.Tokens = "plain text answer", 3
	cfg.Faults = []Fault{{Kind: FaultCut, After: 2, Turn: TurnToolResult}}
	s, srv := serve(t, cfg)
	name, id, args := chatToolCall(t, srv, true)
	if name != "Read" || args != toolArgs {
		t.Fatalf("call %s(%s): the tool_result fault struck the call", name, args)
	}
	answer := `{"model":"gpt-test","stream":true,"messages":[{"role":"user","content":"hi"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"` + id + `","type":"function","function":{"name":"Read","arguments":"{}"}}]},` +
		`{"role":"tool","tool_call_id":"` + id + `","content":[{"type":"text","text":"part one "},{"type":"text","text":"part two"}]}]}`
	events, _ := readEvents(mustPost(t, srv, "/v1/chat/completions", answer).Body)
	if n := len(events); n != 3 || strings.Contains(events[n-1].data, "[DONE]") {
		t.Errorf("the answer's stream: %d events, want the role chunk and 2 deltas, cut", n)
	}
	if rec := lastRecord(t, s); !rec.ToolResult || rec.Fault == nil {
		t.Errorf("answer record %+v: want the tool result and the fault", rec)
	}
	for _, body := range []string{
		`{"model":"gpt-test","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"gpt-test","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"Write"}}]}`,
	} {
		var c struct {
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
		}
		json.NewDecoder(mustPost(t, srv, "/v1/chat/completions", body).Body).Decode(&c)
		if len(c.Choices) != 1 || c.Choices[0].Message.Content != "plain text answer" {
			t.Errorf("%s: got %+v, want the plain text", body, c.Choices)
		}
		if rec := lastRecord(t, s); rec.ToolCall != "" || rec.ToolResult {
			t.Errorf("%s: record %+v", body, rec)
		}
	}
}

// Item 12: a continuation of the answer after a tool result (the delivered
// text as an assistant prefill) gets the rest of that answer, as a
// proxy's prefill continuation needs.
func TestToolLoopAnswerContinuesFromPrefill(t *testing.T) {
	s, srv := serve(t, toolScript)
	body := `{"model":"claude-test","max_tokens":10,"messages":[{"role":"user","content":"hi"},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Read","input":{}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"` + toolResult + `"}]},` +
		`{"role":"assistant","content":"The file says:"}]}`
	var m struct {
		Content []struct{ Text string } `json:"content"`
	}
	json.NewDecoder(mustPost(t, srv, "/v1/messages", body).Body).Decode(&m)
	if len(m.Content) != 1 || "The file says:"+m.Content[0].Text != toolFinal {
		t.Fatalf("content %+v, want the rest of %q", m.Content, toolFinal)
	}
	if rec := lastRecord(t, s); !rec.Prefilled || !rec.ToolResult {
		t.Errorf("record %+v", rec)
	}
}

// Item 12: the Caddyfile's tool_call, tool_answer and fault turn.
func TestCaddyfileToolLoop(t *testing.T) {
	d := caddyfile.NewTestDispenser("llm_sim {\n tool_call Missing\n tool_call Read `{\"file_path\": \"/tmp/x\"}`\n tool_answer The file says: {result}\n fault cut after 3 turn tool_result count 1\n}")
	var h Handler
	if err := h.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	want := []ToolCall{{Name: "Missing"}, {Name: "Read", Arguments: json.RawMessage(`{"file_path": "/tmp/x"}`)}}
	if !reflect.DeepEqual(h.ToolCalls, want) || h.ToolAnswer != "The file says: {result}" {
		t.Errorf("tool_calls %+v, answer %q", h.ToolCalls, h.ToolAnswer)
	}
	if len(h.Faults) != 1 || h.Faults[0].Turn != TurnToolResult {
		t.Errorf("faults %+v", h.Faults)
	}
	for _, bad := range []string{
		"llm_sim {\n tool_call\n}",
		"llm_sim {\n tool_call Read [1]\n}",
		"llm_sim {\n tool_call Read {\"a\":\n}",
		"llm_sim {\n fault cut turn first\n}",
	} {
		var h Handler
		if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
