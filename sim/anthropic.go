package sim

import (
	"net/http"
	"strconv"
)

// anthropicWire is the Anthropic Messages API.
type anthropicWire struct{}

type anthropicUsage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	OutputTokens             int `json:"output_tokens"`
}

type anthropicText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type anthropicMessage struct {
	ID           string         `json:"id"`
	Type         string         `json:"type"`
	Role         string         `json:"role"`
	Model        string         `json:"model"`
	Content      any            `json:"content"` // text or tool_use blocks
	StopReason   *string        `json:"stop_reason"`
	StopSequence *string        `json:"stop_sequence"`
	Usage        anthropicUsage `json:"usage"`
}

// Events that are the same in every stream.
var (
	anthropicBlockStart = sseEvent("content_block_start", []byte(`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`))
	anthropicPing       = sseEvent("ping", []byte(`{"type": "ping"}`))
	anthropicBlockStop  = sseEvent("content_block_stop", []byte(`{"type":"content_block_stop","index":0}`))
	anthropicStop       = sseEvent("message_stop", []byte(`{"type":"message_stop"}`))
	anthropicMalformed  = sseEvent("content_block_delta", []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_del`))
)

func (anthropicWire) name() string     { return "anthropic" }
func (anthropicWire) idPrefix() string { return "msg_sim_" }

func (anthropicWire) errorBody(status int, message string) []byte {
	type detail struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	return mustJSON(struct {
		Type  string `json:"type"`
		Error detail `json:"error"`
	}{"error", detail{anthropicErrorType(status), message}})
}

func anthropicErrorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusServiceUnavailable, statusOverloaded:
		return "overloaded_error"
	case http.StatusGatewayTimeout:
		return "timeout_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

func (anthropicWire) defaultMessage(status int, model string) string {
	switch status {
	case http.StatusBadRequest:
		return "prompt is too long: 250000 tokens > 200000 maximum"
	case http.StatusUnauthorized:
		return "invalid x-api-key"
	case http.StatusForbidden:
		return "Your API key does not have permission to use the specified resource."
	case http.StatusNotFound:
		return "model: " + model
	case http.StatusRequestEntityTooLarge:
		return "Request exceeds the maximum allowed number of bytes."
	case http.StatusTooManyRequests:
		return "Number of request tokens has exceeded your per-minute rate limit"
	case http.StatusInternalServerError:
		return "Internal server error"
	case http.StatusServiceUnavailable, statusOverloaded:
		return "Overloaded"
	case http.StatusGatewayTimeout:
		return "Request timed out"
	}
	return "Error " + strconv.Itoa(status)
}

func (w anthropicWire) message(ex *exchange, stopReason *string, content any, outputTokens int) []byte {
	return mustJSON(anthropicMessage{
		ID:         ex.id,
		Type:       "message",
		Role:       "assistant",
		Model:      ex.model,
		Content:    content,
		StopReason: stopReason,
		Usage: anthropicUsage{
			InputTokens:          ex.inputTokens,
			CacheReadInputTokens: ex.p.cfg.CacheRead,
			OutputTokens:         outputTokens,
		},
	})
}

func (w anthropicWire) completion(ex *exchange) []byte {
	endTurn := anthropicTextStop(ex)
	return w.message(ex, &endTurn, []anthropicText{{"text", ex.p.text}}, len(ex.p.deltas))
}

func (w anthropicWire) streamStart(ex *exchange) bool { return w.start(ex, anthropicBlockStart) }

// start sends message_start, the content block's start and the pings.
func (w anthropicWire) start(ex *exchange, blockStart []byte) bool {
	start := w.message(ex, nil, []anthropicText{}, 1)
	data := append(append([]byte(`{"type":"message_start","message":`), start...), '}')
	if !ex.emit(sseEvent("message_start", data)) || !ex.emit(blockStart) {
		return false
	}
	for range *ex.p.cfg.Pings {
		if !ex.emit(anthropicPing) {
			return false
		}
	}
	return true
}

// anthropicDeltaEvent is the complete content_block_delta event for text.
func anthropicDeltaEvent(text string) []byte {
	return sseEvent("content_block_delta", mustJSON(struct {
		Type  string        `json:"type"`
		Index int           `json:"index"`
		Delta anthropicText `json:"delta"`
	}{"content_block_delta", 0, anthropicText{"text_delta", text}}))
}

func (anthropicWire) streamDelta(ex *exchange, i int) bool {
	return ex.emit(ex.p.anthropicDeltas[i])
}

func (w anthropicWire) streamEnd(ex *exchange) bool { return w.end(ex, anthropicTextStop(ex)) }

// anthropicTextStop is a text answer's stop_reason.
func anthropicTextStop(ex *exchange) string {
	if ex.lengthStop() {
		return "max_tokens"
	}
	return "end_turn"
}

// end stops the content block and the message with stopReason and usage.
func (anthropicWire) end(ex *exchange, stopReason string) bool {
	b := append(ex.buf[:0], "event: message_delta\ndata: "...)
	b = append(b, `{"type":"message_delta","delta":{"stop_reason":"`...)
	b = append(b, stopReason...)
	b = append(b, `","stop_sequence":null},"usage":{"input_tokens":`...)
	b = strconv.AppendInt(b, int64(ex.inputTokens), 10)
	b = append(b, `,"cache_creation_input_tokens":0,"cache_read_input_tokens":`...)
	b = strconv.AppendInt(b, int64(ex.p.cfg.CacheRead), 10)
	b = append(b, `,"output_tokens":`...)
	b = strconv.AppendInt(b, int64(len(ex.p.deltas)), 10)
	b = append(b, "}}\n\n"...)
	ex.buf = b
	return ex.emit(anthropicBlockStop, b, anthropicStop)
}

func (w anthropicWire) streamError(status int, message string) []byte {
	return sseEvent("error", w.errorBody(status, message))
}

func (anthropicWire) malformedEvent() []byte { return anthropicMalformed }
