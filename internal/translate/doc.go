// Package translate serves clients of one LLM wire format with providers
// of another (cross-vendor failover, SPEC 19, docs/translation.md), and is
// never silently wrong: what a target cannot carry faithfully is reported
// before anything is sent, and what is carried is exact.
//
// It imports only the standard library, internal/jsonscan and
// internal/sse; the request engine calls it.
//
// # Pairs
//
//	client      target      For(client, target)
//	anthropic   openai      Chat Completions
//	anthropic   responses   OpenAI Responses (store false)
//	anthropic   gemini      generateContent / streamGenerateContent?alt=sse
//	responses   anthropic   Messages
//	openai      anthropic   Messages (Chat Completions clients)
//	openai      gemini      generateContent / streamGenerateContent?alt=sse
//	openai      responses   OpenAI Responses (store false)
//	gemini      anthropic   Messages
//	gemini      openai      Chat Completions
//	responses   gemini      generateContent / streamGenerateContent?alt=sse
//	responses   openai      Chat Completions (Codex on a Chat-only server)
//
// Each format is one client decoder and writer and one target encoder and
// decoder over the intermediate form; a pair is glue (pair_*.go). The
// target-stream decoders write through a client writer (client_writer.go):
// blockWriter for the Chat, Gemini and Responses decoders
// (anthropicWriter, chatWriter, or itemBlocks over any itemWriter),
// itemWriter for the Anthropic decoder's explicit blocks
// (responsesWriter, geminiWriter, or chatItems over a chatWriter);
// clientErrors puts a decoder's in-stream errors in the client's dialect.
// One rule is more than glue: a Responses client's parallel_tool_calls
// false is advisory on Gemini (responsesOnGeminiLosses says why).
//
// A Gemini client's stream mode is in its path (streamGenerateContent
// ?alt=sse), not its body: the engine marks a streamed request with
// WithGeminiStream(body) before Translate. Its stream is written as
// alt=sse `data:` chunks, with no [DONE].
//
// # The API for the engine
//
// Configuration: a provider with `translate <client-format>` is valid only
// when For(client, providerAPI) reports true (Pairs lists them), and only
// with its own key.
//
// Before dialing a candidate whose format differs from the client's:
//
//	pair, _ := translate.For(clientFormat, providerAPI)
//	tr, err := pair.Translate(clientBody, targetModel)   // tr.Body, tr.Losses
//	// err: the client's body is not a valid request:
//	//   translate.ClientError(clientFormat, 400, err.Error()).
//	// translate.Material(tr.Losses): skip this candidate before sending a byte
//	//   (chain "translate_skip", metric); when no candidate is left, answer
//	//   translate.Refusal(clientFormat, allLosses), which names them.
//	// otherwise: send tr.Body to translate.TargetPath(providerAPI, targetModel, stream),
//	//   with the provider's own auth; name translate.Describe(tr.Losses, false)
//	//   in the log and a response header when it is not "".
//
// The target's answer, classified by the target's own dialect (first valid
// event, terminal, fake 200), reaches the client through the translation
// of that request:
//
//	non-stream 2xx:  out, err := tr.Response(targetBody)   // err: a bad answer, fail over before commit
//	error status:    status, out := pair.Error(status, targetBody)
//	stream:          s := tr.NewStream()   // one per attempt
//	                 for each target event: dst, err = s.Event(dst, ev)
//	                 at the target's end of body: dst, err = s.End(dst)
//	                 on any err (or the caller's own, e.g. a read error):
//	                     dst = s.Fail(dst, err)   // the client's error event, then end the response
//
// pair.Request, pair.Response and pair.NewStream are the same without the
// request at hand for the answers: what only a Translation carries back (a
// Responses client's custom tools, e.g. Codex's apply_patch) is then a
// material loss.
//
// Failback: an Anthropic request bound for an Anthropic provider (the
// original vendor, recovered) goes through AnthropicFailback first: with
// thinking on inside a tool-use cycle a translation served, thinking is
// turned off for that request (an advisory loss); anything else passes
// unchanged.
//
// errors.Is(err, ErrAfterEnd) is an event after the target's terminal one:
// the client's answer is complete, Fail writes nothing. An *UpstreamError
// is an error the target sent inside the stream, already in the client's
// error types. Formats switch only before commit; a continuation never
// crosses formats.
//
// Stream.Event allocates nothing per event in steady state (text deltas
// are copied escaped, never decoded); the stream writers are strict state
// machines: one start, paired blocks (items) with monotonic indices, one
// argument buffer per tool call that must parse as a JSON object when the
// call ends, else an error, never `{}` and never a clean stop.
//
// # The intermediate form
//
// Request, Message, Block (text, image, document, tool call with its raw
// arguments, tool result with blocks, reasoning), Tool, ToolChoice and
// Response are a superset of the four formats. Gemini calls without ids
// (older API versions) get ids from their place, and each functionResponse
// answers the call with its id, else the first unanswered call of its
// name; a Gemini client is sent the target's call ids (FunctionCall.id),
// which it sends back. Provider-only state (an
// Anthropic thinking signature or redacted thinking, a Gemini
// thoughtSignature, Responses encrypted reasoning) is an Opaque kept with
// its Origin: it is sent back to that origin only, never forged, never
// shown to a client of another format; elsewhere it is dropped as an
// advisory loss. Structured output is one notion, ResponseFormat (a Chat
// response_format, a Gemini responseSchema or responseJsonSchema): Chat,
// Gemini and Responses targets carry it, Messages refuses it (material);
// Seed and the penalties go to Chat and Gemini, and are advisory losses
// on Messages and Responses.
package translate
