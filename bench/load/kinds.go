package load

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
)

// Dialect is the client API a request speaks.
type Dialect uint8

const (
	Anthropic Dialect = iota // Anthropic Messages
	OpenAI                   // OpenAI Chat Completions
	Responses                // OpenAI Responses
	Gemini                   // Gemini generateContent
)

var dialectNames = [...]string{"anthropic", "openai", "responses", "gemini"}

func (d Dialect) String() string { return dialectNames[d] }

// Kind is the shape of one request: its dialect, streamed or not.
type Kind struct {
	Dialect Dialect
	Stream  bool
}

func (k Kind) String() string {
	if k.Stream {
		return k.Dialect.String() + "-stream"
	}
	return k.Dialect.String()
}

// Path is the endpoint of the kind's dialect (Gemini's names the model).
func (k Kind) Path(model string) string {
	switch k.Dialect {
	case OpenAI:
		return "/v1/chat/completions"
	case Responses:
		return "/v1/responses"
	case Gemini:
		if k.Stream {
			return "/v1beta/models/" + model + ":streamGenerateContent?alt=sse"
		}
		return "/v1beta/models/" + model + ":generateContent"
	}
	return "/v1/messages"
}

// Kinds are the two request shapes of Anthropic and Chat Completions, the
// bench's mixed workload.
var Kinds = []Kind{{Anthropic, true}, {Anthropic, false}, {OpenAI, true}, {OpenAI, false}}

// AllKinds are the eight shapes of the four dialects, the soak's workload.
var AllKinds = []Kind{{Anthropic, true}, {Anthropic, false}, {OpenAI, true}, {OpenAI, false},
	{Responses, true}, {Responses, false}, {Gemini, true}, {Gemini, false}}

const prompt = "Write a short paragraph about the sea."

// Body is a small completion request of kind k for model.
func Body(k Kind, model string) []byte {
	switch k.Dialect {
	case OpenAI:
		return fmt.Appendf(nil, `{"model":%q,"stream":%t,"messages":[{"role":"user","content":%q}]}`, model, k.Stream, prompt)
	case Responses:
		// store false: the soak's answers need not be kept (a stored one
		// is remembered by its id, which the soak never continues).
		return fmt.Appendf(nil, `{"model":%q,"stream":%t,"store":false,"input":%q}`, model, k.Stream, prompt)
	case Gemini:
		return fmt.Appendf(nil, `{"contents":[{"role":"user","parts":[{"text":%q}]}]}`, prompt)
	}
	return fmt.Appendf(nil, `{"model":%q,"max_tokens":1024,"stream":%t,"messages":[{"role":"user","content":%q}]}`, model, k.Stream, prompt)
}

// NewRequest builds a request of kind k for model with body to baseURL.
func NewRequest(ctx context.Context, baseURL string, k Kind, model string, body []byte) *http.Request {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+k.Path(model), bytes.NewReader(body))
	if err != nil {
		panic(err) // baseURL is ours
	}
	req.Header.Set("Content-Type", "application/json")
	switch k.Dialect {
	case OpenAI, Responses:
		req.Header.Set("Authorization", "Bearer sk-load")
	case Gemini:
		req.Header.Set("X-Goog-Api-Key", "sk-load")
	default:
		req.Header.Set("X-Api-Key", "sk-load")
		req.Header.Set("Anthropic-Version", "2023-06-01")
	}
	return req
}
