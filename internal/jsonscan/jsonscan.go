package jsonscan

// Minimal JSON scanning.
//
// The payload of an event is inspected with a small validating pull
// scanner rather than encoding/json: it walks the bytes once, descends
// only into the members the proxy needs, and allocates nothing. Its notion
// of valid JSON is encoding/json.Valid's (FuzzJSONScanner holds it to that).

// jsonMaxDepth is encoding/json's nesting limit.
const jsonMaxDepth = 10000

func SkipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// jsonValid reports whether b is exactly one JSON value.
func Valid(b []byte) bool {
	i := jsonSkip(b, 0, 0, nil)
	return i >= 0 && SkipSpace(b, i) == len(b)
}

// jsonSkip returns the index just past the value that starts at b[i]
// (after whitespace), or -1 when there is no valid value there. depth is
// the nesting of that value (0 at the top). A non-nil w notes its words in
// every key and string the value holds.
func jsonSkip(b []byte, i, depth int, w *Watch) int {
	s := skipper{b: b, w: w, base: noBlock}
	return s.skip(i, depth)
}

func (s *skipper) skip(i, depth int) int {
	b, w := s.b, s.w
	i = SkipSpace(b, i)
	if i >= len(b) {
		return -1
	}
	switch c := b[i]; c {
	case '"':
		e := s.str(i)
		if w != nil && e > 0 {
			w.note(b[i:e])
		}
		return e
	case '{':
		if depth >= jsonMaxDepth {
			return -1
		}
		s.blocks = true
		if i = SkipSpace(b, i+1); i < len(b) && b[i] == '}' {
			return i + 1
		}
		for {
			if i >= len(b) || b[i] != '"' {
				return -1
			}
			ks := i
			if i = s.str(i); i < 0 {
				return -1
			}
			if w != nil {
				w.note(b[ks:i])
			}
			if i = SkipSpace(b, i); i >= len(b) || b[i] != ':' {
				return -1
			}
			if i = s.skip(i+1, depth+1); i < 0 {
				return -1
			}
			if i = SkipSpace(b, i); i >= len(b) {
				return -1
			}
			switch b[i] {
			case ',':
				i = SkipSpace(b, i+1)
			case '}':
				return i + 1
			default:
				return -1
			}
		}
	case '[':
		if depth >= jsonMaxDepth {
			return -1
		}
		s.blocks = true
		if i = SkipSpace(b, i+1); i < len(b) && b[i] == ']' {
			return i + 1
		}
		for {
			if i = s.skip(i, depth+1); i < 0 {
				return -1
			}
			if i = SkipSpace(b, i); i >= len(b) {
				return -1
			}
			switch b[i] {
			case ',':
				i++
			case ']':
				return i + 1
			default:
				return -1
			}
		}
	case 't':
		return jsonSkipLiteral(b, i, "true")
	case 'f':
		return jsonSkipLiteral(b, i, "false")
	case 'n':
		return jsonSkipLiteral(b, i, "null")
	default:
		if c == '-' || c >= '0' && c <= '9' {
			return jsonSkipNumber(b, i)
		}
	}
	return -1
}

func jsonSkipLiteral(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// SWAR constants: a byte of ones, and the high bit of every byte.
const (
	swarOnes = 0x0101010101010101
	swarHigh = 0x8080808080808080
)

// jsonSkipString returns the index past the string whose opening quote is
// at b[i], or -1.
func jsonSkipString(b []byte, i int) int {
	end, _ := jsonScanString(b, i)
	return end
}

func jsonUnhex(c byte) rune {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0')
	case c >= 'a' && c <= 'f':
		return rune(c - 'a' + 10)
	case c >= 'A' && c <= 'F':
		return rune(c - 'A' + 10)
	}
	return -1
}

// jsonHex4 decodes four hex digits, or returns -1.
func jsonHex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	// Any invalid digit is -1, which makes the whole result negative.
	return jsonUnhex(b[0])<<12 | jsonUnhex(b[1])<<8 | jsonUnhex(b[2])<<4 | jsonUnhex(b[3])
}

func jsonSkipNumber(b []byte, i int) int {
	if b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return -1
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		i = jsonDigits(b, i+1)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		j := jsonDigits(b, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := jsonDigits(b, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func jsonDigits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// jsonIter walks the members of an object or the elements of an array,
// validating as it goes. After next reports a member, its value starts at
// i and is pending: take it with value, descend into it with enter (and
// give the child back with leave), or let the following next skip it.
type Iter struct {
	b       []byte
	Pos     int
	depth   int  // nesting of this container
	close   byte // '}' or ']'
	Key     []byte
	keyEsc  bool // key holds an escape
	first   bool
	pending bool // a value starts at i and was not consumed
	watch   *Watch
	bad     bool // not valid JSON
	done    bool // the container ended; i is past its close
}

// jsonOpen starts walking the object or array at b[i:] (after whitespace).
func Open(b []byte, i, depth int) (Iter, bool) {
	i = SkipSpace(b, i)
	if i >= len(b) || depth >= jsonMaxDepth {
		return Iter{}, false
	}
	it := Iter{b: b, Pos: i + 1, depth: depth, first: true}
	switch b[i] {
	case '{':
		it.close = '}'
	case '[':
		it.close = ']'
	default:
		return Iter{}, false
	}
	return it, true
}

// isObject reports whether the iterator walks an object.
func (it *Iter) IsObject() bool { return it.close == '}' }

// next moves to the next member (setting key, for an object) or element,
// skipping a pending value. It is false at the end of the container or on
// invalid JSON (then bad is set).
func (it *Iter) Next() bool {
	if it.pending && it.Value() == nil {
		return false
	}
	if it.bad || it.done {
		return false
	}
	b := it.b
	i := SkipSpace(b, it.Pos)
	switch {
	case i >= len(b):
		it.bad = true
		return false
	case b[i] == it.close: // "{}", or after a member (a trailing comma fails below)
		it.Pos, it.done = i+1, true
		return false
	case it.first:
		it.first = false
	case b[i] != ',':
		it.bad = true
		return false
	default:
		i = SkipSpace(b, i+1)
	}
	if it.close == '}' {
		if i >= len(b) || b[i] != '"' {
			it.bad = true
			return false
		}
		ke, esc := jsonScanString(b, i)
		if ke < 0 {
			it.bad = true
			return false
		}
		it.Key, it.keyEsc = b[i+1:ke-1], esc
		if it.watch != nil {
			it.watch.note(b[i:ke])
		}
		i = SkipSpace(b, ke)
		if i >= len(b) || b[i] != ':' {
			it.bad = true
			return false
		}
		i = SkipSpace(b, i+1)
	}
	it.Pos, it.pending = i, true
	return true
}

// value consumes the pending value and returns its raw bytes; nil when
// nothing is pending or the value is not valid JSON.
func (it *Iter) Value() []byte {
	if !it.pending {
		return nil
	}
	it.pending = false
	vs := it.Pos
	ve := jsonSkip(it.b, vs, it.depth+1, it.watch)
	if ve < 0 {
		it.bad = true
		return nil
	}
	it.Pos = ve
	return it.b[vs:ve]
}

// enter descends into the pending value when it is an object or array; the
// parent resumes after leave. When it is neither, the value stays pending.
func (it *Iter) Enter() (Iter, bool) {
	if !it.pending {
		return Iter{}, false
	}
	c, ok := Open(it.b, it.Pos, it.depth+1)
	if ok {
		it.pending = false
		c.watch = it.watch
	}
	return c, ok
}

// leave finishes the child from enter and continues after it.
func (it *Iter) Leave(c *Iter) {
	for c.Next() {
	}
	if c.bad {
		it.bad = true
		return
	}
	it.Pos = c.Pos
}

// end reports whether the walk of a top-level container succeeded and
// nothing but whitespace follows it.
func (it *Iter) End() bool {
	for it.Next() {
	}
	return !it.bad && SkipSpace(it.b, it.Pos) == len(it.b)
}

// unquote decodes a raw JSON string value.
func Unquote(v []byte) string { return string(AppendString(nil, v)) }

// StringEnd returns the index past the JSON string whose opening quote is
// at b[i], or -1 when there is no valid string there.
func StringEnd(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	return jsonSkipString(b, i)
}

// SkipValue consumes the pending value, which the caller read and found
// valid up to end (the index past it), as Value would have.
func (it *Iter) SkipValue(end int) {
	it.pending = false
	it.Pos = end
}

// SkipRest ends the walk of the container at end, the index past its
// close: the caller found b[it.Pos:] to be, byte for byte, what followed a
// member in a container it walked and found valid from the same state.
// False (and nothing changes) when a value is pending or the walk failed.
func (it *Iter) SkipRest(end int) bool {
	if it.pending || it.bad || it.done || it.first {
		return false
	}
	it.Pos, it.done = end, true
	return true
}
