package openai

import (
	"bytes"
	"io"
	"strconv"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// openAIResumer continues a Chat Completions stream: the client has chunks
// of one choice (index 0) whose deltas carry content only; a
// continuation's text goes on in chunks with the client's id, created,
// model and system_fingerprint, and the end is a finish chunk, the usage
// chunk when the request asked for it, and [DONE].
type Resumer struct {
	wire.TextLog
	id, created, model, fingerprint []byte // raw values of the client's chunks
	IncludeUsage                    bool   // stream_options.include_usage
	stopped                         bool   // a chunk with finish_reason reached the client
	usageSent                       bool   // a usage chunk reached the client
	chunks                          int64  // chunks with content the client got: one token each
}

// tokens counts the client's text as OpenAI streams it, one token per
// chunk (resumeUsage): a server that sends several tokens in a chunk makes
// it an undercount.
func (r *Resumer) Tokens() int64 { return r.chunks }

// newResumer: a request for several choices (n > 1) is not continued.
func (Dialect) NewResumer(req *wire.Request) wire.Resumer {
	if v, ok := req.Top.Lookup(req.Body, "n"); ok { // the parse's index: an agent's body is not walked again
		if n, isInt := jsonscan.Int(v); isInt && n > 1 {
			return nil
		}
	}
	v, _ := req.Top.Lookup(req.Body, "stream_options", "include_usage")
	return &Resumer{IncludeUsage: string(v) == "true"}
}

// chatChunk is what a resumer reads from one chunk: its first choice,
// and the top-level members it echoes.
type chatChunk struct {
	choices                         int    // choices in the chunk
	index                           int64  // the first choice's index (-1 when it is not an integer)
	content                         []byte // its delta.content (raw JSON string), if any
	other                           string // a delta member with output that is not content
	finish                          []byte // its finish_reason, when set
	usage                           bool   // a non-null usage
	id, created, model, fingerprint []byte
}

// scanChatChunk walks a chunk once, without allocating; ok is false
// for data that is not a JSON object.
func scanChatChunk(data []byte) (c chatChunk, ok bool) {
	it, ok := jsonscan.Open(data, 0, 0)
	if !ok || !it.IsObject() {
		return c, false
	}
	for it.Next() {
		switch {
		case it.KeyIs("id"):
			c.id = it.Value()
		case it.KeyIs("created"):
			c.created = it.Value()
		case it.KeyIs("model"):
			c.model = it.Value()
		case it.KeyIs("system_fingerprint"):
			c.fingerprint = it.Value()
		case it.KeyIs("usage"):
			c.usage = jsonscan.NonEmpty(it.Value())
		case it.KeyIs("choices"):
			c.choices, c.index, c.content, c.other, c.finish = 0, 0, nil, "", nil
			arr, ok := it.Enter()
			if !ok {
				continue
			}
			for !arr.IsObject() && arr.Next() {
				c.choices++
				choice, ok := arr.Enter()
				if !ok {
					c.other = "a choice that is not an object"
					continue
				}
				if c.choices == 1 {
					c.scanChoice(&choice)
				}
				arr.Leave(&choice)
			}
			it.Leave(&arr)
		}
	}
	return c, it.End()
}

// scanChoice reads a choice: index, finish_reason and what its delta holds.
func (c *chatChunk) scanChoice(choice *jsonscan.Iter) {
	for choice.IsObject() && choice.Next() {
		switch {
		case choice.KeyIs("index"):
			if n, isInt := jsonscan.Int(choice.Value()); isInt {
				c.index = n
			} else {
				c.index = -1
			}
		case choice.KeyIs("finish_reason"):
			if v := choice.Value(); jsonscan.NonEmpty(v) {
				c.finish = v
			}
		case choice.KeyIs("delta"):
			delta, ok := choice.Enter()
			if !ok {
				continue
			}
			for delta.IsObject() && delta.Next() {
				switch {
				case delta.KeyIs("content"):
					if v := delta.Value(); jsonscan.IsString(v) {
						c.content = v
					} else if jsonscan.NonEmpty(v) {
						c.other = "content that is not a string"
					}
				case delta.KeyIs("role"):
				default: // tool_calls, function_call, refusal, reasoning_content, reasoning, audio...
					if v := delta.Value(); jsonscan.NonEmpty(v) && c.other == "" {
						c.other = string(delta.Key)
					}
				}
			}
			choice.Leave(&delta)
		}
	}
}

func (r *Resumer) Track(ev sse.Event, info wire.EventInfo) {
	switch info.Class {
	case wire.EvTerminal:
		return
	case wire.EvError, wire.EvMalformed:
		r.Fail("an event that is not a chunk")
		return
	}
	if info.Plain && r.id != nil {
		// inspect read the one choice's content: nothing else to learn
		if info.Text != nil {
			if len(info.Text) > 2 { // not ""
				r.chunks++
			}
			r.AppendJSON(info.Text)
		}
		r.stopped = r.stopped || info.Class == wire.EvFinish
		return
	}
	if jsonscan.SkipSpace(ev.Data, 0) == len(ev.Data) {
		return // a comment or keepalive
	}
	c, ok := scanChatChunk(ev.Data)
	if !ok {
		r.Fail("an event that is not a chunk")
		return
	}
	if r.id == nil && jsonscan.IsString(c.id) {
		r.id, r.created, r.model = bytes.Clone(c.id), bytes.Clone(c.created), bytes.Clone(c.model)
		if jsonscan.IsString(c.fingerprint) {
			r.fingerprint = bytes.Clone(c.fingerprint)
		}
	}
	r.usageSent = r.usageSent || c.usage
	switch {
	case c.choices == 0:
		return // a usage chunk
	case c.choices > 1 || c.index != 0:
		r.Fail("more than one choice")
		return
	case c.other != "":
		r.Fail("output that is not text: " + c.other)
		return
	}
	if c.content != nil {
		if len(c.content) > 2 { // not ""
			r.chunks++
		}
		r.AppendJSON(c.content)
	}
	if c.finish != nil {
		r.stopped = true
	}
}

func (r *Resumer) Finished() bool { return r.stopped }

func (r *Resumer) Prefill(body []byte, text string) ([]byte, error) {
	return wire.AppendTurn(body, "messages", wire.MergeAssistantTurn, func(t string) any {
		return map[string]string{"role": "assistant", "content": t}
	}, text)
}

func (r *Resumer) Read(ev sse.Event, info wire.EventInfo) wire.ContEvent {
	switch info.Class {
	case wire.EvTerminal:
		return wire.ContEvent{Kind: wire.ContTerminal}
	case wire.EvError, wire.EvMalformed:
		return wire.ContEvent{Kind: wire.ContError}
	}
	if jsonscan.SkipSpace(ev.Data, 0) == len(ev.Data) {
		return wire.ContEvent{Kind: wire.ContSkip}
	}
	c, ok := scanChatChunk(ev.Data)
	switch {
	case !ok:
		return wire.ContEvent{Kind: wire.ContError}
	case c.choices == 0:
		return wire.ContEvent{Kind: wire.ContSkip} // a usage chunk
	case c.choices > 1 || c.index != 0 || c.other != "":
		return wire.ContEvent{Kind: wire.ContOther}
	}
	var text string
	if c.content != nil {
		text = string(jsonscan.AppendString(nil, c.content))
	}
	var finish string
	if c.finish != nil {
		finish = string(jsonscan.AppendString(nil, c.finish))
	}
	switch {
	case text != "":
		return wire.ContEvent{Kind: wire.ContText, Text: text, Finish: finish, Ends: c.finish != nil}
	case c.finish != nil:
		return wire.ContEvent{Kind: wire.ContFinish, Finish: finish}
	}
	return wire.ContEvent{Kind: wire.ContSkip}
}

// chunkHead appends the start of a chunk in the client's ids, up to the
// choices.
func (r *Resumer) chunkHead(b *bytes.Buffer) {
	b.WriteString(`data: {"id":`)
	writeRawOr(b, r.id, `""`)
	b.WriteString(`,"object":"chat.completion.chunk","created":`)
	writeRawOr(b, r.created, "0")
	b.WriteString(`,"model":`)
	writeRawOr(b, r.model, `""`)
	if r.fingerprint != nil {
		b.WriteString(`,"system_fingerprint":`)
		b.Write(r.fingerprint)
	}
}

func writeRawOr(b *bytes.Buffer, raw []byte, def string) {
	if raw == nil {
		b.WriteString(def)
		return
	}
	b.Write(raw)
}

func (r *Resumer) WriteText(w io.Writer, text string) error {
	if text == "" {
		return nil
	}
	var b bytes.Buffer
	r.chunkHead(&b)
	b.WriteString(`,"choices":[{"index":0,"delta":{"content":`)
	b.Write(wire.JSONText(text))
	b.WriteString("},\"finish_reason\":null}]}\n\n")
	r.AppendText(text)
	r.chunks++
	_, err := w.Write(b.Bytes())
	return err
}

func (r *Resumer) WriteEnd(w io.Writer, end wire.ContEnd) error {
	var b bytes.Buffer
	if !r.stopped {
		reason := end.Finish
		if reason == "" {
			reason = "stop"
		}
		r.chunkHead(&b)
		b.WriteString(`,"choices":[{"index":0,"delta":{},"finish_reason":`)
		b.Write(wire.JSONText(reason))
		b.WriteString("}]}\n\n")
		r.stopped = true
	}
	if r.IncludeUsage && !r.usageSent && (end.Input > 0 || end.Output > 0) {
		r.chunkHead(&b)
		b.WriteString(`,"choices":[],"usage":{"prompt_tokens":`)
		b.WriteString(strconv.FormatInt(end.Input, 10))
		b.WriteString(`,"completion_tokens":`)
		b.WriteString(strconv.FormatInt(end.Output, 10))
		b.WriteString(`,"total_tokens":`)
		b.WriteString(strconv.FormatInt(end.Input+end.Output, 10))
		b.WriteString("}}\n\n")
		r.usageSent = true
	}
	b.Write(wire.DoneEvent)
	_, err := w.Write(b.Bytes())
	return err
}
