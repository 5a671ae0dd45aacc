package translate

// Gemini clients (Gemini CLI, google.golang.org/genai) on Messages and
// Chat Completions providers: the Gemini client decoder and writer glued
// to each target's encoder and decoders.

// geminiClientLosses are the target encoder's losses for a Gemini client.
// One is no loss to it, and is left out: the stop_sequence stop reason
// (reported as end_turn) is about Anthropic clients, which can tell a
// matched sequence; Gemini itself says STOP for one, as the targets' stop
// becomes.
func geminiClientLosses(losses, target []Loss) []Loss {
	return mergeLosses(losses, withoutLoss(target, stopSequenceLoss))
}

// geminiClientStream is a target decoder writing for a Gemini client,
// with its errors in Google's terms.
func geminiClientStream(s Stream) Stream {
	return &clientErrors{s: s, convert: geminiTyped}
}

// geminiToAnthropic serves Gemini clients with an Anthropic Messages provider.
type geminiToAnthropic struct{}

func (geminiToAnthropic) Client() string { return Gemini }
func (geminiToAnthropic) Target() string { return Anthropic }

func (p geminiToAnthropic) Translate(body []byte, model string) (*Translation, error) {
	r, losses, err := decodeGeminiClientRequest(body)
	if err != nil {
		return nil, err
	}
	out, more, err := encodeAnthropicRequest(r, model)
	if err != nil {
		return nil, err
	}
	return &Translation{Body: out, Losses: geminiClientLosses(losses, more),
		response: p.Response, newStream: p.NewStream}, nil
}

func (p geminiToAnthropic) Request(body []byte, model string) ([]byte, []Loss, error) {
	return requestOnly(p, body, model)
}

func (geminiToAnthropic) Response(body []byte) ([]byte, error) {
	r, err := decodeAnthropicResponse(body)
	if err != nil {
		return nil, err
	}
	return encodeGeminiResponse(r)
}

// NewStream: the Anthropic decoder (explicit blocks) writes to the Gemini
// writer as it does to the Responses one.
func (geminiToAnthropic) NewStream() Stream {
	return geminiClientStream(newAnthropicStream(&geminiWriter{}))
}

func (geminiToAnthropic) Error(status int, body []byte) (int, []byte) {
	return anthropicErrorToGemini(status, body)
}

// geminiToChat serves Gemini clients with an OpenAI Chat Completions provider.
type geminiToChat struct{}

func (geminiToChat) Client() string { return Gemini }
func (geminiToChat) Target() string { return OpenAI }

func (p geminiToChat) Translate(body []byte, model string) (*Translation, error) {
	r, losses, err := decodeGeminiClientRequest(body)
	if err != nil {
		return nil, err
	}
	out, more, err := encodeChatRequest(r, model)
	if err != nil {
		return nil, err
	}
	return &Translation{Body: out, Losses: geminiClientLosses(losses, more),
		response: p.Response, newStream: p.NewStream}, nil
}

func (p geminiToChat) Request(body []byte, model string) ([]byte, []Loss, error) {
	return requestOnly(p, body, model)
}

func (geminiToChat) Response(body []byte) ([]byte, error) {
	r, err := decodeChatResponse(body)
	if err != nil {
		return nil, err
	}
	return encodeGeminiResponse(r)
}

func (geminiToChat) NewStream() Stream {
	return geminiClientStream(newChatStream(&itemBlocks{w: &geminiWriter{}}))
}

func (geminiToChat) Error(status int, body []byte) (int, []byte) {
	return openAIErrorToGemini(status, body)
}
