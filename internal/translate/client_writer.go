package translate

import (
	"errors"

	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
)

// The client side of a stream, as the target-stream decoders drive it.
// Each client format has one writer; each target format one decoder
// (chat_stream.go, gemini_stream.go, responses_stream.go,
// anthropic_stream.go), so that one decoder serves every client format
// and a pair is glue. A decoder drives one of two interfaces, after the
// shape of its target's stream:
//
//   - blockWriter: content blocks, Anthropic's model (the Chat, Gemini and
//     Responses decoders: Chat and Gemini send text and calls without
//     starts or stops, text opens a text block, a call closes what is
//     open). anthropicWriter and chatWriter are; itemBlocks makes any
//     itemWriter one.
//   - itemWriter: output items opened and closed explicitly, numbered by
//     the target's block index (the Anthropic decoder: a Responses
//     client's item ids carry that index, which skipped thinking blocks
//     keep). responsesWriter and geminiWriter are; chatItems makes the
//     chatWriter one.
//
// A decoder's UpstreamError is in the vocabulary of the client it was
// first written for (Anthropic's error types from the Chat, Gemini and
// Responses decoders, OpenAI's from the Anthropic decoder); clientErrors
// puts it in the client's own, so that every writer reads its client's
// errors only.

// blockWriter is what the Chat, Gemini and Responses decoders write
// through.
type blockWriter interface {
	start(dst []byte, id, model string, u Usage) ([]byte, error)
	text(dst, escaped []byte) ([]byte, error)
	toolStart(dst []byte, id, name string, n int) ([]byte, error)
	toolArgs(dst, escaped []byte) ([]byte, error)
	toolArgsJSON(dst, args []byte) ([]byte, error)
	closeBlock(dst []byte) ([]byte, error)
	finish(dst []byte, stop, stopSeq string, u Usage) ([]byte, error)
	fail(dst []byte, err error) []byte
	isStarted() bool
}

// itemWriter is what the Anthropic decoder (anthropicToResponsesStream)
// writes through.
type itemWriter interface {
	start(dst []byte, id, model string) ([]byte, error)
	openItem(dst []byte, kind Kind, block int, callID, name string) ([]byte, error)
	delta(dst []byte, kind Kind, escaped []byte) ([]byte, error)
	closeItem(dst []byte) ([]byte, error)
	finish(dst []byte, stop string, u Usage) ([]byte, error)
	fail(dst []byte, err error) []byte
	isStarted() bool
}

var (
	_ blockWriter = (*anthropicWriter)(nil)
	_ blockWriter = (*chatWriter)(nil)
	_ blockWriter = (*itemBlocks)(nil)
	_ itemWriter  = (*responsesWriter)(nil)
	_ itemWriter  = (*geminiWriter)(nil)
	_ itemWriter  = (*chatItems)(nil)
)

func (p *writerPhase) isStarted() bool { return p.started }

// itemBlocks drives an itemWriter from a decoder of implied blocks: text
// opens a text item unless one is open, a tool call closes the open item
// and opens its own. Block indices count the items opened, as the
// non-stream answers number their blocks. Ids the target left empty or
// repeated (Gemini's) are made as the non-stream decoders make them.
type itemBlocks struct {
	w        itemWriter
	open     bool
	openKind Kind
	next     int
	ids      toolIDs
	id       string
}

func (a *itemBlocks) isStarted() bool { return a.w.isStarted() }

func (a *itemBlocks) start(dst []byte, id, model string, _ Usage) ([]byte, error) {
	a.id = id
	return a.w.start(dst, id, model)
}

func (a *itemBlocks) text(dst, escaped []byte) ([]byte, error) {
	if len(escaped) == 0 {
		return dst, nil
	}
	if !a.open || a.openKind != KindText {
		var err error
		if dst, err = a.closeBlock(dst); err != nil {
			return dst, err
		}
		if dst, err = a.w.openItem(dst, KindText, a.next, "", ""); err != nil {
			return dst, err
		}
		a.open, a.openKind = true, KindText
		a.next++
	}
	return a.w.delta(dst, KindText, escaped)
}

func (a *itemBlocks) toolStart(dst []byte, id, name string, n int) ([]byte, error) {
	if name == "" {
		return dst, malformed("tool call without a name")
	}
	dst, err := a.closeBlock(dst)
	if err != nil {
		return dst, err
	}
	if dst, err = a.w.openItem(dst, KindToolCall, a.next, a.ids.unique(id, a.id, n), name); err != nil {
		return dst, err
	}
	a.open, a.openKind = true, KindToolCall
	a.next++
	return dst, nil
}

func (a *itemBlocks) toolArgs(dst, escaped []byte) ([]byte, error) {
	if len(escaped) == 0 {
		return dst, nil
	}
	if !a.open || a.openKind != KindToolCall {
		return dst, malformed("tool arguments outside a tool call")
	}
	return a.w.delta(dst, KindToolCall, escaped)
}

func (a *itemBlocks) toolArgsJSON(dst, args []byte) ([]byte, error) {
	quoted := appendJSONString(nil, args)
	return a.toolArgs(dst, quoted[1:len(quoted)-1])
}

func (a *itemBlocks) closeBlock(dst []byte) ([]byte, error) {
	if !a.open {
		return dst, nil
	}
	a.open = false
	return a.w.closeItem(dst)
}

func (a *itemBlocks) finish(dst []byte, stop, _ string, u Usage) ([]byte, error) {
	if !a.w.isStarted() {
		return dst, malformed("content before the message start")
	}
	dst, err := a.closeBlock(dst)
	if err != nil {
		return dst, err
	}
	return a.w.finish(dst, stop, u)
}

func (a *itemBlocks) fail(dst []byte, err error) []byte { return a.w.fail(dst, err) }

// clientErrors puts the errors a decoder reports in the dialect of the
// client its writer serves: the decoders of Chat, Gemini and Responses
// streams report Anthropic error types (they were written for Anthropic
// clients first), the decoder of Anthropic streams OpenAI's. What Event and End
// return (and Fail writes) is then the client's own, as Stream says.
type clientErrors struct {
	s       Stream
	convert func(*UpstreamError) *UpstreamError
}

func (c *clientErrors) conv(err error) error {
	if err == nil {
		return nil // before the declaration below, which escapes: no allocation per event
	}
	return c.convertErr(err)
}

func (c *clientErrors) convertErr(err error) error {
	var ue *UpstreamError
	if errors.As(err, &ue) {
		return c.convert(ue)
	}
	return err
}

func (c *clientErrors) Event(dst []byte, ev sse.Event) ([]byte, error) {
	dst, err := c.s.Event(dst, ev)
	return dst, c.conv(err)
}

func (c *clientErrors) End(dst []byte) ([]byte, error) {
	dst, err := c.s.End(dst)
	return dst, c.conv(err)
}

func (c *clientErrors) Fail(dst []byte, err error) []byte { return c.s.Fail(dst, c.conv(err)) }

// Finished passes the decoder's own on (Chat's and Gemini's finish before
// their streams end).
func (c *clientErrors) Finished() bool {
	f, ok := c.s.(Finisher)
	return ok && f.Finished()
}

// openAIClientStream is a decoder of Anthropic-typed errors (Chat, Gemini,
// Responses) writing for an OpenAI client (Chat or Responses), with its
// errors in OpenAI's terms.
func openAIClientStream(s Stream) Stream {
	return &clientErrors{s: s, convert: anthropicTypedToOpenAI}
}

// anthropicTypedToOpenAI is an Anthropic-typed upstream error for an
// OpenAI (Chat or Responses) client.
func anthropicTypedToOpenAI(ue *UpstreamError) *UpstreamError {
	k := anthropicToOpenAIKind(ue.Status, ue.Type, ue.Message)
	code := k.code
	if code == "" {
		code = k.typ
	}
	return &UpstreamError{Status: k.status, Type: k.typ, Code: code, Message: ue.Message}
}
