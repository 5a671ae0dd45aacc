package translate

// responsesToAnthropic serves OpenAI Responses clients with an Anthropic
// Messages provider.
type responsesToAnthropic struct{}

func (responsesToAnthropic) Client() string { return Responses }
func (responsesToAnthropic) Target() string { return Anthropic }

func (responsesToAnthropic) Request(body []byte, model string) (*Translation, error) {
	r, losses, err := decodeResponsesRequest(body)
	if err != nil {
		return nil, err
	}
	out, more, err := encodeAnthropicRequest(r, model)
	if err != nil {
		return nil, err
	}
	custom := customSet(r)
	return &Translation{Body: out, Losses: mergeLosses(losses, more),
		response: func(body []byte) ([]byte, error) {
			r, err := decodeAnthropicResponse(body)
			if err != nil {
				return nil, err
			}
			return encodeResponsesResponse(r, custom)
		},
		newStream: func() Stream { return newAnthropicToResponsesStream(custom) },
	}, nil
}

func (responsesToAnthropic) Error(status int, body []byte) (int, []byte) {
	return anthropicErrorToOpenAI(status, body)
}
