package translate

// anthropicToGemini serves Anthropic Messages clients with a Gemini
// provider (generateContent, streamGenerateContent?alt=sse).
type anthropicToGemini struct{}

func (anthropicToGemini) Client() string { return Anthropic }
func (anthropicToGemini) Target() string { return Gemini }

// Request ignores targetModel: Gemini names the model in the path (TargetPath).
func (p anthropicToGemini) Translate(body []byte, _ string) (*Translation, error) {
	r, losses, err := decodeAnthropicRequest(body)
	if err != nil {
		return nil, err
	}
	out, more, err := encodeGeminiRequest(r)
	if err != nil {
		return nil, err
	}
	return &Translation{Body: out, Losses: mergeLosses(losses, more),
		response: p.Response, newStream: p.NewStream,
	}, nil
}

func (anthropicToGemini) Error(status int, body []byte) (int, []byte) {
	return geminiErrorToAnthropic(status, body)
}

func (p anthropicToGemini) Request(body []byte, model string) ([]byte, []Loss, error) {
	return requestOnly(p, body, model)
}

func (anthropicToGemini) Response(body []byte) ([]byte, error) {
	r, err := decodeGeminiResponse(body)
	if err != nil {
		return nil, err
	}
	return encodeAnthropicResponse(r)
}

func (anthropicToGemini) NewStream() Stream { return newGeminiToAnthropicStream() }
