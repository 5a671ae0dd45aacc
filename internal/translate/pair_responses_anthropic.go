package translate

import "sort"

// responsesToAnthropic serves OpenAI Responses clients with an Anthropic
// Messages provider.
type responsesToAnthropic struct{}

func (responsesToAnthropic) Client() string { return Responses }
func (responsesToAnthropic) Target() string { return Anthropic }

func (responsesToAnthropic) Translate(body []byte, model string) (*Translation, error) {
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
		needs:     customNeeds(custom),
	}, nil
}

func (responsesToAnthropic) Error(status int, body []byte) (int, []byte) {
	return anthropicErrorToOpenAI(status, body)
}

// Request refuses custom tools: Response and NewStream could not give
// their calls back as custom_tool_call items.
func (p responsesToAnthropic) Request(body []byte, model string) ([]byte, []Loss, error) {
	return requestOnly(p, body, model)
}

func (responsesToAnthropic) Response(body []byte) ([]byte, error) {
	r, err := decodeAnthropicResponse(body)
	if err != nil {
		return nil, err
	}
	return encodeResponsesResponse(r, nil)
}

func (responsesToAnthropic) NewStream() Stream { return newAnthropicToResponsesStream(nil) }

func customNeeds(custom map[string]bool) []string {
	var needs []string
	for name := range custom {
		needs = append(needs, "custom tool "+name+" (carried only through Pair.Translate)")
	}
	sort.Strings(needs)
	return needs
}
