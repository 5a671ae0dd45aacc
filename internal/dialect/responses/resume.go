package responses

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// responsesResumer continues an OpenAI Responses stream whose client has
// one response (response.created) with one message item holding one
// output_text part: a continuation's deltas go on in that part, under the
// client's item id and indexes and with sequence numbers that go on from
// the client's last, and the client's response object, completed, ends it.
type Resumer struct {
	wire.TextLog
	created      []byte // the response object of the client's response.created
	itemID       string // the client's message item
	outputIndex  int64
	contentIndex int64
	items, parts int   // output items and content parts the client has seen added
	Seq          int64 // the last sequence_number the client got (-1: none)
	// The done events the client already has: the text is whole.
	textDone, partDone, itemDone bool
	// why the continuation that ended with response.incomplete stopped
	IncompleteReason []byte
}

// newResumer continues only a response the provider does not keep
// (`"store": false`): a stored response would hold the cut answer under
// the id the client has, and another provider's stored copy the whole
// answer under an id the client never sees, so neither could be read back
// or continued by previous_response_id as the client was told.
func (Dialect) NewResumer(req *wire.Request) wire.Resumer {
	if ResponseStored(req.Body, &req.Top) {
		return nil
	}
	return &Resumer{Seq: -1}
}

// responsesFrame is the part of a Responses event a resumer reads.
type responsesFrame struct {
	OutputIndex  int64      `json:"output_index"`
	ContentIndex int64      `json:"content_index"`
	ItemID       string     `json:"item_id"`
	Item         *frameItem `json:"item"`
	Part         *framePart `json:"part"`
}

type frameItem struct {
	ID      string            `json:"id"`
	Type    string            `json:"type"`
	Content []json.RawMessage `json:"content"`
}

type framePart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// frameStore is where the fast path puts a frame's item and part: the
// caller's, so reading a frame does not allocate them.
type frameStore struct {
	item frameItem
	part framePart
}

// responsesEventKind is what a Responses event is: the output name inspect
// gave it, else the data's type (or the event name). It is read in place
// or written to buf, so a caller that switches on it allocates nothing.
func responsesEventKind(ev sse.Event, info wire.EventInfo, buf []byte) []byte {
	if info.By != "" && info.By != "response.*.delta" {
		return append(buf, info.By...)
	}
	typ, _ := jsonscan.Lookup(ev.Data, "type")
	return responsesKind(typ, ev.Name, buf)
}

func (r *Resumer) Track(ev sse.Event, info wire.EventInfo) {
	n := info.Seq // inspect's reading of a valid event
	if n == nil {
		n, _ = jsonscan.Lookup(ev.Data, "sequence_number")
	}
	if n != nil {
		if v, ok := wire.ParseSeq(n); ok && v > r.Seq {
			r.Seq = v
		}
	}
	var buf [64]byte
	kind := responsesEventKind(ev, info, buf[:0])
	switch string(kind) {
	case "response.output_text.delta":
		if info.Text == nil || r.parts == 0 {
			r.Fail("a text delta outside an output_text part")
			return
		}
		r.AppendJSON(info.Text)
		return
	case "response.created":
		resp, ok := info.Usage, info.UsageRead // inspect's walk read it
		if !ok {
			resp, ok = jsonscan.Lookup(ev.Data, "response")
		}
		if ok && len(resp) > 0 && resp[0] == '{' { // valid: the scanner's Value is json.Valid's
			r.created = append([]byte(nil), resp...)
		}
		return
	case "response.output_item.added":
		var st frameStore
		f, err := readFrame(ev.Data, &st)
		switch {
		case err != nil || f.Item == nil:
			r.Fail("an unreadable output item")
		case f.Item.Type != "message":
			r.Fail("an output item that is not a message (" + f.Item.Type + ")")
		case r.items > 0:
			r.Fail("a second output item")
		case len(f.Item.Content) > 0:
			r.Fail("a message item that arrived with its content")
		default:
			r.items, r.itemID, r.outputIndex = 1, f.Item.ID, f.OutputIndex
		}
		return
	case "response.content_part.added":
		var st frameStore
		f, err := readFrame(ev.Data, &st)
		switch {
		case err != nil || f.Part == nil:
			r.Fail("an unreadable content part")
		case f.Part.Type != "output_text":
			r.Fail("a content part that is not output_text (" + f.Part.Type + ")")
		case r.items == 0 || f.ItemID != r.itemID || f.OutputIndex != r.outputIndex:
			r.Fail("a content part outside the message item")
		case r.parts > 0:
			r.Fail("a second content part")
		default:
			r.parts, r.contentIndex = 1, f.ContentIndex
			r.AppendText(f.Part.Text)
		}
		return
	case "response.output_text.done":
		r.textDone = true
		return
	case "response.content_part.done":
		r.partDone = true
		return
	case "response.output_item.done":
		r.itemDone = true
		return
	case "response.output_text.annotation.added":
		r.Fail("an annotation") // the text alone would drop it
		return
	}
	if info.Class == wire.EvOutput {
		r.Fail("output that is not text (" + string(kind) + ")")
	}
}

func (r *Resumer) Ineligible() string {
	switch {
	case r.Bad != "":
		return r.Bad
	case r.created == nil:
		return "no response.created"
	case r.parts == 0:
		return "no output_text part"
	}
	return ""
}

// finished: once output_text.done reached the client it has the whole
// text (a continuation may not add to it); the rest of the done events and
// the terminal complete it.
func (r *Resumer) Finished() bool { return r.textDone || r.partDone || r.itemDone }

// prefill turns a string input into a user message and ends the input with
// an assistant message holding text.
func (r *Resumer) Prefill(body []byte, text string) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, err
	}
	var s string
	if json.Unmarshal(top["input"], &s) == nil {
		in, err := json.Marshal([]map[string]string{{"role": "user", "content": s}})
		if err != nil {
			return nil, err
		}
		top["input"] = in
		if body, err = json.Marshal(top); err != nil {
			return nil, err
		}
	}
	return wire.AppendTurn(body, "input", mergeResponsesTurn, func(t string) any {
		return map[string]string{"role": "assistant", "content": t}
	}, text)
}

// mergeResponsesTurn extends the client's own last assistant message when
// its content is a string.
func mergeResponsesTurn(last json.RawMessage, text string) (json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(last, &m) != nil || string(m["role"]) != `"assistant"` {
		return nil, false
	}
	if t, ok := m["type"]; ok && string(t) != `"message"` {
		return nil, false
	}
	var s string
	if json.Unmarshal(m["content"], &s) != nil {
		return nil, false
	}
	m["content"] = wire.JSONText(s + text)
	out, err := json.Marshal(m)
	return out, err == nil
}

func (r *Resumer) Read(ev sse.Event, info wire.EventInfo) wire.ContEvent {
	if info.Class == wire.EvError {
		return wire.ContEvent{Kind: wire.ContError}
	}
	var buf [64]byte
	kind := responsesEventKind(ev, info, buf[:0])
	switch string(kind) {
	case "response.output_text.delta":
		if info.Text == nil {
			return wire.ContEvent{Kind: wire.ContOther}
		}
		return wire.ContEvent{Kind: wire.ContText, Text: string(jsonscan.AppendString(nil, info.Text))}
	case "response.output_item.added", "response.output_item.done":
		var st frameStore
		if f, err := readFrame(ev.Data, &st); err != nil || f.Item == nil || f.Item.Type != "message" {
			return wire.ContEvent{Kind: wire.ContOther}
		}
		return wire.ContEvent{Kind: wire.ContSkip}
	case "response.content_part.added", "response.content_part.done":
		var st frameStore
		if f, err := readFrame(ev.Data, &st); err != nil || f.Part == nil || f.Part.Type != "output_text" {
			return wire.ContEvent{Kind: wire.ContOther}
		}
		return wire.ContEvent{Kind: wire.ContSkip}
	case "response.output_text.annotation.added":
		return wire.ContEvent{Kind: wire.ContOther}
	case "response.completed":
		return wire.ContEvent{Kind: wire.ContTerminal, Finish: "completed"}
	case "response.incomplete":
		r.IncompleteReason = nil
		var reason string
		if v, ok := jsonscan.Lookup(ev.Data, "response", "incomplete_details", "reason"); ok && json.Unmarshal(v, &reason) == nil && reason != "" {
			r.IncompleteReason = wire.JSONText(reason)
		}
		return wire.ContEvent{Kind: wire.ContTerminal, Finish: "incomplete"}
	}
	if info.Class == wire.EvOutput {
		return wire.ContEvent{Kind: wire.ContOther}
	}
	return wire.ContEvent{Kind: wire.ContSkip} // response.created, in_progress, output_text.done, ...
}

// next is the sequence number of the client's next event.
func (r *Resumer) next() int64 {
	r.Seq++
	return r.Seq
}

// writeLoc writes an event's head up to its item's location: type,
// sequence_number, item_id, output_index, content_index.
func (r *Resumer) writeLoc(b *bytes.Buffer, typ string) {
	b.WriteString("event: ")
	b.WriteString(typ)
	b.WriteString("\ndata: {\"type\":\"")
	b.WriteString(typ)
	b.WriteString("\",\"sequence_number\":")
	b.WriteString(strconv.FormatInt(r.next(), 10))
	b.WriteString(",\"item_id\":")
	b.Write(wire.JSONText(r.itemID))
	b.WriteString(",\"output_index\":")
	b.WriteString(strconv.FormatInt(r.outputIndex, 10))
	b.WriteString(",\"content_index\":")
	b.WriteString(strconv.FormatInt(r.contentIndex, 10))
}

func (r *Resumer) WriteText(w io.Writer, text string) error {
	if text == "" {
		return nil
	}
	// writeEnd repeats the text whole: past maxResumeText it is no longer
	// kept, and the stream cannot be completed (the client gets the error
	// event), as it could not be continued.
	if r.AppendText(text); r.Bad != "" {
		return wire.ErrResumeTextBound
	}
	var b bytes.Buffer
	r.writeLoc(&b, "response.output_text.delta")
	b.WriteString(",\"delta\":")
	b.Write(wire.JSONText(text))
	b.WriteString(",\"logprobs\":[]}\n\n")
	_, err := w.Write(b.Bytes())
	return err
}

// responsesOutputPart and responsesOutputItem are the client's message
// as its done events and the final response carry it.
type responsesOutputPart struct {
	Type        string     `json:"type"`
	Text        string     `json:"text"`
	Annotations []struct{} `json:"annotations"`
	Logprobs    []struct{} `json:"logprobs"`
}

type responsesOutputItem struct {
	ID      string                `json:"id"`
	Type    string                `json:"type"`
	Status  string                `json:"status"`
	Role    string                `json:"role"`
	Content []responsesOutputPart `json:"content"`
}

func (r *Resumer) WriteEnd(w io.Writer, end wire.ContEnd) error {
	text := r.Text()
	incomplete := end.Finish == "incomplete"
	part := responsesOutputPart{Type: "output_text", Text: text, Annotations: []struct{}{}, Logprobs: []struct{}{}}
	item := responsesOutputItem{ID: r.itemID, Type: "message", Status: "completed", Role: "assistant",
		Content: []responsesOutputPart{part}}
	if incomplete {
		item.Status = "incomplete"
	}
	partJSON, _ := json.Marshal(part) // strings and empty slices: cannot fail
	itemJSON, _ := json.Marshal(item)
	var b bytes.Buffer
	if !r.textDone {
		r.writeLoc(&b, "response.output_text.done")
		b.WriteString(",\"text\":")
		b.Write(wire.JSONText(text))
		b.WriteString(",\"logprobs\":[]}\n\n")
		r.textDone = true
	}
	if !r.partDone {
		r.writeLoc(&b, "response.content_part.done")
		b.WriteString(",\"part\":")
		b.Write(partJSON)
		b.WriteString("}\n\n")
		r.partDone = true
	}
	if !r.itemDone {
		b.WriteString("event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"sequence_number\":")
		b.WriteString(strconv.FormatInt(r.next(), 10))
		b.WriteString(",\"output_index\":")
		b.WriteString(strconv.FormatInt(r.outputIndex, 10))
		b.WriteString(",\"item\":")
		b.Write(itemJSON)
		b.WriteString("}\n\n")
		r.itemDone = true
	}
	typ := "response.completed"
	if incomplete {
		typ = "response.incomplete"
	}
	resp, err := r.finalResponse(itemJSON, end, incomplete)
	if err != nil {
		return err
	}
	b.WriteString("event: ")
	b.WriteString(typ)
	b.WriteString("\ndata: {\"type\":\"")
	b.WriteString(typ)
	b.WriteString("\",\"sequence_number\":")
	b.WriteString(strconv.FormatInt(r.next(), 10))
	b.WriteString(",\"response\":")
	b.Write(resp)
	b.WriteString("}\n\n")
	_, err = w.Write(b.Bytes())
	return err
}

// finalResponse is the client's response object as response.created
// announced it (its id, created_at, model, ...), finished: the status, the
// one message item and the usage. The usage is null when it is not known
// (the client had the whole text, and no continuation ran to count it).
func (r *Resumer) finalResponse(itemJSON []byte, end wire.ContEnd, incomplete bool) ([]byte, error) {
	obj := map[string]json.RawMessage{}
	if r.created != nil {
		if err := json.Unmarshal(r.created, &obj); err != nil {
			return nil, err
		}
	}
	obj["status"] = json.RawMessage(`"completed"`)
	obj["incomplete_details"] = json.RawMessage(`null`)
	obj["error"] = json.RawMessage(`null`)
	if incomplete {
		reason := r.IncompleteReason
		if reason == nil {
			reason = []byte(`"max_output_tokens"`)
		}
		obj["status"] = json.RawMessage(`"incomplete"`)
		obj["incomplete_details"] = json.RawMessage(`{"reason":` + string(reason) + `}`)
	} else if _, ok := obj["completed_at"]; ok {
		obj["completed_at"] = json.RawMessage(strconv.FormatInt(time.Now().Unix(), 10))
	}
	obj["output"] = json.RawMessage(`[` + string(itemJSON) + `]`)
	obj["usage"] = json.RawMessage(`null`)
	if end.Input != 0 || end.Output != 0 {
		obj["usage"] = json.RawMessage(`{"input_tokens":` + strconv.FormatInt(end.Input, 10) +
			`,"input_tokens_details":{"cached_tokens":0},"output_tokens":` + strconv.FormatInt(end.Output, 10) +
			`,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":` + strconv.FormatInt(end.Input+end.Output, 10) + `}`)
	}
	return json.Marshal(obj)
}
