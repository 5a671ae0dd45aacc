package sim

import (
	"encoding/json"
	"strconv"
)

// statusOverloaded is Anthropic's "overloaded" status.
const statusOverloaded = 529

// wire renders the bodies and events of one API dialect.
type wire interface {
	name() string
	idPrefix() string

	// errorBody is the JSON of an error response.
	errorBody(status int, message string) []byte
	// defaultMessage is what the real API says with that status.
	defaultMessage(status int, model string) string

	answerWire

	// streamError is an error event in a 200 stream.
	streamError(status int, message string) []byte
	// malformedEvent is an event whose data is not JSON.
	malformedEvent() []byte
}

// answerWire renders one kind of answer: text (the wire itself) or a
// scripted tool call.
type answerWire interface {
	// completion is the JSON of a non-streaming response.
	completion(ex *exchange) []byte

	// The stream: events before the first delta, delta i, and the terminal
	// events. Each reports false when the client is gone.
	streamStart(ex *exchange) bool
	streamDelta(ex *exchange, i int) bool
	streamEnd(ex *exchange) bool
}

// mustJSON marshals values built by the simulator, which cannot fail.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("sim: marshaling a response: " + err.Error())
	}
	return b
}

// sseEvent frames data as a server-sent event; name may be empty.
func sseEvent(name string, data []byte) []byte {
	b := make([]byte, 0, len(name)+len(data)+16)
	if name != "" {
		b = append(b, "event: "...)
		b = append(b, name...)
		b = append(b, '\n')
	}
	b = append(b, "data: "...)
	b = append(b, data...)
	return append(b, "\n\n"...)
}

// countTokensBody answers POST /v1/messages/count_tokens.
func countTokensBody(inputTokens int) []byte {
	b := strconv.AppendInt([]byte(`{"input_tokens":`), int64(inputTokens), 10)
	return append(b, '}')
}

// modelEntry satisfies both SDKs' model objects.
type modelEntry struct {
	Type        string `json:"type"`
	ID          string `json:"id"`
	DisplayName string `json:"display_name"`
	CreatedAt   string `json:"created_at"`
	Object      string `json:"object"`
	Created     int64  `json:"created"`
	OwnedBy     string `json:"owned_by"`
}

// modelsBody answers GET /v1/models in a shape both SDKs parse.
func modelsBody(model string) []byte {
	ids := []string{"claude-sim-1", "gpt-sim-1"}
	if model != "" {
		ids = []string{model}
	}
	list := struct {
		Object  string       `json:"object"`
		Data    []modelEntry `json:"data"`
		HasMore bool         `json:"has_more"`
		FirstID string       `json:"first_id"`
		LastID  string       `json:"last_id"`
	}{Object: "list", FirstID: ids[0], LastID: ids[len(ids)-1]}
	for _, id := range ids {
		list.Data = append(list.Data, modelEntry{
			Type: "model", ID: id, DisplayName: id, CreatedAt: "2025-01-01T00:00:00Z",
			Object: "model", Created: 1735689600, OwnedBy: "llm_sim",
		})
	}
	return mustJSON(list)
}
