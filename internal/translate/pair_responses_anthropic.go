package translate

// responsesToAnthropic serves OpenAI Responses clients with an Anthropic
// Messages provider.
type responsesToAnthropic struct{}

func (responsesToAnthropic) Client() string { return Responses }
func (responsesToAnthropic) Target() string { return Anthropic }

func (responsesToAnthropic) Request(body []byte, model string) ([]byte, []Loss, error) {
	r, losses, err := decodeResponsesRequest(body)
	if err != nil {
		return nil, nil, err
	}
	out, more, err := encodeAnthropicRequest(r, model)
	if err != nil {
		return nil, nil, err
	}
	return out, mergeLosses(losses, more), nil
}

func (responsesToAnthropic) Response(body []byte) ([]byte, error) {
	r, err := decodeAnthropicResponse(body)
	if err != nil {
		return nil, err
	}
	return encodeResponsesResponse(r)
}

func (responsesToAnthropic) NewStream() Stream { return newAnthropicToResponsesStream() }

func (responsesToAnthropic) Error(status int, body []byte) (int, []byte) {
	return anthropicErrorToOpenAI(status, body)
}
