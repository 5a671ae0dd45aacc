package engine

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/llmhedge/caddy-llm-hedge/internal/dialect/anthropic"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// resumeEvent renders one Anthropic SSE event.
func resumeEvent(name string, data any) string {
	b, _ := json.Marshal(data)
	return "event: " + name + "\ndata: " + string(b) + "\n\n"
}

func anthropicTextDelta(t string) string {
	return resumeEvent("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
		"delta": map[string]string{"type": "text_delta", "text": t}})
}

// anthropicOpening is what a client has before the first delta.
func anthropicOpening() string {
	return resumeEvent("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_1", "type": "message", "role": "assistant", "content": []any{}, "model": "m",
		"usage": map[string]int{"input_tokens": 7, "output_tokens": 1}}}) +
		resumeEvent("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]string{"type": "text", "text": ""}})
}

// anthropicClosing is the end of a continuation's own message.
func anthropicClosing() string {
	return resumeEvent("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}) +
		resumeEvent("message_delta", map[string]any{"type": "message_delta",
			"delta": map[string]any{"stop_reason": "end_turn", "stop_sequence": nil}, "usage": map[string]int{"output_tokens": 3}}) +
		resumeEvent("message_stop", map[string]string{"type": "message_stop"})
}

// chunk cuts s into random pieces at rune boundaries.
func chunk(rng *rand.Rand, s string) []string {
	var out []string
	for s != "" {
		n := 1 + rng.IntN(min(len(s), 12))
		for n < len(s) && !utf8.RuneStart(s[n]) {
			n++
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

// clientView is what an Anthropic client reads from a stream.
type clientView struct {
	text                     string
	starts, stops, errs, end int
}

func readClient(t testing.TB, stream []byte) clientView {
	var v clientView
	rd := sse.NewReader(bytes.NewReader(stream), 0)
	for {
		ev, err := rd.Next()
		if err != nil {
			return v
		}
		if v.stops+v.errs > 0 {
			v.end++ // anything after the end
		}
		switch string(ev.Name) {
		case "message_start":
			v.starts++
		case "message_stop":
			v.stops++
		case "error":
			v.errs++
		case "content_block_delta":
			var d struct {
				Delta struct{ Text string } `json:"delta"`
			}
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				t.Fatalf("client got a malformed delta %q", ev.Data)
			}
			v.text += d.Delta.Text
		}
	}
}

// spliceOnce plays a committed stream that delivered the chunks of
// delivered, then a continuation whose text comes in cont (its own message
// framing around it), with the strategy's hold, and returns the client's
// whole stream. The error event is the relay's held one.
func spliceOnce(t testing.TB, delivered []string, cont []string, prefill bool) []byte {
	var client bytes.Buffer
	rs := &anthropic.Resumer{}
	feed := func(raw string, track bool) {
		client.WriteString(raw)
		rd := sse.NewReader(strings.NewReader(raw), 0)
		for {
			ev, err := rd.Next()
			if err != nil {
				return
			}
			rs.Track(ev, dialectAnthropic.Inspect(ev, true, nil))
		}
	}
	feed(anthropicOpening(), true)
	for _, d := range delivered {
		feed(anthropicTextDelta(d), true)
	}
	text := rs.Text()
	sp := wire.ReplaySplicer(text)
	if prefill {
		sp = wire.PrefillSplicer(text)
	}
	run := &spliceRun{d: dialectAnthropic, rs: rs, sp: &sp, w: &client, flush: func() error { return nil }}
	var stream strings.Builder
	stream.WriteString(anthropicOpening())
	for _, c := range cont {
		stream.WriteString(anthropicTextDelta(c))
	}
	stream.WriteString(anthropicClosing())
	rd := sse.NewReader(strings.NewReader(stream.String()), 0)
	for {
		ev, err := rd.Next()
		if err != nil || run.handle(ev) {
			break
		}
	}
	if !run.finishing() || !run.end(&wire.Usage{Output: 9}) {
		client.Write(wire.ErrorEvent(dialectAnthropic, 502, "the upstream ended the stream before it was complete"))
	}
	return client.Bytes()
}

var propertyWords = []string{"alpha ", "beta ", "gamma\n", "délta ", "日本 ", "x", "  ", "\n\n", "ζ", "end. "}

// For random answers, cut points and chunkings, a continued stream reads as
// one message whose text is an answer that begins with what the client
// had (the canonical one when the continuation agrees), or ends in one
// error event with a prefix of the answer: never anything else. A prefill
// target that answers from the start (one that does not continue an
// assistant turn) is never spliced: the client never reads its text twice.
func TestResumeSpliceProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 3000 {
		var b strings.Builder
		for range 1 + rng.IntN(30) {
			b.WriteString(propertyWords[rng.IntN(len(propertyWords))])
		}
		answer := b.String()
		parts := chunk(rng, answer)
		if len(parts) < 2 {
			continue
		}
		k := 1 + rng.IntN(len(parts)-1)
		delivered := strings.Join(parts[:k], "")
		mode := rng.IntN(5)
		var cont string
		prefill := false
		switch mode {
		case 0: // replay, same answer
			cont = answer
		case 1: // replay, a sampled answer: one word changed somewhere
			w := chunk(rng, answer)
			i := rng.IntN(len(w))
			w[i] = "other "
			cont = strings.Join(w, "")
		case 2: // replay, an answer that stops short
			cont = answer[:rng.IntN(len(answer)+1)]
			for !utf8.ValidString(cont) {
				cont = cont[:len(cont)-1]
			}
		case 3: // prefill: the target answers the rest after the trimmed text
			prefill = true
			pre, _ := wire.TrimPrefill(delivered)
			cont = answer[len(pre):]
		case 4: // prefill: the target answers the whole answer again
			cont = answer
			pre, _ := wire.TrimPrefill(delivered)
			prefill = pre != "" // an all-whitespace text is not prefilled (continueStream)
		}
		v := readClient(t, spliceOnce(t, parts[:k], chunk(rng, cont), prefill))
		ok := v.starts == 1 && v.end == 0 && v.stops+v.errs == 1
		switch {
		case !ok:
		case mode == 4 && prefill:
			ok = v.errs == 1 && v.text == delivered
		case v.errs == 1:
			ok = strings.HasPrefix(answer, v.text) && strings.HasPrefix(v.text, delivered)
		case mode == 3 || mode == 0 || mode == 4:
			ok = v.text == answer
		default:
			ok = strings.HasPrefix(v.text, delivered) && v.text == cont
		}
		if !ok {
			t.Fatalf("trial %d mode %d: answer %q delivered %q continuation %q: client read %+v", trial, mode, answer, delivered, cont, v)
		}
	}
}

// The splice never lets a replay-match continuation contradict the text
// the client has, whatever the continuation says and however it is cut.
func FuzzResumeSplice(f *testing.F) {
	f.Add("Hello wor", "Hello world, again.", uint64(1), false)
	f.Add("Hello ", "world", uint64(2), true)
	f.Add("日本語の", "日本語のテキスト", uint64(3), false)
	f.Add("a\n\n", "\nb", uint64(4), true)
	f.Fuzz(func(t *testing.T, delivered, cont string, seed uint64, prefill bool) {
		if !utf8.ValidString(delivered) || !utf8.ValidString(cont) || delivered == "" || len(delivered)+len(cont) > 4096 {
			return
		}
		rng := rand.New(rand.NewPCG(seed, seed))
		v := readClient(t, spliceOnce(t, chunk(rng, delivered), chunk(rng, cont), prefill))
		if v.starts != 1 || v.end != 0 || v.stops+v.errs != 1 {
			t.Fatalf("client read %+v", v)
		}
		if !strings.HasPrefix(v.text, delivered) {
			t.Fatalf("client text %q lost the delivered %q", v.text, delivered)
		}
		if !prefill && v.stops == 1 && v.text != cont {
			t.Fatalf("replay-match delivered %q, the continuation said %q", v.text, cont)
		}
		if prefill && v.stops == 1 {
			pre, _ := wire.TrimPrefill(delivered)
			if !strings.HasSuffix(v.text, strings.TrimLeft(cont, " \n\t\r")) && len(v.text)-len(delivered) > len(cont) {
				t.Fatalf("prefill added %q beyond the continuation %q (prefill %q)", v.text[len(delivered):], cont, pre)
			}
		}
	})
}

// Following an Anthropic stream allocates nothing per event: the block
// start, the deltas and the message_delta are read in place.
func TestAnthropicResumerTrackAllocs(t *testing.T) {
	rs := &anthropic.Resumer{}
	events := resumeEvent("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
		"content_block": map[string]string{"type": "text", "text": ""}}) + anthropicTextDelta("Hello") +
		resumeEvent("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": nil}, "usage": map[string]int{"output_tokens": 3}})
	rd := sse.NewReader(strings.NewReader(events), 0)
	var evs []sse.Event
	for {
		ev, err := rd.Next()
		if err != nil {
			break
		}
		evs = append(evs, sse.Event{Raw: bytes.Clone(ev.Raw), Name: bytes.Clone(ev.Name), Data: bytes.Clone(ev.Data)})
	}
	for _, ev := range evs {
		if n := testing.AllocsPerRun(1000, func() { rs.Track(ev, dialectAnthropic.Inspect(ev, true, nil)) }); n != 0 {
			t.Errorf("%s: %v allocations per event", ev.Name, n)
		}
	}
	if rs.Ineligible() != "" || rs.Finished() || !strings.HasPrefix(rs.Text(), "HelloHello") {
		t.Fatalf("resumer %+v", rs)
	}
}
