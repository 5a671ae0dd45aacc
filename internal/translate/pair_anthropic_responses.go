package translate

// anthropicToResponses serves Anthropic Messages clients with an OpenAI
// Responses provider.
type anthropicToResponses struct{}

func (anthropicToResponses) Client() string { return Anthropic }
func (anthropicToResponses) Target() string { return Responses }

func (p anthropicToResponses) Translate(body []byte, model string) (*Translation, error) {
	r, losses, err := decodeAnthropicRequest(body)
	if err != nil {
		return nil, err
	}
	out, more, err := encodeResponsesRequest(r, model)
	if err != nil {
		return nil, err
	}
	return &Translation{Body: out, Losses: mergeLosses(losses, more),
		response: p.Response, newStream: p.NewStream,
	}, nil
}

func (anthropicToResponses) Error(status int, body []byte) (int, []byte) {
	return openAIErrorToAnthropic(status, body)
}

func (p anthropicToResponses) Request(body []byte, model string) ([]byte, []Loss, error) {
	return requestOnly(p, body, model)
}

func (anthropicToResponses) Response(body []byte) ([]byte, error) {
	r, err := decodeResponsesAnswer(body)
	if err != nil {
		return nil, err
	}
	return encodeAnthropicResponse(r)
}

func (anthropicToResponses) NewStream() Stream { return newResponsesToAnthropicStream() }
