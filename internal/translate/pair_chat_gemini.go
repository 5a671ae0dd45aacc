package translate

// chatToGemini serves OpenAI Chat Completions clients with a Gemini
// provider (generateContent, streamGenerateContent?alt=sse).
type chatToGemini struct{}

func (chatToGemini) Client() string { return OpenAI }
func (chatToGemini) Target() string { return Gemini }

// Translate ignores targetModel: Gemini names the model in the path (TargetPath).
func (p chatToGemini) Translate(body []byte, _ string) (*Translation, error) {
	return chatClientTranslation(body, Gemini, encodeGeminiRequest, p.Response, newGeminiToChatStream)
}

func (p chatToGemini) Request(body []byte, model string) ([]byte, []Loss, error) {
	return requestOnly(p, body, model)
}

func (chatToGemini) Response(body []byte) ([]byte, error) {
	r, err := decodeGeminiResponse(body)
	if err != nil {
		return nil, err
	}
	return encodeChatResponse(r)
}

func (chatToGemini) NewStream() Stream { return newGeminiToChatStream(false) }

func (chatToGemini) Error(status int, body []byte) (int, []byte) {
	return geminiErrorToOpenAI(status, body)
}

// newGeminiToChatStream is the Gemini decoder writing a Chat stream, with
// its errors in OpenAI's terms.
func newGeminiToChatStream(includeUsage bool) Stream {
	return openAIClientStream(newGeminiStream(newChatWriter(includeUsage)))
}
