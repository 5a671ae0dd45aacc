package gemini

import (
	"bytes"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
)

// The candidates of nearly every chunk of a Gemini text stream are one
// candidate, index 0, whose content is one part of non-empty text and a
// role: [{"content": {"parts": [{"text": "…"}],"role": "model"},"index": 0}]
// (members in any order, any whitespace between tokens, a
// thoughtSignature beside the text, or "thought": true for a thinking
// model's thought). plainCandidates reads that shape token by token, each
// string validated as the walk validates it, and returns the text, whether
// it is a thought, and the index past the array; ok is false for any
// other candidates value (a finishReason, other parts, several
// candidates), which takes the walk. Its reading is the walk's: one
// candidate, candidate 0, not finished, and "text" output, plain, or
// "thought" output, without the text and not plain.
func plainCandidates(data []byte, i int) (text []byte, thought bool, end int, ok bool) {
	if i = token(data, i, '['); i < 0 {
		return nil, false, 0, false
	}
	o := openObject(data, i)
	var content, index bool
	for {
		key, j := o.next()
		if j < 0 {
			break
		}
		switch string(key) {
		case "content":
			if content {
				return nil, false, 0, false
			}
			content = true
			text, thought, o.i = plainContent(data, j)
		case "index":
			j = jsonscan.SkipSpace(data, j)
			if index || j >= len(data) || data[j] != '0' {
				return nil, false, 0, false
			}
			index, o.i = true, j+1
		default:
			return nil, false, 0, false
		}
	}
	if o.bad || !content {
		return nil, false, 0, false
	}
	if i = token(data, o.i, ']'); i < 0 {
		return nil, false, 0, false
	}
	return text, thought, i, true
}

// plainContent reads {"parts": [{"text": "…"}], "role": "…"} at data[i]
// (parts once, role at most once, either order) and returns the text (a
// non-empty string), whether it is a thought, and the index past the
// object; -1 for any other content.
func plainContent(data []byte, i int) (text []byte, thought bool, end int) {
	o := openObject(data, i)
	var parts, role bool
	for {
		key, j := o.next()
		if j < 0 {
			break
		}
		switch {
		case string(key) == "parts" && !parts:
			parts = true
			text, thought, o.i = plainParts(data, j)
		case string(key) == "role" && !role:
			role = true
			_, o.i = stringValue(data, j)
		default:
			return nil, false, -1
		}
	}
	if o.bad || !parts {
		return nil, false, -1
	}
	return text, thought, o.i
}

// plainParts reads [{"text": "…"}] at data[i], with an optional
// thoughtSignature string and an optional "thought": true beside the
// text (any other thought value takes the walk).
func plainParts(data []byte, i int) (text []byte, thought bool, end int) {
	if i = token(data, i, '['); i < 0 {
		return nil, false, -1
	}
	o := openObject(data, i)
	var sig bool
	for {
		key, j := o.next()
		if j < 0 {
			break
		}
		switch {
		case string(key) == "text" && text == nil:
			if text, o.i = stringValue(data, j); len(text) <= 2 {
				return nil, false, -1 // "" carries no output: the walk decides
			}
		case string(key) == "thoughtSignature" && !sig:
			sig = true
			_, o.i = stringValue(data, j)
		case string(key) == "thought" && !thought:
			j = jsonscan.SkipSpace(data, j)
			if !bytes.HasPrefix(data[j:], []byte("true")) {
				return nil, false, -1
			}
			thought, o.i = true, j+len("true") // next wants ',' or '}' after it
		default:
			return nil, false, -1
		}
	}
	if o.bad || text == nil {
		return nil, false, -1
	}
	if i = token(data, o.i, ']'); i < 0 {
		return nil, false, -1
	}
	return text, thought, i
}

// object reads the members of an object one by one: next returns a
// member's key and where its value starts; the caller reads the value and
// sets i past it (-1 when it is not valid). next returns -1 at the
// closing brace (i past it) and on anything else (bad set).
type object struct {
	data  []byte
	i     int
	first bool
	bad   bool
}

// openObject expects '{' after whitespace at data[i].
func openObject(data []byte, i int) object {
	o := object{data: data, first: true}
	if o.i = token(data, i, '{'); o.i < 0 {
		o.bad = true
	}
	return o
}

func (o *object) next() (key []byte, value int) {
	if o.bad || o.i < 0 {
		o.bad = true
		return nil, -1
	}
	i := jsonscan.SkipSpace(o.data, o.i)
	if i < len(o.data) && o.data[i] == '}' {
		o.i = i + 1
		return nil, -1
	}
	if !o.first {
		if i = token(o.data, i, ','); i < 0 {
			o.bad = true
			return nil, -1
		}
	}
	o.first = false
	if key, value = memberKey(o.data, i); value < 0 {
		o.bad = true
	}
	return key, value
}

// token expects the byte c after whitespace at data[i]; it returns the
// index past it, -1 when another byte is there.
func token(data []byte, i int, c byte) int {
	i = jsonscan.SkipSpace(data, i)
	if i >= len(data) || data[i] != c {
		return -1
	}
	return i + 1
}

// memberKey reads `"key" :` after whitespace at data[i]: the key (without
// escapes, else no match) and the index past the colon; -1 when none.
func memberKey(data []byte, i int) (key []byte, next int) {
	i = jsonscan.SkipSpace(data, i)
	if i >= len(data) || data[i] != '"' {
		return nil, -1
	}
	end := jsonscan.StringEnd(data, i)
	if end < 0 {
		return nil, -1
	}
	key = data[i+1 : end-1]
	if bytes.IndexByte(key, '\\') >= 0 {
		return nil, -1
	}
	return key, token(data, end, ':')
}

// stringValue reads a string after whitespace at data[i]: its raw JSON
// and the index past it; -1 when no valid string is there.
func stringValue(data []byte, i int) (raw []byte, end int) {
	i = jsonscan.SkipSpace(data, i)
	if i >= len(data) || data[i] != '"' {
		return nil, -1
	}
	end = jsonscan.StringEnd(data, i)
	if end < 0 {
		return nil, -1
	}
	return data[i:end], end
}
