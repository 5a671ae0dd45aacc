package gemini

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// geminiResumer continues a Gemini stream: the client has chunks of one
// candidate (index 0) whose parts are text; a continuation's text goes on
// in chunks with the client's modelVersion and responseId, and the end is
// a chunk with the finishReason and the usage (a Gemini stream has no
// terminal event: the body ends).
type Resumer struct {
	wire.TextLog
	modelVersion, responseID []byte // raw values of the client's chunks
	crlf                     bool   // the client's events end in "\r\n\r\n" (Gemini's own framing)
	framed                   bool   // crlf was read from the client's first event
	stopped                  bool   // a chunk with a finishReason reached the client
}

func (Dialect) NewResumer(*wire.Request) wire.Resumer { return &Resumer{crlf: true} }

// geminiChunk is what a resumer reads from one chunk: its first
// candidate, and the top-level members it echoes.
type geminiChunk struct {
	candidates               int      // candidates in the chunk
	index                    int64    // the first one's index (absent is 0; -1 when not an integer)
	text                     []byte   // its first text part (raw JSON string)
	more                     [][]byte // its further text parts
	other                    string   // a part that is not text
	finish                   []byte   // its finishReason, when it ends the candidate
	modelVersion, responseID []byte
}

// scanGeminiChunk walks a chunk once; ok is false for data that is not a
// JSON object.
func scanGeminiChunk(data []byte) (c geminiChunk, ok bool) {
	it, ok := jsonscan.Open(data, 0, 0)
	if !ok || !it.IsObject() {
		return c, false
	}
	for it.Next() {
		switch {
		case it.KeyIs("modelVersion"):
			c.modelVersion = it.Value()
		case it.KeyIs("responseId"):
			c.responseID = it.Value()
		case it.KeyIs("candidates"):
			c.candidates, c.index, c.text, c.more, c.other, c.finish = 0, 0, nil, nil, "", nil
			arr, ok := it.Enter()
			if !ok {
				continue
			}
			for !arr.IsObject() && arr.Next() {
				c.candidates++
				cand, ok := arr.Enter()
				if !ok {
					c.other = "a candidate that is not an object"
					continue
				}
				if c.candidates == 1 {
					c.scanCandidate(&cand)
				}
				arr.Leave(&cand)
			}
			it.Leave(&arr)
		}
	}
	return c, it.End()
}

// scanCandidate reads a candidate: index, finishReason and its parts.
func (c *geminiChunk) scanCandidate(cand *jsonscan.Iter) {
	for cand.IsObject() && cand.Next() {
		switch {
		case cand.KeyIs("index"):
			if v := cand.Value(); !jsonscan.IsNull(v) {
				if n, isInt := jsonscan.Int(v); isInt && bytes.IndexAny(v, ".eE") < 0 {
					c.index = n
				} else {
					c.index = -1
				}
			}
		case cand.KeyIs("finishReason"):
			if v := cand.Value(); geminiFinishReason(v) {
				c.finish = v
			}
		case cand.KeyIs("content"):
			content, ok := cand.Enter()
			if !ok {
				continue
			}
			for content.IsObject() && content.Next() {
				if !content.KeyIs("parts") {
					continue
				}
				c.text, c.more = nil, nil
				parts, ok := content.Enter()
				if !ok {
					continue
				}
				for !parts.IsObject() && parts.Next() {
					part, ok := parts.Enter()
					if !ok {
						c.other = "a part that is not an object"
						continue
					}
					c.scanPart(&part)
					parts.Leave(&part)
				}
				content.Leave(&parts)
			}
			cand.Leave(&content)
		}
	}
}

// scanPart notes a part's text, or what it holds that is not text: a
// thought, a functionCall, inlineData, executableCode... (a
// thoughtSignature goes with visible text too).
func (c *geminiChunk) scanPart(part *jsonscan.Iter) {
	var text []byte
	for part.IsObject() && part.Next() {
		switch {
		case part.KeyIs("text"):
			if v := part.Value(); jsonscan.IsString(v) {
				text = v
			} else if jsonscan.NonEmpty(v) && c.other == "" {
				c.other = "text that is not a string"
			}
		case part.KeyIs("thought"):
			if v := part.Value(); string(v) == "true" && c.other == "" {
				c.other = "thought"
			}
		case part.KeyIs("thoughtSignature"):
		default:
			if v := part.Value(); jsonscan.NonEmpty(v) && c.other == "" {
				c.other = string(part.Key)
			}
		}
	}
	switch {
	case len(text) <= 2: // none, or ""
	case c.text == nil:
		c.text = text
	default:
		c.more = append(c.more, text)
	}
}

// appendText appends the decoded text of the chunk's text parts to dst.
func (c *geminiChunk) appendText(dst []byte) []byte {
	dst = jsonscan.AppendString(dst, c.text)
	for _, t := range c.more {
		dst = jsonscan.AppendString(dst, t)
	}
	return dst
}

func (r *Resumer) Track(ev sse.Event, info wire.EventInfo) {
	if info.Class == wire.EvError || info.Class == wire.EvMalformed {
		r.Fail("an event that is not a chunk")
		return
	}
	if info.Plain && r.framed && r.modelVersion != nil && r.responseID != nil {
		// inspect read the one candidate's text: nothing else to learn
		if info.Text != nil {
			r.AppendJSON(info.Text)
		}
		r.stopped = r.stopped || info.Class == wire.EvFinish
		return
	}
	if jsonscan.SkipSpace(ev.Data, 0) == len(ev.Data) {
		return // a comment or keepalive
	}
	c, ok := scanGeminiChunk(ev.Data)
	if !ok {
		r.Fail("an event that is not a chunk")
		return
	}
	if !r.framed {
		r.framed, r.crlf = true, bytes.HasSuffix(ev.Raw, []byte("\r\n\r\n"))
	}
	if r.modelVersion == nil && jsonscan.IsString(c.modelVersion) {
		r.modelVersion = bytes.Clone(c.modelVersion)
	}
	if r.responseID == nil && jsonscan.IsString(c.responseID) {
		r.responseID = bytes.Clone(c.responseID)
	}
	switch {
	case c.candidates == 0:
		return // usage or prompt feedback only
	case c.candidates > 1 || c.index != 0:
		r.Fail("more than one candidate")
		return
	case c.other != "":
		r.Fail("output that is not text: " + c.other)
		return
	}
	if c.text != nil {
		r.AppendJSON(c.text)
		for _, t := range c.more {
			r.AppendJSON(t)
		}
	}
	if c.finish != nil {
		r.stopped = true
	}
}

func (r *Resumer) Finished() bool { return r.stopped }

func (r *Resumer) Prefill(body []byte, text string) ([]byte, error) {
	return wire.AppendTurn(body, "contents", mergeGeminiTurn, func(t string) any {
		return map[string]any{"role": "model", "parts": []map[string]string{{"text": t}}}
	}, text)
}

// mergeGeminiTurn extends the client's own last model turn by a text part.
func mergeGeminiTurn(last json.RawMessage, text string) (json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(last, &m) != nil || string(m["role"]) != `"model"` {
		return nil, false
	}
	var parts []json.RawMessage
	if json.Unmarshal(m["parts"], &parts) != nil {
		return nil, false
	}
	p, _ := json.Marshal(map[string]string{"text": text})
	m["parts"], _ = json.Marshal(append(parts, p))
	out, err := json.Marshal(m)
	return out, err == nil
}

func (r *Resumer) Read(ev sse.Event, info wire.EventInfo) wire.ContEvent {
	if info.Class == wire.EvError || info.Class == wire.EvMalformed {
		return wire.ContEvent{Kind: wire.ContError}
	}
	if jsonscan.SkipSpace(ev.Data, 0) == len(ev.Data) {
		return wire.ContEvent{Kind: wire.ContSkip}
	}
	c, ok := scanGeminiChunk(ev.Data)
	switch {
	case !ok:
		return wire.ContEvent{Kind: wire.ContError}
	case c.candidates == 0:
		return wire.ContEvent{Kind: wire.ContSkip}
	case c.candidates > 1 || c.index != 0 || c.other != "":
		return wire.ContEvent{Kind: wire.ContOther}
	}
	var finish string
	if c.finish != nil {
		finish = string(jsonscan.AppendString(nil, c.finish))
	}
	switch {
	case c.text != nil:
		return wire.ContEvent{Kind: wire.ContText, Text: string(c.appendText(nil)), Finish: finish, Ends: c.finish != nil}
	case c.finish != nil:
		return wire.ContEvent{Kind: wire.ContFinish, Finish: finish}
	}
	return wire.ContEvent{Kind: wire.ContSkip}
}

// chunkTail appends the end of a chunk: the client's ids and the event's
// blank line.
func (r *Resumer) chunkTail(b *bytes.Buffer) {
	if r.modelVersion != nil {
		b.WriteString(`,"modelVersion":`)
		b.Write(r.modelVersion)
	}
	if r.responseID != nil {
		b.WriteString(`,"responseId":`)
		b.Write(r.responseID)
	}
	if r.crlf {
		b.WriteString("}\r\n\r\n")
	} else {
		b.WriteString("}\n\n")
	}
}

func (r *Resumer) WriteText(w io.Writer, text string) error {
	if text == "" {
		return nil
	}
	var b bytes.Buffer
	b.WriteString(`data: {"candidates":[{"content":{"parts":[{"text":`)
	b.Write(wire.JSONText(text))
	b.WriteString(`}],"role":"model"},"index":0}]`)
	r.chunkTail(&b)
	r.AppendText(text)
	_, err := w.Write(b.Bytes())
	return err
}

// writeEnd writes the finishing chunk, unless the client has it: the
// body's end (the caller's) is the stream's.
func (r *Resumer) WriteEnd(w io.Writer, end wire.ContEnd) error {
	if r.stopped {
		return nil
	}
	reason := end.Finish
	if reason == "" {
		reason = "STOP"
	}
	var b bytes.Buffer
	b.WriteString(`data: {"candidates":[{"content":{"parts":[{"text":""}],"role":"model"},"finishReason":`)
	b.Write(wire.JSONText(reason))
	b.WriteString(`,"index":0}]`)
	if end.Input > 0 || end.Output > 0 {
		b.WriteString(`,"usageMetadata":{"promptTokenCount":`)
		b.WriteString(strconv.FormatInt(end.Input, 10))
		b.WriteString(`,"candidatesTokenCount":`)
		b.WriteString(strconv.FormatInt(end.Output, 10))
		b.WriteString(`,"totalTokenCount":`)
		b.WriteString(strconv.FormatInt(end.Input+end.Output, 10))
		b.WriteString(`}`)
	}
	r.chunkTail(&b)
	r.stopped = true
	_, err := w.Write(b.Bytes())
	return err
}
