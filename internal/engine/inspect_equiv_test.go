package engine

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/llmhedge/caddy-llm-hedge/internal/cloud"
	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse/ssetest"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// Issue 24: the relay path reads events by their shape and in one walk.
// These tests hold the new classification to the old one
// (inspect_oracle_test.go) on the recorded streams: the simulator's five
// stream modes, the providers' recorded events of the dialect tests, each
// split into reads at random offsets, and random mutations of every event.

// equivStreams are the streams of every dialect, as SSE.
func equivStreams(t testing.TB) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, tokens := range []int{1, 7, relayBenchTokens} {
		for _, c := range relayCases(t, tokens) {
			s := c.stream
			if c.bedrock {
				var err error
				if s, err = io.ReadAll(cloud.NewBedrockStream(&eventReads{data: c.stream, bedrock: true})); err != nil {
					t.Fatal(err)
				}
			}
			out[fmt.Sprintf("sim %s %d", c.name, tokens)] = s
		}
	}
	out["recorded Anthropic"] = []byte(sseStream(anthropicEvent("message_start", aMessageStart), anthropicEvent("content_block_start", aBlockStart),
		anthropicEvent("ping", aPing), anthropicEvent("content_block_delta", aTextDelta), "data: "+aTextDelta, anthropicEvent("content_block_stop", aBlockStop),
		anthropicEvent("content_block_delta", `{"type":"content_block_delta","index":01,"delta":{"type":"text_delta","text":"x"}}`),
		anthropicEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x\u00e9"}} `),
		anthropicEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"},"error":{}}`),
		// an agent's turn: thinking, its signature, a tool call's arguments
		anthropicEvent("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"thinking","thinking":"","signature":""}}`),
		anthropicEvent("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"thinking_delta","thinking":"The user wants \"x\"."}}`),
		anthropicEvent("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3h"}}`),
		anthropicEvent("content_block_start", `{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_01","name":"Read","input":{}}}`),
		anthropicEvent("content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}`),
		anthropicEvent("content_block_delta", `{"type":"content_block_delta","index":12,"delta":{"type":"input_json_delta","partial_json":"{\"file_path\": \"/a/b\u00e9"}}`),
		"data: "+`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"\"}"}}`,
		// their spellings at the edge of the shape
		anthropicEvent("content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":1}}`),
		anthropicEvent("content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"x","text":"y"}}`),
		anthropicEvent("content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"thinking_delta","text":"x"}}`),
		anthropicEvent("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"thinking_delta","thinking":"x"},"error":null}`),
		anthropicEvent("message_start", `{"type":"content_block_delta","index":1,"delta":{"type":"signature_delta","signature":"s"}}`),
		anthropicEvent("message_delta", aMessageDelta), anthropicEvent("error", aError), anthropicEvent("message_stop", aMessageStop)))
	out["recorded Gemini"] = []byte(geminiSSE(gText1, gText2, gThought, gSigOnly, gFnCall, gFnCall2, gImage, gCode, gSafety, gBlocked, gFeedback,
		gUsage, gEmpty, gTwoA, gTwoHalf, gTwoEnd, gMaxTok, gUnspec, gErr503, gErr500,
		// spellings at the edge of the one-walk usage reading
		`{"candidates":[{"content":{"parts":[{"text":"a"}]}}],"usage\u004detadata":{"promptTokenCount":3},"usageMetadata":{"candidatesTokenCount":4}}`,
		`{"usageMetadata":{"promptTokenCount":3},"usageMetadata":{"candidatesTokenCount":4},"modelVersion":"m"}`,
		`{"modelVersio\u006e":"m1","modelVersion":"m2","usageMetadata":[1]}`,
		`{"candidates":[{"content":{"parts":[{"text":"a"},{"text":"b"}]},"index":0}],"modelVersion":"m"}`,
		`{"candidates":[{"content":{"parts":[{"text":"a","thought":false}]},"index":0.0}],"modelVersion":"m"}`,
		// spellings at the edge of the plain candidates' token scan
		`{"candidates": [{"content": {"parts": [{"text": "Hello"}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 5,"totalTokenCount": 5},"modelVersion": "gemini-2.5-flash","responseId": "r1"}`,
		`{ "candidates" : [ { "index" : 0 , "content" : { "role" : "model" , "parts" : [ { "thoughtSignature" : "c2ln" , "text" : "a\u00e9" } ] } } ] }`,
		`{"candidates":[{"content":{"parts":[{"text":"a"}]}}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"a"}]},"index":1}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"a"}]},"index":00}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"a"}]},"index":0,"index":0}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"a"}]},"content":{"parts":[{"text":"b"}]}}]}`,
		`{"candidates":[{"content":{"parts":[{"text":""}]},"index":0}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"a"}]},"finishReason":"STOP","index":0}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"a"},{"text":"b"}]},"index":0}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"a"}]}},{"content":{"parts":[{"text":"b"}]},"index":1}]}`,
		`{"candidates":[{"content":{"parts":[{"text":1}]}}]}`,
		`{"candidates":[{"content":{"parts":[{"te\u0078t":"a"}]}}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"a\x"}]}}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"a","text":"b"}]}}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"a"}],"role":1}}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"a","thoughtSignature":null}]}}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"a"}]}}],"candidates":[{"content":{"parts":[{"text":"b"}]}}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"a"}]}}],"error":{"code":500}}`,
		`{"candidates":[{"content":{"parts":[{"text":"a"}]}}]`,
		// a thought part's spellings at the edge of the scan
		`{"candidates":[{"content":{"parts":[{"text":"a","thought":true}],"role":"model"},"index":0}],"modelVersion":"m"}`,
		`{ "candidates" : [ { "content" : { "parts" : [ { "thought" : true , "thoughtSignature" : "c2ln" , "text" : "a\u00e9" } ] } } ] }`,
		`{"candidates":[{"content":{"parts":[{"text":"","thought":true}]},"index":0}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"a","thought":tru}]},"index":0}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"a","thought":truex}]},"index":0}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"a","thought":true1}]},"index":0}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"a","thought":"true"}]},"index":0}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"a","thought":1}]},"index":0}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"a","thought":null}]},"index":0}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"a","thought":true,"thought":false}]},"index":0}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"a","thought":true},{"text":"b"}]},"index":0}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"a","thought":true}]},"index":0,"finishReason":"STOP"}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"a","thou\u0067ht":true}]},"index":0}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"a","thought":true]},"index":0}]}`))
	// A stream's plain chunks share their frame around the text
	// (wire.Memo.Frame): chunks that keep it, and chunks that differ
	// from it in every way the frame's shortcut must notice.
	frame := func(text, rest string) string {
		return `{"candidates":[{"content":{"parts":[{"text":` + text + `}],"role":"model"},"index":0}]` + rest + `}`
	}
	out["recorded Gemini frames"] = []byte(geminiSSE(frame(`"a"`, `,"modelVersion":"m"`), frame(`"bc"`, `,"modelVersion":"m"`),
		frame(`""`, `,"modelVersion":"m"`), frame(`"d\"e\u00e9"`, ``), frame(`1`, ``), frame(`"f"`, `,"candidates":[]`),
		frame(`"g"`, `,"modelVersion":`), frame(`"h`, ``), frame(`"i"`, `,"error":{"code":503}`), frame(`"j"`, `,"modelVersion":"m"`),
		`{"candidates":[{"content":{"parts":[{"text":"k"}],"role":"model"},"index":0,"finishReason":"STOP"}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"l"}],"role":"model"},"index":0}],"candidates":null}`,
		frame(`"m"`, `,"usageMetadata":{"promptTokenCount":5}`), frame(`"n"`, `,"usageMetadata":{"promptTokenCount":5}`),
		frame(`"o"`, `,"usageMetadata":{"promptTokenCount":6}`), frame(`"p"`, `,"usageMetadata":{"promptTokenCount":5,"x":[}`),
		// a thinking model's thoughts share theirs, which says "thought"
		frame(`"q","thought":true`, `,"modelVersion":"m"`), frame(`"r","thought":true`, `,"modelVersion":"m"`),
		frame(`"s"`, `,"modelVersion":"m"`), frame(`"t","thought":true`, `,"modelVersion":"m"`), frame(`"","thought":true`, `,"modelVersion":"m"`),
		frame(`"u","thought":false`, `,"modelVersion":"m"`), frame(`"v","thought":true`, `,"modelVersion":"m"`),
		frame(`"w","thought":truex`, `,"modelVersion":"m"`), frame(`"x","thought":true`, `,"error":{"code":503}`),
		frame(`"y","thought":true`, `,"modelVersion":"m"`), frame(`"z"`, `,"modelVersion":"m"`), frame(`"a"`, `,"modelVersion":"m"`)))
	// What follows usageMetadata repeats too (wire.Memo.Tail): chunks
	// that repeat it, and chunks that differ from it in every way its
	// shortcut must notice, the model and the usage's own reading included.
	usage := `,"usageMetadata":{"promptTokenCount":5,"totalTokenCount":5}`
	tail := func(text, before, after string) string {
		return `{"candidates":[{"content":{"parts":[{"text":"` + text + `"}],"role":"model"},"index":0}]` + before + usage + after + `}`
	}
	out["recorded Gemini tails"] = []byte(geminiSSE(tail("a", ``, `,"modelVersion":"m","responseId":"r"`),
		tail("b", ``, `,"modelVersion":"m","responseId":"r"`), tail("c", ``, `,"modelVersion":"n","responseId":"r"`),
		tail("d", ``, `,"modelVersion":"n","responseId":"r"`), tail("e", `,"modelVersion":"x"`, `,"modelVersion":"n","responseId":"r"`),
		tail("f", ``, `,"model\u0056ersion":"n","responseId":"r"`), tail("g", ``, `,"model\u0056ersion":"n","responseId":"r"`),
		tail("h", ``, `,"modelVersion":"n","modelVersion":"o"`), tail("i", ``, `,"modelVersion":"n","modelVersion":"o"`),
		tail("j", ``, `,"responseId":"r","error":null`), tail("k", ``, `,"responseId":"r","error":null`),
		tail("l", ``, `,"responseId":"r","error":{"code":503}`), tail("m", ``, `,"modelVersion":"n","responseId":"r"`),
		tail("n", ``, `,"candidates":[]`), tail("o", ``, `,"modelVersion":"n","responseId":"r"`),
		tail("p", ``, `,"promptFeedback":{"blockReason":"SAFETY"}`), tail("q", ``, `,"modelVersion":"n","responseId":"r"`),
		tail("r", ``, usage+`,"modelVersion":"n"`), tail("s", ``, usage+`,"modelVersion":"n"`),
		tail("t", ``, `,"modelVersion":"n","responseId":"r"`)+" ", tail("u", ``, `,"modelVersion":"n","responseId":"r"`),
		tail("v", ``, `,"modelVersion":"n","responseId":"r",`), tail("w", ``, `,"modelVersion":5,"responseId":"r"`),
		tail("x", ``, `,"modelVersion":5,"responseId":"r"`), tail("y", ``, ``), tail("z", ``, ``),
		`{"candidates":[{"content":{"parts":[{"text":"z"}],"role":"model"},"index":0}],"usageMetadata":}`,
		`{"candidates":[{"content":{"parts":[{"text":"z"}],"role":"model"},"index":0}],"usageMetadata":5}`,
		`{"candidates":[{"content":{"parts":[{"text":"z"}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":6}}`,
		`{"usageMetadata":{"promptTokenCount":5,"totalTokenCount":5}}`,
		tail("fin", ``, `,"modelVersion":"n","responseId":"r"`)))
	out["recorded OpenAI"] = []byte(sseStream(openAIChunk(oContent), "data: "+strings.TrimPrefix(strings.TrimSpace(openAIDeltaChunk), "data: "),
		`data: {"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":"a","refusal":null}}],"usage":null}`,
		`data: {"id":"c","choices":[{"index":0,"delta":{"content":"a","content":"b"}}]}`,
		`data: {"id":"c","choices":[{"index":0,"delta":{"content":"a","tool_calls":[{"index":0}]}}]}`,
		`data: {"id":"c","choices":[{"index":1,"delta":{"content":"a"}},{"index":0,"delta":{"content":"b"}}]}`,
		`data: {"id":"c","choices":[{"index":0,"delta":{"content":"a"}}],"usage":{"prompt_tokens":1}}`,
		`data: {"id":"c","choices":[{"index":0,"delta":{"content":null,"audio":{}}}]}`,
		`data: {"id":"c","choices":[{"index":0,"delta":{"content":""},"finish_reason":"stop"}]}`, "data: [DONE]"))
	// chunks around the frame a content delta leaves in the memo (OpenAI's
	// obfuscation member included), each after one that sets it again
	chunk := func(text, tail string) string {
		return `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":` + text +
			`},"logprobs":null,"finish_reason":null}],"usage":null` + tail + `}`
	}
	var chunks []string
	for _, v := range []string{chunk(`"b"`, `,"obfuscation":"xy"`), chunk(`""`, `,"obfuscation":"x"`), chunk(`null`, `,"obfuscation":"x"`),
		chunk(`"a\u00e9\n"`, `,"obfuscation":"x"`), chunk(`"a\x"`, `,"obfuscation":"x"`), chunk(`"b"`, `,"obfuscation":5`),
		chunk(`"b"`, `,"obfuscation":"x","error":{"message":"m"}`), chunk(`"b"`, `,"obfuscation":"x"} `), chunk(`"b"`, `,"obfuscation":"x"}}`),
		chunk(`"b"`, `,"obfuscation":"x" `), chunk(`"b"`, ``), chunk(`"b"`, `,"obfuscation":"x","obfuscation":"y"`),
		chunk(`"b","content":"c"`, `,"obfuscation":"x"`), chunk(`"b","role":"assistant"`, `,"obfuscation":"x"`),
		chunk(`"b"`, `,"obfuscation":"x"`) + "\n", strings.Replace(chunk(`"b"`, `,"obfuscation":"x"`), `"usage":null`, `"usage":{"prompt_tokens":1}`, 1),
		strings.Replace(chunk(`"b"`, `,"obfuscation":"x"`), `"finish_reason":null`, `"finish_reason":"stop"`, 1),
		strings.Replace(chunk(`"b"`, `,"obfuscation":"x"`), `"index":0`, `"index":1`, 1)} {
		chunks = append(chunks, chunk(`"a"`, `,"obfuscation":"abc"`), v)
		// each also a stream of its own: the memo's frame met fresh
		// (wire.MemoMisses stops a stream keeping frames it never meets)
		out[fmt.Sprintf("recorded OpenAI frame %02d", len(chunks)/2)] = []byte(sseStream(chunk(`"a"`, `,"obfuscation":"abc"`), v, "data: [DONE]"))
	}
	chunks = append(chunks, chunk(`"a"`, ``), chunk(`"b"`, ``), chunk(`"c"`, `,"obfuscation":"x"`), chunk(`"d"`, ``), "data: [DONE]")
	out["recorded OpenAI frames"] = []byte(sseStream(chunks...))
	// the same around a tool call's arguments (its frame), after the
	// call's first chunk and a content delta
	args := func(delta, tail string) string {
		return strings.Replace(chunk(`"X"`, tail), `{"content":"X"}`, delta, 1)
	}
	call := func(v string) string { return `{"tool_calls":[{"index":1,"function":{"arguments":` + v + `}}]}` }
	first := args(strings.Replace(call(`""`), `"function"`, `"id":"call_1","type":"function","function"`, 1), ``)
	var calls []string
	for _, v := range []string{args(call(`"\"b\":2"`), `,"obfuscation":"xy"`), args(call(`""`), `,"obfuscation":"x"`),
		args(call(`null`), `,"obfuscation":"x"`), args(call(`"\u00e9\n"`), ``), args(call(`"a\x"`), ``),
		args(call(`"bb"`), `,"obfuscation":"x","error":{"message":"m"}`), args(call(`"bb"`), `,"obfuscation":"x"}`),
		args(strings.Replace(call(`"bb"`), `"index":1`, `"index":2`, 1), ``), args(call(`"bb"`)+`,"content":"c"`, ``),
		args(strings.Replace(call(`"bb"`), `}}]}`, `}},{"index":2,"function":{"arguments":"c"}}]}`, 1), ``),
		args(strings.Replace(call(`"bb"`), `"function"`, `"id":"call_1","type":"function","function"`, 1), ``),
		strings.Replace(args(call(`"bb"`), ``), `"finish_reason":null`, `"finish_reason":"tool_calls"`, 1),
		strings.Replace(args(call(`"bb"`), ``), `"usage":null`, `"usage":{"prompt_tokens":1}`, 1),
		strings.Replace(args(call(`"bb"`), ``), `"index":0,"delta"`, `"index":1,"delta"`, 1),
		strings.Replace(args(call(`"bb"`), ``), `"choices":[{`, `"choices":[{"index":1,"delta":{"content":"z"}},{`, 1),
		strings.Replace(args(call(`"bb"`), ``), `,"finish_reason":null`, `,"finish_reason":null,"index":0`, 1),
		strings.Replace(args(call(`"bb"`), ``), `"id":"c",`, `"x":{"delta":{"tool_calls":[{"index":1,"function":{"arguments":"q"}}]}},"id":"c",`, 1),
	} {
		// v again around other arguments: read by the frame v left, if any
		again := strings.Replace(v, `"bb"`, `"cc"`, 1)
		calls = append(calls, chunk(`"a"`, ``), first, args(call(`"{\"a\":"`), `,"obfuscation":"abc"`), v, again)
		out[fmt.Sprintf("recorded OpenAI call frame %02d", len(calls)/5)] = []byte(sseStream(calls[len(calls)-5:]...))
	}
	out["recorded OpenAI call frames"] = []byte(sseStream(append(calls, "data: [DONE]")...))
	// and around a reasoning or refusal string (DeepSeek's reasoning
	// chunks hold "content":null before it)
	var thoughts []string
	for _, v := range []string{args(`{"reasoning_content":"bb"}`, ``), args(`{"content":null,"reasoning_content":"bb"}`, `,"obfuscation":"x"`),
		args(`{"reasoning":"bb"}`, ``), args(`{"refusal":"bb"}`, ``), args(`{"reasoning_content":""}`, ``),
		args(`{"content":"","reasoning_content":"bb"}`, ``), args(`{"content":"c","reasoning_content":"bb"}`, ``),
		args(`{"reasoning_content":"bb","content":"c"}`, ``), args(`{"reasoning_content":"bb","reasoning_content":"d"}`, ``),
		args(`{"reasoning_content":"bb","tool_calls":[{"index":0,"function":{"arguments":"x"}}]}`, ``),
		args(`{"reasoning_content":"bb","role":"assistant"}`, ``), args(`{"reasoning_content":5}`, ``),
		strings.Replace(args(`{"reasoning_content":"bb"}`, ``), `"finish_reason":null`, `"finish_reason":"stop"`, 1),
		strings.Replace(args(`{"reasoning_content":"bb"}`, ``), `"usage":null`, `"usage":{"prompt_tokens":1}`, 1),
		strings.Replace(args(`{"reasoning_content":"bb"}`, ``), `"choices":[{`, `"choices":[{"index":1,"delta":{"content":"z"}},{`, 1),
	} {
		again := strings.Replace(v, `"bb"`, `"cc"`, 1)
		thoughts = append(thoughts, chunk(`"a"`, ``), args(`{"reasoning_content":"r"}`, ``), v, again)
		out[fmt.Sprintf("recorded OpenAI reasoning frame %02d", len(thoughts)/4)] = []byte(sseStream(thoughts[len(thoughts)-4:]...))
	}
	out["recorded OpenAI reasoning frames"] = []byte(sseStream(append(thoughts, "data: [DONE]")...))
	// whole Gemini chunks around their text (wire.Memo.Chunk), each
	// variant after a chunk that sets the memo again
	gchunk := func(text, after string) string {
		return `{"candidates":[{"content":{"parts":[{"text":` + text + `}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":5,"totalTokenCount":5}` + after + `}`
	}
	var gchunks []string
	for _, v := range []string{gchunk(`"b"`, `,"modelVersion":"m","responseId":"r"`), gchunk(`""`, `,"modelVersion":"m","responseId":"r"`),
		gchunk(`"\u00e9\n"`, `,"modelVersion":"m","responseId":"r"`), gchunk(`"a\x"`, `,"modelVersion":"m","responseId":"r"`),
		gchunk(`"b"`, `,"modelVersion":"n","responseId":"r"`), gchunk(`"b"`, `,"modelVersion":"m","responseId":"r"`) + " ",
		gchunk(`"b"`, `,"modelVersion":"m","responseId":"r"`) + "}", gchunk(`"b","thought":true`, `,"modelVersion":"m","responseId":"r"`),
		strings.Replace(gchunk(`"b"`, `,"modelVersion":"m","responseId":"r"`), `"index":0}`, `"index":0,"finishReason":"STOP"}`, 1),
		strings.Replace(gchunk(`"b"`, `,"modelVersion":"m","responseId":"r"`), `"promptTokenCount":5`, `"promptTokenCount":6`, 1),
		`{"usageMetadata":{"promptTokenCount":5},"candidates":[{"content":{"parts":[{"text":"b"}],"role":"model"},"index":0}],"modelVersion":"m"}`,
		`{"usageMetadata":{"promptTokenCount":5},"candidates":[{"content":{"parts":[{"text":"c"}],"role":"model"},"index":0}],"modelVersion":"m"}`} {
		gchunks = append(gchunks, gchunk(`"a"`, `,"modelVersion":"m","responseId":"r"`), v)
		// each also a stream of its own: the chunk is kept once its usage
		// has repeated, so the second "a" sets the memo the variant meets
		a := gchunk(`"a"`, `,"modelVersion":"m","responseId":"r"`)
		out[fmt.Sprintf("recorded Gemini chunk %02d", len(gchunks)/2)] = []byte(geminiSSE(a, a, v))
	}
	out["recorded Gemini chunks"] = []byte(geminiSSE(gchunks...))
	// the same for a thought's chunks, whose memo says "thought"
	var tchunks []string
	for _, v := range []string{gchunk(`"b","thought":true`, `,"modelVersion":"m","responseId":"r"`), gchunk(`"b"`, `,"modelVersion":"m","responseId":"r"`),
		gchunk(`"","thought":true`, `,"modelVersion":"m","responseId":"r"`), gchunk(`"b","thought":false`, `,"modelVersion":"m","responseId":"r"`),
		gchunk(`"b","thought":true`, `,"modelVersion":"n","responseId":"r"`), gchunk(`"b","thought":true`, `,"modelVersion":"m","responseId":"r"`) + "}",
		strings.Replace(gchunk(`"b","thought":true`, `,"modelVersion":"m","responseId":"r"`), `"index":0}`, `"index":0,"finishReason":"STOP"}`, 1)} {
		a := gchunk(`"a","thought":true`, `,"modelVersion":"m","responseId":"r"`)
		tchunks = append(tchunks, a, v)
		// and the answer's text after the thoughts (a plain chunk)
		out[fmt.Sprintf("recorded Gemini thought chunk %02d", len(tchunks)/2)] = []byte(geminiSSE(a, a, v, gchunk(`"z"`, `,"modelVersion":"m","responseId":"r"`)))
	}
	out["recorded Gemini thought chunks"] = []byte(geminiSSE(append(tchunks, gchunk(`"z"`, `,"modelVersion":"m","responseId":"r"`))...))
	out["recorded Responses"] = []byte(responsesStream(rCreated, rInProgress, rItemAdded, rPartAdded, rTextDelta, rTextDelta2, rTextDone, rPartDone,
		rItemDone, rCompleted, rIncomplete, rFailed, rError, rErrorObj, rFnAdded, rFnDelta, rRsAdded, rRsPart, rRsDelta, rRsDone, rRefusal))
	// Deltas that end in their sequence_number (the simulator's, and
	// providers' that put it last): the members between the delta and
	// that number are read from the stream's memo when they repeat.
	seqLast := func(delta, tail string) string {
		return "event: response.output_text.delta\ndata: " +
			`{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":` + delta + tail
	}
	base := seqLast(`"a"`, `,"logprobs":[],"sequence_number":4}`)
	last := []string{base}
	for _, v := range []string{
		seqLast(`"b"`, `,"logprobs":[],"sequence_number":5}`), seqLast(`"b"`, `,"logprobs":[],"sequence_number":05}`),
		seqLast(`"b"`, `,"logprobs":[],"sequence_number":5.0}`), seqLast(`"b"`, `,"logprobs":[],"sequence_number":"5"}`),
		seqLast(`"b"`, `,"logprobs":[],"sequence_number":5} `), seqLast(`"b"`, `,"logprobs":[],"sequence_number":5,"x":1}`),
		seqLast(`"b"`, `,"logprobs":[],"sequence_number":5}}`), seqLast(`"b"`, `,"logprobs":[1],"sequence_number":5}`),
		seqLast(`"b"`, `,"logprobs":[],"sequence_number":}`), seqLast(`"b"`, `,"logprobs":[],"sequence_number":5`),
		seqLast(`"b"`, `,"logprobs":[],"sequence_number":-5}`), seqLast(`"b"`, `,"logprobs":[],"sequence_number":5,"sequence_number":6}`),
		seqLast(`"b"`, `,"logprobs":[],"error":null,"sequence_number":5}`), seqLast(`"b"`, `,"logprobs":[],"sequence_number":5e1}`),
		seqLast(`""`, `,"logprobs":[],"sequence_number":5}`), seqLast(`"b\"`, `,"logprobs":[],"sequence_number":5}`),
		seqLast(`"b"`, `,"logprobs":[],"sequence_number":5,"delta":"c"}`), seqLast(`"b"`, `,"logprobs":[],"sequence_number":99999999999999999999}`),
	} {
		last = append(last, base, v)
		out[fmt.Sprintf("recorded Responses sequence last %02d", len(last)/2)] = []byte(sseStream(base, base, v))
	}
	out["recorded Responses sequence last"] = []byte(sseStream(last...))
	// spellings at the edge of the text delta's flat scan, some invalid
	var edges []string
	for _, d := range []string{
		`{"type":"response.output_text.delta","delta":"a\u00e9\n","sequence_number":7}`,
		`{"type":"response.output_text.delta","sequence_number":7,"sequence_number":8,"delta":"a"}`,
		`{"type":"response.output_text.delta","sequence_number":07,"delta":"a"}`,
		`{"type":"response.output_text.delta","sequence_number":7.0,"delta":"a"}`,
		`{"type":"response.output_text.delta","sequence_number":-7,"delta":"a"}`,
		`{"type":"response.output_text.delta","delta":"a","error":null}`,
		`{"type":"response.output_text.delta","delta":"a","error":{"message":"x"}}`,
		`{"type":"response.output_text.delta","delta":"a","delta":"b"}`,
		`{"type":"response.output_text.delta","delta":null}`,
		`{"type":"response.output_text.delta","delta":"a","logprobs":[{"token":"a"}]}`,
		`{"type":"response.output_text.delta", "delta":"a"}`,
		`{"type":"response.output_text.delta","delta":"a"} `,
		`{"type":"response.output_text.delta","delta":"a","type":"response.completed"}`,
		`{"type":"response.output_text.delta","del\u0074a":"a"}`,
		`{"type":"response.output_text.delta","item_id":null,"delta":"a"}`,
		`{"type":"response.output_text.delta","delta":"a"`,
		`{"type":"response.output_text.delta"}`,
		`{"type":"response.output_text.delta","delta":"\x"}`,
		// the other deltas read by the flat scan (an agent's turn)
		`{"type":"response.function_call_arguments.delta","sequence_number":9,"item_id":"fc_1","output_index":1,"delta":"{\"cmd\":[\"ls\"","obfuscation":"x"}`,
		`{"type":"response.function_call_arguments.delta","item_id":"fc_1","output_index":1,"delta":"]}","sequence_number":10}`,
		`{"type":"response.function_call_arguments.delta","item_id":"fc_1","output_index":1,"delta":1,"sequence_number":11}`,
		`{"type":"response.function_call_arguments.done","item_id":"fc_1","output_index":1,"arguments":"{}","sequence_number":12}`,
		`{"type":"response.reasoning_text.delta","sequence_number":13,"item_id":"rs_1","output_index":0,"content_index":0,"delta":"Think"}`,
		`{"type":"response.reasoning_summary_text.delta","item_id":"rs_1","output_index":0,"summary_index":0,"delta":"**Plan**","sequence_number":14}`,
		`{"type":"response.reasoning_summary_text.delta","item_id":"rs_1","output_index":0,"summary_index":0,"delta":"**Plan**","error":{"message":"x"}}`,
		`{"type":"response.reasoning_text.delta.x","delta":"a"}`,
		// response objects: the usage observer's reading of them
		`{"type":"response.created","response":{"id":"r","model":"m1","output":[],"usage":null}}`,
		`{"type":"response.completed","response":{"model":"m2","output":[{"type":"message","content":[{"type":"output_text","text":"a\"usage\""}]}],"usage":{"input_tokens":5,"output_tokens":7,"input_tokens_details":{"cached_tokens":2}}}}`,
		`{"type":"response.completed","response":{"model":5,"model":"m3","usage":{"input_tokens":1},"usage":{"output_tokens":9}}}`,
		`{"type":"response.completed","response":{"mod\u0065l":"m4","us\u0061ge":{"input_tokens":3,"output_tokens":4}}}`,
		`{"type":"response.completed","respons\u0065":{"model":"m5","usage":{"input_tokens":6,"output_tokens":6}}}`,
		`{"type":"response.incomplete","response":{"usage":{"input_tokens":"x","output_tokens":8,"output_tokens":10,"input_tokens_details":null}}}`,
		`{"type":"response.completed","response":{"usage":[1,2]}}`,
		`{"type":"response.completed","response":[{"usage":{"input_tokens":1}}]}`,
		`{"type":"response.completed","response": {"model" : "m6" , "usage" : {"input_tokens" : 11} } }`,
		`{"type":"response.completed","response":{"model":"m7","usage":{"input_tokens":12}},"response":{"usage":{"input_tokens":13}}}`,
		`{"type":"response.failed","response":{"model":"m8","error":{"message":"x"},"usage":{"input_tokens":14,"output_tokens":0}}}`,
		`{"type":"response.in_progress","response":{"model":"m9","usage":{"input_tokens":15}}}`,
		`{"type":"response.completed","usage":{"input_tokens":16},"response":{"model":"m10"}}`,
		`{"type":"response.completed","response":{"model":"m11","usage":{"input_tokens":17}}`,
		`{"type":"response.completed","response":{"model":"m12","model":"m13","usage":{"input_tokens":18}}}`,
		`{"response":{"model":"m14","usage":{"input_tokens":19,"output_tokens":3}},"type":"response.completed"}`,
		`{"type":"response.incomplete","response":{"model":"","model":"m15","usage":{"output_tokens":4},"usage":null,"usage":{"input_tokens":20}}}`,
		`{"type":"response.completed","type":"response.completed","response":{"model":"m16","usage":{"input_tokens":21}}}`,
	} {
		edges = append(edges, "event: response.output_text.delta\ndata: "+d, "data: "+d)
	}
	out["recorded Responses edges"] = []byte(sseStream(edges...))
	return out
}

// oldInspect is the oracle's classification for d.
func oldInspect(d wire.Dialect, ev sse.Event, withText bool, cs *wire.ChoiceSet) wire.EventInfo {
	switch d {
	case dialectAnthropic:
		return oldInspectAnthropic(ev, withText)
	case dialectResponses:
		return oldInspectResponses(ev, withText)
	case dialectOpenAI:
		return oldInspectOpenAI(ev, withText, cs)
	case dialectGemini:
		st := oldGeminiStream{candidates: *cs}
		info := oldInspectGeminiStream(ev, withText, &st)
		*cs = st.candidates
		if st.blocked {
			cs.Note(0, true)
		}
		return info
	}
	return d.Inspect(ev, withText, cs)
}

// oldObserve is the oracle's usage reading for d.
func oldObserve(d wire.Dialect, u *wire.Usage, ev sse.Event) {
	if d == dialectGemini {
		if len(ev.Data) > 0 {
			oldObserveGeminiEvent(u, ev)
		}
		return
	}
	u.ObserveEvent(d, ev)
}

// compareEvents runs events through the old and the new reading, as the
// relay does (with text, the stream's choices, usage), and reports the
// first difference.
func compareEvents(d wire.Dialect, evs []sse.Event) error {
	var oldCS, newCS wire.ChoiceSet
	var oldU, newU [2]wire.Usage // by the inspection's withText: the relay's, the gate's
	obs, _ := d.(wire.InfoObserver)
	for i, ev := range evs {
		for k, withText := range []bool{true, false} {
			o, n := oldInspect(d, ev, withText, &oldCS), d.Inspect(ev, withText, &newCS)
			if o.Class != n.Class || o.By != n.By || !bytes.Equal(o.Text, n.Text) || !bytes.Equal(o.ErrVal, n.ErrVal) || !oldCS.SameChoices(&newCS) {
				return fmt.Errorf("event %d %q (text %v): old %v %q %q %q, new %v %q %q %q", i, ev.Raw, withText,
					o.Class, o.By, o.Text, o.ErrVal, n.Class, n.By, n.Text, n.ErrVal)
			}
			if d == dialectResponses && n.UsageRead && n.Usage != nil {
				// the resumer keeps it as the response object a lookup finds
				if v, _ := jsonscan.Lookup(ev.Data, "response"); !bytes.Equal(v, n.Usage) {
					return fmt.Errorf("event %d %q: the response object read %q, a lookup finds %q", i, ev.Raw, n.Usage, v)
				}
			}
			oldObserve(d, &oldU[k], ev)
			if obs != nil {
				obs.ObserveInfo(&newU[k], ev, n)
			} else {
				newU[k].ObserveEvent(d, ev)
			}
			if oldU[k] != newU[k] {
				return fmt.Errorf("event %d %q (text %v): usage old %+v, new %+v", i, ev.Raw, withText, oldU[k], newU[k])
			}
		}
	}
	return nil
}

func dialectOfStream(name string) wire.Dialect {
	switch {
	case bytes.Contains([]byte(name), []byte("Gemini")):
		return dialectGemini
	case bytes.Contains([]byte(name), []byte("Responses")):
		return dialectResponses
	case bytes.Contains([]byte(name), []byte("OpenAI")):
		return dialectOpenAI
	}
	return dialectAnthropic
}

// readSplit parses a stream read in pieces cut at random offsets.
func readSplit(t *testing.T, stream []byte, rng *rand.Rand) []sse.Event {
	t.Helper()
	var cuts []int
	for c := 0; c < len(stream); c += 1 + rng.IntN(300) {
		cuts = append(cuts, c)
	}
	rd := sse.NewReader(&ssetest.SplitReader{Data: stream, Cuts: cuts}, 0)
	var out []sse.Event
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		c := sse.Event{Raw: bytes.Clone(ev.Raw), Data: bytes.Clone(ev.Data)}
		if ev.Name != nil {
			c.Name = bytes.Clone(ev.Name)
		}
		out = append(out, c)
	}
}

func TestInspectMatchesOldClassification(t *testing.T) {
	rng := rand.New(rand.NewPCG(24, 1))
	for name, stream := range equivStreams(t) {
		d := dialectOfStream(name)
		for round := range 5 {
			evs := readSplit(t, stream, rng)
			if len(evs) == 0 {
				t.Fatalf("%s: no events", name)
			}
			if err := compareEvents(d, evs); err != nil {
				t.Fatalf("%s, split %d: %v", name, round, err)
			}
		}
	}
}

// Mutated events reach the edges of the shapes the fast paths accept:
// a byte dropped, changed or inserted anywhere, the data cut short, the
// event name dropped or changed.
func TestInspectMatchesOldClassificationMutated(t *testing.T) {
	rng := rand.New(rand.NewPCG(24, 2))
	for name, stream := range equivStreams(t) {
		d := dialectOfStream(name)
		for _, ev := range parseEvents(t, string(stream)) {
			for range 40 {
				m := mutateEvent(rng, ev)
				if err := compareEvents(d, []sse.Event{m}); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				// After the event it mutates: what a stream's memo of
				// its repeated members holds is then the original's.
				if err := compareEvents(d, []sse.Event{ev, m}); err != nil {
					t.Fatalf("%s, after the original: %v", name, err)
				}
			}
		}
	}
}

// mutateEvent is ev with a byte of its data dropped, changed or inserted,
// or the data cut short, and perhaps its name dropped or changed.
func mutateEvent(rng *rand.Rand, ev sse.Event) sse.Event {
	const alphabet = "\"\\{}[],: \t\n0123456789aeltnurx-.E\x00\xff"
	data := bytes.Clone(ev.Data)
	switch i := rng.IntN(len(data) + 1); rng.IntN(4) {
	case 0:
		data = data[:i]
	case 1:
		if i < len(data) {
			data = append(data[:i], data[i+1:]...)
		}
	case 2:
		if i < len(data) {
			data[i] = alphabet[rng.IntN(len(alphabet))]
		}
	case 3:
		data = append(data[:i], append([]byte{alphabet[rng.IntN(len(alphabet))]}, data[i:]...)...)
	}
	m := sse.Event{Raw: ev.Raw, Name: ev.Name, Data: data}
	switch rng.IntN(6) {
	case 0:
		m.Name = nil
	case 1:
		m.Name = []byte("error")
	case 2:
		m.Name = []byte("ping")
	}
	return m
}
