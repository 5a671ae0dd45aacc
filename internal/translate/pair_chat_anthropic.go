package translate

// chatToAnthropic serves OpenAI Chat Completions clients with an
// Anthropic Messages provider.
type chatToAnthropic struct{}

func (chatToAnthropic) Client() string { return OpenAI }
func (chatToAnthropic) Target() string { return Anthropic }

func (p chatToAnthropic) Translate(body []byte, model string) (*Translation, error) {
	return chatClientTranslation(body, Anthropic,
		func(r *Request) ([]byte, []Loss, error) { return encodeAnthropicRequest(r, model) },
		p.Response, newAnthropicToChatStream)
}

func (p chatToAnthropic) Request(body []byte, model string) ([]byte, []Loss, error) {
	return requestOnly(p, body, model)
}

func (chatToAnthropic) Response(body []byte) ([]byte, error) {
	r, err := decodeAnthropicResponse(body)
	if err != nil {
		return nil, err
	}
	return encodeChatResponse(r)
}

func (chatToAnthropic) NewStream() Stream { return newAnthropicToChatStream(false) }

func (chatToAnthropic) Error(status int, body []byte) (int, []byte) {
	return anthropicErrorToOpenAI(status, body)
}

// newAnthropicToChatStream is the Anthropic decoder writing a Chat
// stream; its errors are OpenAI's already.
func newAnthropicToChatStream(includeUsage bool) Stream {
	return newAnthropicStream(&chatItems{w: newChatWriter(includeUsage)})
}
