package sim

import (
	"net/http"
	"strconv"
)

// openaiWire is the OpenAI Chat Completions API.
type openaiWire struct{}

type openaiUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

type openaiMessage struct {
	Role    string  `json:"role"`
	Content string  `json:"content"`
	Refusal *string `json:"refusal"`
}

type openaiChoice struct {
	Index        int           `json:"index"`
	Message      openaiMessage `json:"message"`
	Logprobs     *struct{}     `json:"logprobs"`
	FinishReason string        `json:"finish_reason"`
}

type openaiCompletion struct {
	ID      string         `json:"id"`
	Object  string         `json:"object"`
	Created int64          `json:"created"`
	Model   string         `json:"model"`
	Choices []openaiChoice `json:"choices"`
	Usage   *openaiUsage   `json:"usage,omitempty"`
}

var (
	openaiRoleDelta = []byte(`{"role":"assistant","content":""}`)
	openaiEndDelta  = []byte(`{}`)
	openaiDone      = []byte("data: [DONE]\n\n")
	openaiMalformed = []byte("data: {\"id\":\"chatcmpl-sim\",\"object\":\"chat.completion.chu\n\n")
)

func (openaiWire) name() string     { return "openai" }
func (openaiWire) idPrefix() string { return "chatcmpl-sim-" }

func (openaiWire) errorBody(status int, message string) []byte {
	type detail struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	}
	typ, code := openaiErrorKind(status)
	d := detail{Message: message, Type: typ}
	if code != "" {
		d.Code = &code
	}
	return mustJSON(struct {
		Error detail `json:"error"`
	}{d})
}

func openaiErrorKind(status int) (typ, code string) {
	switch status {
	case http.StatusUnauthorized:
		return "invalid_request_error", "invalid_api_key"
	case http.StatusNotFound:
		return "invalid_request_error", "model_not_found"
	case http.StatusTooManyRequests:
		return "requests", "rate_limit_exceeded"
	case http.StatusServiceUnavailable, statusOverloaded:
		return "server_error", "overloaded"
	case http.StatusGatewayTimeout:
		return "server_error", "timeout"
	}
	if status >= 500 {
		return "server_error", ""
	}
	return "invalid_request_error", ""
}

func (openaiWire) defaultMessage(status int, model string) string {
	switch status {
	case http.StatusBadRequest:
		return "This model's maximum context length is 128000 tokens. However, your messages resulted in 250000 tokens. Please reduce the length of the messages."
	case http.StatusUnauthorized:
		return "Incorrect API key provided."
	case http.StatusForbidden:
		return "You are not allowed to use this resource."
	case http.StatusNotFound:
		return "The model `" + model + "` does not exist or you do not have access to it."
	case http.StatusRequestEntityTooLarge:
		return "Request too large."
	case http.StatusTooManyRequests:
		return "Rate limit reached for requests"
	case http.StatusInternalServerError:
		return "The server had an error while processing your request. Sorry about that!"
	case http.StatusServiceUnavailable, statusOverloaded:
		return "The engine is currently overloaded, please try again later"
	case http.StatusGatewayTimeout:
		return "Request timed out."
	}
	return "Error " + strconv.Itoa(status)
}

// usage counts the cached tokens in the prompt, as OpenAI does.
func (openaiWire) usage(ex *exchange) *openaiUsage {
	u := &openaiUsage{
		PromptTokens:     ex.inputTokens + ex.p.cfg.CacheRead,
		CompletionTokens: len(ex.p.deltas),
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	u.PromptTokensDetails.CachedTokens = ex.p.cfg.CacheRead
	return u
}

func (w openaiWire) completion(ex *exchange) []byte {
	return mustJSON(openaiCompletion{
		ID:      ex.id,
		Object:  "chat.completion",
		Created: ex.created,
		Model:   ex.model,
		Choices: []openaiChoice{{
			Message:      openaiMessage{Role: "assistant", Content: ex.p.text},
			FinishReason: openaiTextFinish(ex),
		}},
		Usage: w.usage(ex),
	})
}

// openaiContentDelta is the delta object of a chunk carrying text.
func openaiContentDelta(text string) []byte {
	return mustJSON(struct {
		Content string `json:"content"`
	}{text})
}

// chunk writes one chat.completion.chunk with a single choice, reusing the
// exchange's buffer so a delta allocates nothing.
func (openaiWire) chunk(ex *exchange, delta []byte, finishReason string) bool {
	b := append(ex.buf[:0], `data: {"id":"`...)
	b = append(b, ex.id...)
	b = append(b, `","object":"chat.completion.chunk","created":`...)
	b = strconv.AppendInt(b, ex.created, 10)
	b = append(b, `,"model":`...)
	b = append(b, ex.quotedModel()...)
	b = append(b, `,"choices":[{"index":0,"delta":`...)
	b = append(b, delta...)
	b = append(b, `,"logprobs":null,"finish_reason":`...)
	if finishReason == "" {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendQuote(b, finishReason)
	}
	b = append(b, "}]}\n\n"...)
	ex.buf = b
	return ex.emit(b)
}

func (w openaiWire) streamStart(ex *exchange) bool {
	return w.chunk(ex, openaiRoleDelta, "")
}

func (w openaiWire) streamDelta(ex *exchange, i int) bool {
	return w.chunk(ex, ex.p.openaiDeltas[i], "")
}

func (w openaiWire) streamEnd(ex *exchange) bool { return w.end(ex, openaiTextFinish(ex)) }

// openaiTextFinish is a text answer's finish_reason.
func openaiTextFinish(ex *exchange) string {
	if ex.lengthStop() {
		return "length"
	}
	return "stop"
}

// end sends the last chunk with finishReason, the usage chunk when asked
// for, and [DONE].
func (w openaiWire) end(ex *exchange, finishReason string) bool {
	if !w.chunk(ex, openaiEndDelta, finishReason) {
		return false
	}
	if ex.req.StreamOptions.IncludeUsage {
		usage := mustJSON(openaiCompletion{
			ID: ex.id, Object: "chat.completion.chunk", Created: ex.created, Model: ex.model,
			Choices: []openaiChoice{}, Usage: w.usage(ex),
		})
		if !ex.emit(sseEvent("", usage)) {
			return false
		}
	}
	return ex.emit(openaiDone)
}

func (w openaiWire) streamError(status int, message string) []byte {
	return sseEvent("", w.errorBody(status, message))
}

func (openaiWire) malformedEvent() []byte { return openaiMalformed }
