package sim

// A scripted tool call (tools.go) in each dialect's shape, streamed and not.

import (
	"encoding/json"
)

// answerWireOf is what renders this request's answer: the wire's text, or the
// scripted tool call in the wire's shape.
func answerWireOf(ex *exchange) answerWire {
	if ex.call == nil {
		return ex.wire
	}
	switch w := ex.wire.(type) {
	case anthropicWire:
		return anthropicCall{w}
	case openaiWire:
		return openaiCall{w}
	case responsesWire:
		return responsesCall{w}
	case *geminiWire:
		return geminiCall{w}
	}
	return ex.wire
}

// anthropicCall is a tool_use block, stop_reason tool_use.
type anthropicCall struct{ anthropicWire }

type anthropicToolUse struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

func (w anthropicCall) completion(ex *exchange) []byte {
	stop := "tool_use"
	c := ex.call
	return w.message(ex, &stop, []anthropicToolUse{{"tool_use", c.id, c.name, json.RawMessage(c.args)}}, len(ex.p.deltas))
}

func (w anthropicCall) streamStart(ex *exchange) bool {
	c := ex.call
	return w.start(ex, sseEvent("content_block_start", mustJSON(struct {
		Type         string           `json:"type"`
		Index        int              `json:"index"`
		ContentBlock anthropicToolUse `json:"content_block"`
	}{"content_block_start", 0, anthropicToolUse{"tool_use", c.id, c.name, json.RawMessage(`{}`)}})))
}

func (anthropicCall) streamDelta(ex *exchange, i int) bool {
	type delta struct {
		Type        string `json:"type"`
		PartialJSON string `json:"partial_json"`
	}
	return ex.emit(sseEvent("content_block_delta", mustJSON(struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
		Delta delta  `json:"delta"`
	}{"content_block_delta", 0, delta{"input_json_delta", ex.p.deltas[i]}})))
}

func (w anthropicCall) streamEnd(ex *exchange) bool { return w.end(ex, "tool_use") }

// openaiCall is a message with tool_calls, finish_reason tool_calls.
type openaiCall struct{ openaiWire }

type openaiFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type openaiToolCall struct {
	Index    *int           `json:"index,omitempty"` // in a stream's delta
	ID       string         `json:"id,omitempty"`
	Type     string         `json:"type,omitempty"`
	Function openaiFunction `json:"function"`
}

func (w openaiCall) completion(ex *exchange) []byte {
	type message struct {
		Role      string           `json:"role"`
		Content   *string          `json:"content"`
		Refusal   *string          `json:"refusal"`
		ToolCalls []openaiToolCall `json:"tool_calls"`
	}
	type choice struct {
		Index        int       `json:"index"`
		Message      message   `json:"message"`
		Logprobs     *struct{} `json:"logprobs"`
		FinishReason string    `json:"finish_reason"`
	}
	c := ex.call
	return mustJSON(struct {
		ID      string       `json:"id"`
		Object  string       `json:"object"`
		Created int64        `json:"created"`
		Model   string       `json:"model"`
		Choices []choice     `json:"choices"`
		Usage   *openaiUsage `json:"usage"`
	}{ex.id, "chat.completion", ex.created, ex.model, []choice{{
		Message:      message{Role: "assistant", ToolCalls: []openaiToolCall{{ID: c.id, Type: "function", Function: openaiFunction{c.name, c.args}}}},
		FinishReason: "tool_calls",
	}}, w.usage(ex)})
}

// callDelta is a chunk's delta carrying part of the call; the first names it.
func callDelta(ex *exchange, first bool, args string) []byte {
	zero := 0
	tc := openaiToolCall{Index: &zero, Function: openaiFunction{Arguments: args}}
	if !first {
		return mustJSON(struct {
			ToolCalls []openaiToolCall `json:"tool_calls"`
		}{[]openaiToolCall{tc}})
	}
	tc.ID, tc.Type, tc.Function.Name = ex.call.id, "function", ex.call.name
	return mustJSON(struct {
		Role      string           `json:"role"`
		Content   *string          `json:"content"`
		ToolCalls []openaiToolCall `json:"tool_calls"`
	}{"assistant", nil, []openaiToolCall{tc}})
}

func (w openaiCall) streamStart(ex *exchange) bool {
	return w.chunk(ex, callDelta(ex, true, ""), "")
}

func (w openaiCall) streamDelta(ex *exchange, i int) bool {
	return w.chunk(ex, callDelta(ex, false, ex.p.deltas[i]), "")
}

func (w openaiCall) streamEnd(ex *exchange) bool { return w.end(ex, "tool_calls") }

// responsesCall is a function_call output item.
type responsesCall struct{ responsesWire }

type responsesCallItem struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Status    string `json:"status"`
	Arguments string `json:"arguments"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
}

// outputItem is the response's output: the message with its text, or the
// function call.
func (sr *storedResponse) outputItem() any {
	if sr.call == nil {
		return sr.message("completed", sr.text)
	}
	return callItem(sr.call, "completed", sr.call.args)
}

func callItem(c *scriptedCall, status, args string) responsesCallItem {
	return responsesCallItem{c.itemID, "function_call", status, args, c.id, c.name}
}

// streamStart sends response.created, response.in_progress, and the added
// function_call item.
func (w responsesCall) streamStart(ex *exchange) bool {
	ex.beginResponse("in_progress")
	o := ex.stored.object("in_progress", 0, nil)
	return ex.emitResponse("response.created", o) &&
		ex.emitResponse("response.in_progress", o) &&
		ex.emit(sseEvent("response.output_item.added", mustJSON(responsesItemEvent{
			"response.output_item.added", 0, callItem(ex.call, "in_progress", ""), ex.nextSeq(),
		})))
}

type responsesArgsEvent struct {
	Type           string `json:"type"`
	ItemID         string `json:"item_id"`
	OutputIndex    int    `json:"output_index"`
	Delta          string `json:"delta,omitempty"`
	Arguments      string `json:"arguments,omitempty"`
	Name           string `json:"name,omitempty"`
	SequenceNumber int    `json:"sequence_number"`
}

func (responsesCall) streamDelta(ex *exchange, i int) bool {
	const typ = "response.function_call_arguments.delta"
	return ex.emit(sseEvent(typ, mustJSON(responsesArgsEvent{
		Type: typ, ItemID: ex.call.itemID, Delta: ex.p.deltas[i], SequenceNumber: ex.nextSeq(),
	})))
}

// streamEnd sends the arguments' done event, the item's, then
// response.completed with the call as the output.
func (responsesCall) streamEnd(ex *exchange) bool {
	const typ = "response.function_call_arguments.done"
	c := ex.call
	if !ex.emit(sseEvent(typ, mustJSON(responsesArgsEvent{
		Type: typ, ItemID: c.itemID, Arguments: c.args, Name: c.name, SequenceNumber: ex.nextSeq(),
	}))) || !ex.emit(sseEvent("response.output_item.done", mustJSON(responsesItemEvent{
		"response.output_item.done", 0, callItem(c, "completed", c.args), ex.nextSeq(),
	}))) {
		return false
	}
	completedAt := now().Unix()
	ex.s.store.finish(ex.stored, "completed", completedAt, nil)
	return ex.emitResponse("response.completed", ex.stored.object("completed", completedAt, nil))
}

// geminiCall is a functionCall part: Gemini sends a call whole, in one
// chunk (its one delta), then the final chunk.
type geminiCall struct{ *geminiWire }

// callChunk is a GenerateContentResponse whose part is the call.
func (w geminiCall) callChunk(ex *exchange, final bool) []byte {
	b := append([]byte(nil), `{"candidates":[{"content":{"parts":[{"functionCall":{"name":`...)
	b = append(b, mustJSON(ex.call.name)...)
	b = append(b, `,"args":`...)
	b = append(b, ex.call.args...)
	b = append(b, '}')
	return w.chunkEnd(b, ex, final)
}

func (w geminiCall) completion(ex *exchange) []byte { return w.callChunk(ex, true) }

func (w geminiCall) streamDelta(ex *exchange, _ int) bool {
	return w.emitChunk(ex, w.callChunk(ex, false))
}
