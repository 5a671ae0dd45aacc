package translate

// Responses clients (Codex, openai-go) on Gemini and Chat Completions
// providers: the Responses client decoder and writer glued to each
// target's encoder and decoders, as responsesToAnthropic is.

// responsesOnBlocks is a Responses client's stream from a decoder of
// implied blocks (Chat, Gemini), with its errors in OpenAI's terms.
func responsesOnBlocks(custom map[string]bool, decoder func(blockWriter) Stream) Stream {
	w := newResponsesWriter(custom)
	return openAIClientStream(decoder(&itemBlocks{w: &w}))
}

func chatDecoder(w blockWriter) Stream   { return newChatStream(w) }
func geminiDecoder(w blockWriter) Stream { return newGeminiStream(w) }

// responsesTranslation glues a Responses client's request to a target's
// encoder and its answers' decoder.
func responsesTranslation(body []byte, encode func(*Request) ([]byte, []Loss, error),
	decode func([]byte) (*Response, error), decoder func(blockWriter) Stream,
	adjust func([]Loss) []Loss) (*Translation, error) {
	r, losses, err := decodeResponsesRequest(body)
	if err != nil {
		return nil, err
	}
	out, more, err := encode(r)
	if err != nil {
		return nil, err
	}
	custom := customSet(r)
	return &Translation{Body: out, Losses: adjust(mergeLosses(withoutLoss(losses, assistantLastLoss), more)),
		response: func(body []byte) ([]byte, error) {
			r, err := decode(body)
			if err != nil {
				return nil, err
			}
			return encodeResponsesResponse(r, custom)
		},
		newStream: func() Stream { return responsesOnBlocks(custom, decoder) },
		needs:     customNeeds(custom),
	}, nil
}

// responsesToGemini serves OpenAI Responses clients with a Gemini provider.
type responsesToGemini struct{}

func (responsesToGemini) Client() string { return Responses }
func (responsesToGemini) Target() string { return Gemini }

func (responsesToGemini) Translate(body []byte, _ string) (*Translation, error) {
	return responsesTranslation(body, encodeGeminiRequest, decodeGeminiResponse, geminiDecoder, responsesOnGeminiLosses)
}

// responsesOnGeminiLosses: Gemini cannot be asked for one call at most,
// which the Gemini encoder names as material (an Anthropic client that
// asked may read only the first of two calls). A Responses client's
// parallel_tool_calls false (Codex sends it on every turn) is not so:
// every function_call item of an answer is its own output item, and a
// Responses client runs each and returns each output (Codex does, one
// after another), so more than one call changes how the turn is served,
// not what it asks. Named, advisory. This is the one rule here that is
// more than glue.
func responsesOnGeminiLosses(losses []Loss) []Loss {
	out := losses[:0:0]
	for _, l := range losses {
		if l.What == "disable_parallel_tool_use" {
			l = Loss{What: "parallel_tool_calls false (Gemini may answer with several calls)", Material: false}
		}
		out = addLoss(out, l.What, l.Material)
	}
	return out
}

func (p responsesToGemini) Request(body []byte, model string) ([]byte, []Loss, error) {
	return requestOnly(p, body, model)
}

func (responsesToGemini) Response(body []byte) ([]byte, error) {
	r, err := decodeGeminiResponse(body)
	if err != nil {
		return nil, err
	}
	return encodeResponsesResponse(r, nil)
}

func (responsesToGemini) NewStream() Stream { return responsesOnBlocks(nil, geminiDecoder) }

func (responsesToGemini) Error(status int, body []byte) (int, []byte) {
	return anthropicErrorToOpenAI(geminiErrorToAnthropic(status, body))
}

// responsesToChat serves OpenAI Responses clients with a provider that
// speaks only Chat Completions (vLLM, Ollama...): how Codex runs there.
type responsesToChat struct{}

func (responsesToChat) Client() string { return Responses }
func (responsesToChat) Target() string { return OpenAI }

func (responsesToChat) Translate(body []byte, model string) (*Translation, error) {
	return responsesTranslation(body, func(r *Request) ([]byte, []Loss, error) { return encodeChatRequest(r, model) },
		decodeChatResponse, chatDecoder, func(l []Loss) []Loss { return l })
}

func (p responsesToChat) Request(body []byte, model string) ([]byte, []Loss, error) {
	return requestOnly(p, body, model)
}

func (responsesToChat) Response(body []byte) ([]byte, error) {
	r, err := decodeChatResponse(body)
	if err != nil {
		return nil, err
	}
	return encodeResponsesResponse(r, nil)
}

func (responsesToChat) NewStream() Stream { return responsesOnBlocks(nil, chatDecoder) }

// Error: the Chat error is OpenAI's already; it is read and written again
// through the tables, so that overload, rate limits and context overflow
// carry the codes a Responses client reads.
func (responsesToChat) Error(status int, body []byte) (int, []byte) {
	return anthropicErrorToOpenAI(openAIErrorToAnthropic(status, body))
}

// A Responses client's conversation ending in an assistant message: the
// Responses decoder names it for Anthropic, which continues such a
// message (and whose encoder names it again). Chat and Gemini answer anew
// after it, as the Responses API does: the request means the same there,
// so responsesTranslation leaves that loss out (withoutLoss).
