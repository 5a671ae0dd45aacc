package translate

// anthropicToResponses serves Anthropic Messages clients with an OpenAI
// Responses provider.
type anthropicToResponses struct{}

func (anthropicToResponses) Client() string { return Anthropic }
func (anthropicToResponses) Target() string { return Responses }

func (anthropicToResponses) Request(body []byte, model string) ([]byte, []Loss, error) {
	r, losses, err := decodeAnthropicRequest(body)
	if err != nil {
		return nil, nil, err
	}
	out, more, err := encodeResponsesRequest(r, model)
	if err != nil {
		return nil, nil, err
	}
	return out, mergeLosses(losses, more), nil
}

func (anthropicToResponses) Response(body []byte) ([]byte, error) {
	r, err := decodeResponsesAnswer(body)
	if err != nil {
		return nil, err
	}
	return encodeAnthropicResponse(r)
}

func (anthropicToResponses) NewStream() Stream { return newResponsesToAnthropicStream() }

func (anthropicToResponses) Error(status int, body []byte) (int, []byte) {
	return openAIErrorToAnthropic(status, body)
}
