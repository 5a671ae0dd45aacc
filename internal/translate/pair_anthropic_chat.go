package translate

// anthropicToChat serves Anthropic Messages clients with an OpenAI Chat
// Completions provider.
type anthropicToChat struct{}

func (anthropicToChat) Client() string { return Anthropic }
func (anthropicToChat) Target() string { return OpenAI }

func (p anthropicToChat) Translate(body []byte, model string) (*Translation, error) {
	r, losses, err := decodeAnthropicRequest(body)
	if err != nil {
		return nil, err
	}
	out, more, err := encodeChatRequest(r, model)
	if err != nil {
		return nil, err
	}
	return &Translation{Body: out, Losses: mergeLosses(losses, more),
		response: p.Response, newStream: p.NewStream,
	}, nil
}

func (anthropicToChat) Error(status int, body []byte) (int, []byte) {
	return openAIErrorToAnthropic(status, body)
}

func mergeLosses(a, b []Loss) []Loss {
	for _, l := range b {
		a = addLoss(a, l.What, l.Material)
	}
	return a
}

func (p anthropicToChat) Request(body []byte, model string) ([]byte, []Loss, error) {
	return requestOnly(p, body, model)
}

func (anthropicToChat) Response(body []byte) ([]byte, error) {
	r, err := decodeChatResponse(body)
	if err != nil {
		return nil, err
	}
	return encodeAnthropicResponse(r)
}

func (anthropicToChat) NewStream() Stream { return newChatToAnthropicStream() }
