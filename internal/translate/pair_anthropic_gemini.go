package translate

// anthropicToGemini serves Anthropic Messages clients with a Gemini
// provider (generateContent, streamGenerateContent?alt=sse).
type anthropicToGemini struct{}

func (anthropicToGemini) Client() string { return Anthropic }
func (anthropicToGemini) Target() string { return Gemini }

// Request ignores targetModel: Gemini names the model in the path (TargetPath).
func (anthropicToGemini) Request(body []byte, _ string) ([]byte, []Loss, error) {
	r, losses, err := decodeAnthropicRequest(body)
	if err != nil {
		return nil, nil, err
	}
	out, more, err := encodeGeminiRequest(r)
	if err != nil {
		return nil, nil, err
	}
	return out, mergeLosses(losses, more), nil
}

func (anthropicToGemini) Response(body []byte) ([]byte, error) {
	r, err := decodeGeminiResponse(body)
	if err != nil {
		return nil, err
	}
	return encodeAnthropicResponse(r)
}

func (anthropicToGemini) NewStream() Stream { return &geminiToAnthropicStream{} }

func (anthropicToGemini) Error(status int, body []byte) (int, []byte) {
	return geminiErrorToAnthropic(status, body)
}
