package translate

// What the three pairs serving OpenAI Chat Completions clients share
// (pair_chat_anthropic.go, pair_chat_gemini.go, pair_chat_responses.go):
// a Chat client's request decoded, the target's encoder, and the Chat
// writer over the target's decoder.

// chatIncludeUsageNeed names what only a Translation carries back: the
// client asked for the usage chunk of a stream; Pair.NewStream, which
// knows nothing of the request, writes none.
const chatIncludeUsageNeed = "stream_options.include_usage (carried only through Pair.Translate)"

// chatClientTranslation is the glue of one Chat-client pair: decode,
// encode for the target, and the answers' way back.
func chatClientTranslation(body []byte, target string, encode func(*Request) ([]byte, []Loss, error),
	response func([]byte) ([]byte, error), newStream func(includeUsage bool) Stream) (*Translation, error) {
	r, opts, losses, err := decodeChatClientRequest(body)
	if err != nil {
		return nil, err
	}
	out, more, err := encode(r)
	if err != nil {
		return nil, err
	}
	t := &Translation{Body: out, Losses: chatClientLosses(mergeLosses(losses, more), r, target),
		response: response, newStream: func() Stream { return newStream(opts.includeUsage) }}
	if opts.includeUsage && r.Stream {
		t.needs = []string{chatIncludeUsageNeed}
	}
	return t, nil
}

// chatClientLosses adjusts an encoder's losses to a Chat client: the
// encoders name them in the words of the phase-1 clients. Chat has no
// stop_sequence stop reason (finish_reason is "stop" whether or not a
// sequence matched), so a target reporting a matched sequence as a plain
// stop loses nothing a Chat client could read. A Gemini thought signature
// a client sends back (extra_content of Gemini's OpenAI endpoint) goes to
// Gemini only.
func chatClientLosses(losses []Loss, r *Request, target string) []Loss {
	out := withoutLoss(losses, stopSequenceLoss)
	if target == Gemini {
		return out
	}
	for _, m := range r.Messages {
		for _, b := range m.Blocks {
			if b.Kind == KindToolCall && b.Opaque != nil && b.Opaque.Origin == Gemini {
				return addLoss(out, "gemini thought signatures (kept for gemini only)", false)
			}
		}
	}
	return out
}
