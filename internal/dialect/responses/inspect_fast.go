package responses

import (
	"bytes"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// The bulk of a Responses stream is response.output_text.delta events (in
// an agent's turn also the reasoning's and a function call's arguments'),
// written compactly with "type" first and flat members after it:
// strings, integers and an empty logprobs array, in an order that differs
// between providers (OpenAI puts sequence_number first and adds
// obfuscation). Such an event is read by a flat scan: each key and value is
// checked as the scanner checks it
// (StringEnd for strings, the JSON number grammar for integers), so the
// data is a valid object; without an error, response, code or message
// member and with one string delta, its class, name, text and sequence
// number are those of the walk. Any other spelling takes the walk.
var textDeltaHead = deltaHeads[0]

// deltaKinds are the delta events read by a flat scan, text first, by the
// name the walk gives them (responsesClass); deltaHeads are the start of
// their data.
var (
	deltaKinds = [...]string{
		"response.output_text.delta",
		"response.function_call_arguments.delta",
		"response.reasoning_summary_text.delta",
		"response.reasoning_text.delta",
	}
	deltaHeads = func() (h [len(deltaKinds)][]byte) {
		for k, by := range deltaKinds {
			h[k] = []byte(`{"type":"` + by + `"`)
		}
		return h
	}()
)

// inspectTextDelta is InspectResponses of a delta (deltaHeads) in its
// usual shape; ok is false for any other event. Only a text delta gives
// its text, as the walk does.
//
// memo (the stream's, or nil) holds the members before the delta value of
// the stream's last delta read this way, up to its opening quote: the
// deltas of one text part repeat them byte for byte (type, item_id,
// output_index, content_index), except the sequence_number OpenAI puts
// first (memo.Split), so an event that starts with them, around an
// integer where that number stands, is read from its delta on.
func inspectTextDelta(ev sse.Event, withText bool, memo *wire.Memo) (info wire.EventInfo, ok bool) {
	if string(ev.Name) == "error" {
		return info, false
	}
	data := ev.Data
	kind := 0
	for kind < len(deltaHeads) && !bytes.HasPrefix(data, deltaHeads[kind]) {
		kind++
	}
	if kind == len(deltaHeads) {
		return info, false
	}
	var delta, seq []byte
	i := len(deltaHeads[kind])
	deltaAt, seqAt, seqEnd := -1, -1, -1 // where the delta value starts; a sequence_number before it
	deltaEnd, lastSeq := -1, -1          // past the delta; a sequence_number after it that ends the event
	if j, n := memoDelta(data, memo); j > 0 {
		end := jsonscan.StringEnd(data, j)
		if end < 0 {
			return info, false
		}
		if n > 0 {
			seq = data[memo.Split:n]
		}
		delta, i, deltaEnd = data[j:end], end, end
		if seq == nil {
			if v, ok := memoTail(data, end, memo); ok {
				seq, i = v, len(data)
				goto read
			}
		}
	}
	for {
		if i >= len(data) {
			return info, false
		}
		if data[i] == '}' {
			i++
			break
		}
		if data[i] != ',' || i+1 >= len(data) || data[i+1] != '"' {
			return info, false
		}
		keyEnd := jsonscan.StringEnd(data, i+1) // validated as the walk does
		if keyEnd < 0 {
			return info, false
		}
		key := data[i+2 : keyEnd-1]
		i = keyEnd
		if i >= len(data) || data[i] != ':' || bytes.IndexByte(key, '\\') >= 0 {
			return info, false
		}
		i++
		end := flatValueEnd(data, i)
		if end < 0 {
			return info, false
		}
		switch string(key) {
		case "type", "error", "response", "code", "message":
			return info, false // the walk decides what these mean
		case "delta":
			if delta != nil || data[i] != '"' {
				return info, false
			}
			delta, deltaAt, deltaEnd = data[i:end], i, end
		case "sequence_number":
			if seq == nil {
				seq = data[i:end] // the first, as the walk keeps it
				if delta == nil {
					seqAt, seqEnd = i, end
				} else if data[i] != '"' && end+1 == len(data) && data[end] == '}' {
					lastSeq = i
				}
			}
		}
		i = end
	}
	if delta == nil || jsonscan.SkipSpace(data, i) != len(data) {
		return info, false
	}
	if memo != nil && lastSeq > 0 && memo.Split == 0 {
		memo.RememberTail(data[deltaEnd:lastSeq], [2]int{})
	}
read:
	switch {
	case memo == nil || deltaAt < 0:
	case seqAt < 0:
		memo.Remember(data[:deltaAt], wire.UsageCounts{})
	case seq[0] != '"': // an integer: the next delta's will differ
		memo.RememberAround(data[:seqAt], data[seqEnd:deltaAt])
	}
	// UsageRead as the walk sets it for a valid event: it holds no response object.
	info.Class, info.By, info.Seq, info.UsageRead = wire.EvOutput, deltaKinds[kind], seq, true
	if withText && kind == 0 {
		info.Text = delta
	}
	return info, true
}

// memoDelta returns where the delta value starts when data begins with
// what memo holds (around an integer at memo.Split, whose end is n), or 0.
func memoDelta(data []byte, memo *wire.Memo) (j, n int) {
	if memo == nil || len(memo.Raw) <= len(textDeltaHead) {
		return 0, 0
	}
	if memo.Split == 0 {
		if !bytes.HasPrefix(data, memo.Raw) {
			return 0, 0
		}
		return len(memo.Raw), 0
	}
	before, after := memo.Raw[:memo.Split], memo.Raw[memo.Split:]
	if !bytes.HasPrefix(data, before) || len(data) <= len(before) || data[len(before)] < '0' || data[len(before)] > '9' {
		return 0, 0
	}
	n = flatValueEnd(data, len(before))
	if n < 0 || !bytes.HasPrefix(data[n:], after) {
		return 0, 0
	}
	return n + len(after), n
}

// memoTail reads the members after a delta that ends at end when they
// are, byte for byte, those of an earlier delta of the stream (memo.Tail:
// all but the integer sequence_number that closed it, as the loop walked
// and accepted them) around another integer that closes the event: the
// sequence number, and true. The loop would read the same.
func memoTail(data []byte, end int, memo *wire.Memo) (seq []byte, ok bool) {
	if len(memo.Tail) == 0 || memo.Split != 0 || !bytes.HasPrefix(data[end:], memo.Tail) {
		return nil, false
	}
	k := end + len(memo.Tail)
	if k >= len(data) || data[k] < '0' || data[k] > '9' {
		return nil, false
	}
	n := flatValueEnd(data, k)
	if n < 0 || n+1 != len(data) || data[n] != '}' {
		return nil, false
	}
	return data[k:n], true
}

// flatValueEnd returns the index past the value at data[i] when it is a
// string, an integer, [] or null, written without spaces; -1 otherwise.
func flatValueEnd(data []byte, i int) int {
	if i >= len(data) {
		return -1
	}
	switch c := data[i]; {
	case c == '"':
		return jsonscan.StringEnd(data, i)
	case c == '0':
		if i+1 < len(data) && data[i+1] >= '0' && data[i+1] <= '9' {
			return -1 // a leading zero
		}
		return integerEnd(data, i+1)
	case c >= '1' && c <= '9':
		j := i + 1
		for j < len(data) && data[j] >= '0' && data[j] <= '9' {
			j++
		}
		return integerEnd(data, j)
	case c == '[':
		if i+1 < len(data) && data[i+1] == ']' {
			return i + 2
		}
	case c == 'n':
		if bytes.HasPrefix(data[i:], []byte("null")) {
			return i + 4
		}
	}
	return -1
}

// integerEnd accepts the end of an integer at j when no fraction or
// exponent follows (those take the walk).
func integerEnd(data []byte, j int) int {
	if j < len(data) && (data[j] == '.' || data[j] == 'e' || data[j] == 'E') {
		return -1
	}
	return j
}
