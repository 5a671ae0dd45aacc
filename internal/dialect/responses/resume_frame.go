package responses

import (
	"bytes"
	"encoding/json"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
)

// readFrame reads the members of a Responses event a resumer uses, as
// json.Unmarshal into a responsesFrame reads them (the item and part in
// st, when the fast path reads them). The events providers
// send (exact keys, once each, plain strings and integers) are read with
// the allocation-free scanner; anything else (a key encoding/json would
// match by case folding, a duplicate, an escape, a number that is not a
// plain integer) goes to encoding/json itself, so the result is its own.
func readFrame(data []byte, st *frameStore) (f responsesFrame, err error) {
	if item, part, ok := scanFrame(data, &f, st); ok {
		// Set here, not in the scan: st then stays the caller's (on its
		// stack) unless the caller keeps the frame.
		if item {
			f.Item = &st.item
		}
		if part {
			f.Part = &st.part
		}
		return f, nil
	}
	var g responsesFrame // its own: f, given to encoding/json, would be on the heap
	err = json.Unmarshal(data, &g)
	return g, err
}

// scanFrame is readFrame's fast path; ok false means "ask encoding/json".
// item and part say the frame has them (in st): not null, not absent.
func scanFrame(data []byte, f *responsesFrame, st *frameStore) (item, part, ok bool) {
	it, ok := jsonscan.Open(data, 0, 0)
	if !ok || !it.IsObject() {
		return false, false, false
	}
	var seen [5]bool
	for it.Next() {
		k := frameKey(&it, "output_index", "content_index", "item_id", "item", "part")
		if k == keyOdd || k >= 0 && seen[k] {
			return false, false, false
		}
		if k >= 0 {
			seen[k] = true
		}
		switch k {
		case 0, 1:
			n, ok := plainInt(it.Value())
			if !ok {
				return false, false, false
			}
			if k == 0 {
				f.OutputIndex = n
			} else {
				f.ContentIndex = n
			}
		case 2:
			s, ok := plainString(it.Value())
			if !ok {
				return false, false, false
			}
			f.ItemID = s
		case 3:
			if item, ok = scanFrameItem(&it, &st.item); !ok {
				return false, false, false
			}
		case 4:
			if part, ok = scanFramePart(&it, &st.part); !ok {
				return false, false, false
			}
		}
	}
	return item, part, it.End()
}

// scanFrameItem reads the item member: null (present false), or {id,
// type, content} into item.
func scanFrameItem(it *jsonscan.Iter, item *frameItem) (present, ok bool) {
	obj, ok := it.Enter()
	if !ok {
		return false, jsonscan.IsNull(it.Value())
	}
	if !obj.IsObject() {
		return false, false
	}
	*item = frameItem{}
	var seen [3]bool
	for obj.Next() {
		k := frameKey(&obj, "id", "type", "content")
		if k == keyOdd || k >= 0 && seen[k] {
			return false, false
		}
		if k >= 0 {
			seen[k] = true
		}
		switch k {
		case 0, 1:
			s, ok := plainString(obj.Value())
			if !ok {
				return false, false
			}
			if k == 0 {
				item.ID = s
			} else {
				item.Type = s
			}
		case 2:
			// Only how many elements there are is read: a non-empty array
			// is refused before its elements are looked at.
			arr, ok := obj.Enter()
			if !ok || arr.IsObject() {
				return false, false
			}
			for arr.Next() {
				if arr.Value() == nil {
					return false, false
				}
				item.Content = append(item.Content, nil)
			}
			obj.Leave(&arr)
		}
	}
	it.Leave(&obj)
	return true, true
}

// scanFramePart reads the part member: null (present false), or {type,
// text} into part.
func scanFramePart(it *jsonscan.Iter, part *framePart) (present, ok bool) {
	obj, ok := it.Enter()
	if !ok {
		return false, jsonscan.IsNull(it.Value())
	}
	if !obj.IsObject() {
		return false, false
	}
	*part = framePart{}
	var seen [2]bool
	for obj.Next() {
		k := frameKey(&obj, "type", "text")
		if k == keyOdd || k >= 0 && seen[k] {
			return false, false
		}
		if k >= 0 {
			seen[k] = true
		}
		if k >= 0 {
			s, ok := plainString(obj.Value())
			if !ok {
				return false, false
			}
			if k == 0 {
				part.Type = s
			} else {
				part.Text = s
			}
		}
	}
	it.Leave(&obj)
	return true, true
}

// keyOdd is a key encoding/json might match to a field by folding it.
const keyOdd = -2

// frameKey is the index of the current key among names (exact), -1 for
// a key that matches none, keyOdd for one that would match after case
// folding or is spelled with escapes or non-ASCII bytes.
func frameKey(it *jsonscan.Iter, names ...string) int {
	for i, n := range names {
		if string(it.Key) == n {
			return i
		}
	}
	for _, c := range it.Key {
		if c == '\\' || c >= 0x80 {
			return keyOdd
		}
	}
	for _, n := range names {
		// ASCII only here: a key of another length cannot fold to n.
		if len(it.Key) == len(n) && bytes.EqualFold(it.Key, []byte(n)) {
			return keyOdd
		}
	}
	return -1
}

// plainString is a raw JSON string of printable ASCII without escapes.
func plainString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	for _, c := range v[1 : len(v)-1] {
		if c < 0x20 || c >= 0x80 || c == '\\' {
			return "", false
		}
	}
	return string(v[1 : len(v)-1]), true
}

// plainInt is a raw JSON integer of up to 18 digits, optionally negative.
func plainInt(v []byte) (int64, bool) {
	neg := len(v) > 0 && v[0] == '-'
	if neg {
		v = v[1:]
	}
	n, ok := parseDigits(v)
	if neg {
		n = -n
	}
	return n, ok
}

func parseDigits(v []byte) (int64, bool) {
	if len(v) == 0 || len(v) > 18 || len(v) > 1 && v[0] == '0' {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}
