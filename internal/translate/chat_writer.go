package translate

import (
	"fmt"
	"strconv"
)

// chatWriter writes an OpenAI Chat Completions stream for a Chat client
// as a strict state machine: one first chunk (role assistant), content
// and tool-call deltas of choice 0, tool calls numbered 0, 1, 2... one
// after another, each with its own id, whose arguments must parse as a
// JSON object when the call ends; then one chunk with the finish_reason,
// the usage chunk when the client asked for it
// (stream_options.include_usage), and data: [DONE]. Anything else is an
// error, never a clean stop; the error is a data line holding an error
// object, as the proxy writes a native Chat stream's (internal/dialect/openai),
// which the OpenAI SDKs raise.
type chatWriter struct {
	writerPhase
	includeUsage bool
	id           string
	head         []byte // `data: {"id":...,"choices":[{"index":0,"delta":`, built at start
	open         bool   // a block is open
	openKind     Kind
	calls        int    // tool calls opened so far
	args         []byte // the open call's arguments, decoded
	quoted       []byte // appendUnescaped's
	ids          toolIDs
}

func newChatWriter(includeUsage bool) *chatWriter {
	return &chatWriter{includeUsage: includeUsage}
}

// chatCompletionID gives an answer id Chat's shape.
func chatCompletionID(id string) string {
	if len(id) >= 9 && id[:9] == "chatcmpl-" {
		return id
	}
	return "chatcmpl-" + id
}

// chatFinish maps the intermediate stop reasons to Chat's finish_reason;
// a stop reason not here is an error, never a default. Chat says "stop"
// whether or not a stop sequence matched. Anthropic ends an answer that
// filled the context window with model_context_window_exceeded: a length
// stop.
var chatFinish = map[string]string{
	StopEnd:                         "stop",
	StopSequence:                    "stop",
	StopMax:                         "length",
	StopTool:                        "tool_calls",
	StopRefusal:                     "content_filter",
	"model_context_window_exceeded": "length",
}

func (w *chatWriter) start(dst []byte, id, model string, _ Usage) ([]byte, error) {
	if w.started {
		return dst, malformed("a second message start")
	}
	w.started, w.id = true, id
	h := w.head[:0]
	if h == nil {
		h = make([]byte, 0, 160) // room for the usual id and model: one allocation
	}
	h = append(h, `data: {"id":`...)
	h = appendJSONString(h, chatCompletionID(id))
	h = append(h, `,"object":"chat.completion.chunk","created":`...)
	h = strconv.AppendInt(h, now().Unix(), 10)
	h = append(h, `,"model":`...)
	h = appendJSONString(h, model)
	h = append(h, `,"choices":[{"index":0,"delta":`...)
	w.head = h
	dst = append(dst, w.head...)
	return append(dst, `{"role":"assistant","content":""},"finish_reason":null}]}`+"\n\n"...), nil
}

// text appends text (the escaped body of a JSON string) to the content.
func (w *chatWriter) text(dst, escaped []byte) ([]byte, error) {
	if len(escaped) == 0 {
		return dst, nil
	}
	if err := w.live(); err != nil {
		return dst, err
	}
	if w.open && w.openKind != KindText {
		var err error
		if dst, err = w.closeBlock(dst); err != nil {
			return dst, err
		}
	}
	w.open, w.openKind = true, KindText
	dst = append(dst, w.head...)
	dst = append(dst, `{"content":"`...)
	dst = append(dst, escaped...)
	return append(dst, "\"},\"finish_reason\":null}]}\n\n"...), nil
}

// toolStart opens tool call n (its ordinal in the answer, from 0): its id
// is the target's when unique, else made of the answer's id and n, as the
// non-stream answer's (toolIDs).
func (w *chatWriter) toolStart(dst []byte, id, name string, n int) ([]byte, error) {
	if err := w.live(); err != nil {
		return dst, err
	}
	if name == "" {
		return dst, malformed("tool call without a name")
	}
	dst, err := w.closeBlock(dst)
	if err != nil {
		return dst, err
	}
	w.open, w.openKind, w.args = true, KindToolCall, w.args[:0]
	dst = append(dst, w.head...)
	dst = append(dst, `{"tool_calls":[{"index":`...)
	dst = strconv.AppendInt(dst, int64(w.calls), 10)
	w.calls++
	dst = append(dst, `,"id":`...)
	dst = appendJSONString(dst, w.ids.unique(id, w.id, n))
	dst = append(dst, `,"type":"function","function":{"name":`...)
	dst = appendJSONString(dst, name)
	return append(dst, `,"arguments":""}}]},"finish_reason":null}]}`+"\n\n"...), nil
}

// toolArgs appends a fragment of the open call's arguments (the escaped
// body of a JSON string).
func (w *chatWriter) toolArgs(dst, escaped []byte) ([]byte, error) {
	if len(escaped) == 0 {
		return dst, nil
	}
	if err := w.live(); err != nil {
		return dst, err
	}
	if !w.open || w.openKind != KindToolCall {
		return dst, malformed("tool arguments outside a tool call")
	}
	w.args = appendUnescaped(w.args, escaped, &w.quoted)
	dst = append(dst, w.head...)
	dst = append(dst, `{"tool_calls":[{"index":`...)
	dst = strconv.AppendInt(dst, int64(w.calls-1), 10)
	dst = append(dst, `,"function":{"arguments":"`...)
	dst = append(dst, escaped...)
	return append(dst, "\"}}]},\"finish_reason\":null}]}\n\n"...), nil
}

// toolArgsJSON gives the open call its whole arguments, a raw JSON value.
func (w *chatWriter) toolArgsJSON(dst, args []byte) ([]byte, error) {
	quoted := appendJSONString(nil, args)
	return w.toolArgs(dst, quoted[1:len(quoted)-1])
}

// closeBlock ends the open block; a call's arguments must parse as an
// object by then. Chat has no event for it.
func (w *chatWriter) closeBlock(dst []byte) ([]byte, error) {
	if !w.open {
		return dst, nil
	}
	if w.openKind == KindToolCall {
		if err := checkArgs(w.args); err != nil {
			return dst, fmt.Errorf("%w: %w", errMalformed, err)
		}
	}
	w.open = false
	return dst, nil
}

// finish writes the finish_reason chunk, the usage chunk when asked for,
// and [DONE].
func (w *chatWriter) finish(dst []byte, stop, _ string, u Usage) ([]byte, error) {
	if err := w.live(); err != nil {
		return dst, err
	}
	reason, ok := chatFinish[stop]
	if !ok {
		return dst, malformed("stop reason %q has no Chat Completions equivalent", stop)
	}
	dst, err := w.closeBlock(dst)
	if err != nil {
		return dst, err
	}
	w.finished = true
	dst = append(dst, w.head...)
	dst = append(dst, `{},"finish_reason":"`...)
	dst = append(dst, reason...)
	dst = append(dst, "\"}]}\n\n"...)
	if w.includeUsage {
		// The head up to choices, then an empty choices array and usage.
		dst = append(dst, w.head[:len(w.head)-len(`[{"index":0,"delta":`)]...)
		dst = append(dst, `[],"usage":`...)
		dst = appendChatUsage(dst, u)
		dst = append(dst, "}\n\n"...)
	}
	return append(dst, "data: [DONE]\n\n"...), nil
}

// fail writes the Chat error line for err and ends the stream; after
// [DONE] (or an earlier error) nothing more is written.
func (w *chatWriter) fail(dst []byte, err error) []byte {
	if w.finished {
		return dst
	}
	w.finished = true
	k, msg := chatErrorOf(err)
	dst = append(dst, "data: "...)
	dst = append(dst, openAIErrorBody(k, msg)...)
	return append(dst, "\n\n"...)
}

// appendChatUsage writes Chat's usage object: prompt_tokens holds the
// cached reads and the cache writes (Chat has no field of its own for
// the writes), completion_tokens the reasoning.
func appendChatUsage(dst []byte, u Usage) []byte {
	prompt := u.Input + u.CacheRead + u.CacheWrite
	dst = append(dst, `{"prompt_tokens":`...)
	dst = strconv.AppendInt(dst, prompt, 10)
	dst = append(dst, `,"completion_tokens":`...)
	dst = strconv.AppendInt(dst, u.Output, 10)
	dst = append(dst, `,"total_tokens":`...)
	dst = strconv.AppendInt(dst, prompt+u.Output, 10)
	dst = append(dst, `,"prompt_tokens_details":{"cached_tokens":`...)
	dst = strconv.AppendInt(dst, u.CacheRead, 10)
	dst = append(dst, `},"completion_tokens_details":{"reasoning_tokens":`...)
	dst = strconv.AppendInt(dst, u.Reasoning, 10)
	return append(dst, "}}"...)
}

// chatItems is a chatWriter as an itemWriter, for the Anthropic decoder:
// a text item is content, a tool item one call. The target's block index
// names nothing in a Chat stream.
type chatItems struct {
	w     *chatWriter
	calls int
}

func (c *chatItems) isStarted() bool { return c.w.started }

func (c *chatItems) start(dst []byte, id, model string) ([]byte, error) {
	return c.w.start(dst, id, model, Usage{})
}

func (c *chatItems) openItem(dst []byte, kind Kind, _ int, callID, name string) ([]byte, error) {
	if err := c.w.live(); err != nil {
		return dst, err
	}
	if c.w.open {
		return dst, malformed("an output item starts while another is open")
	}
	if kind == KindToolCall {
		c.calls++
		return c.w.toolStart(dst, callID, name, c.calls-1)
	}
	c.w.open, c.w.openKind = true, KindText
	return dst, nil
}

func (c *chatItems) delta(dst []byte, kind Kind, escaped []byte) ([]byte, error) {
	if !c.w.open || c.w.openKind != kind {
		return dst, malformed("a delta outside an output item of its kind")
	}
	if kind == KindText {
		return c.w.text(dst, escaped)
	}
	return c.w.toolArgs(dst, escaped)
}

func (c *chatItems) closeItem(dst []byte) ([]byte, error) {
	if err := c.w.live(); err != nil {
		return dst, err
	}
	if !c.w.open {
		return dst, malformed("no output item is open")
	}
	return c.w.closeBlock(dst)
}

func (c *chatItems) finish(dst []byte, stop string, u Usage) ([]byte, error) {
	if c.w.open {
		return dst, malformed("the message ends inside an output item")
	}
	return c.w.finish(dst, stop, "", u)
}

func (c *chatItems) fail(dst []byte, err error) []byte { return c.w.fail(dst, err) }
