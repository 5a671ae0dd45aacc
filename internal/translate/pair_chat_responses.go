package translate

// chatToResponses serves OpenAI Chat Completions clients with an OpenAI
// Responses provider (sent with store false).
type chatToResponses struct{}

func (chatToResponses) Client() string { return OpenAI }
func (chatToResponses) Target() string { return Responses }

func (p chatToResponses) Translate(body []byte, model string) (*Translation, error) {
	return chatClientTranslation(body, Responses,
		func(r *Request) ([]byte, []Loss, error) { return encodeResponsesRequest(r, model) },
		p.Response, newResponsesToChatStream)
}

func (p chatToResponses) Request(body []byte, model string) ([]byte, []Loss, error) {
	return requestOnly(p, body, model)
}

func (chatToResponses) Response(body []byte) ([]byte, error) {
	r, err := decodeResponsesAnswer(body)
	if err != nil {
		return nil, err
	}
	return encodeChatResponse(r)
}

func (chatToResponses) NewStream() Stream { return newResponsesToChatStream(false) }

func (chatToResponses) Error(status int, body []byte) (int, []byte) {
	return openAIErrorToChat(status, body)
}

// newResponsesToChatStream is the Responses decoder writing a Chat
// stream, with its errors in OpenAI's terms.
func newResponsesToChatStream(includeUsage bool) Stream {
	return openAIClientStream(newResponsesStream(newChatWriter(includeUsage)))
}
