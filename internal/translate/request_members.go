package translate

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
)

// member is one top-level member of a JSON object, as json.Unmarshal
// into a map[string]json.RawMessage reads it.
type member struct {
	key []byte
	val json.RawMessage
}

// objectMembers reads obj as json.Unmarshal into a
// map[string]json.RawMessage does, and returns the map's members in key
// order (each key once, with the last of its values) and its error. A
// valid object whose keys are plain ASCII without escapes (the keys as
// written are the map's keys) is walked once, without the map, its key
// strings or copies of its values (which alias obj); anything else takes
// the map's way. buf is where the members go (a caller's array: no
// allocation for an object of as many members).
func objectMembers(obj []byte, buf []member) ([]member, error) {
	ms := buf[:0]
	it, ok := jsonscan.Open(obj, 0, 0)
	plain := ok && it.IsObject()
	for plain && it.Next() {
		v := it.Value()
		if v == nil || !plainKey(it.Key) {
			plain = false
			break
		}
		ms = append(ms, member{it.Key, v})
	}
	if !plain || !it.End() {
		return mapMembers(obj, buf)
	}
	slices.SortStableFunc(ms, func(a, b member) int { return bytes.Compare(a.key, b.key) })
	out := ms[:0]
	for i, m := range ms {
		if i+1 < len(ms) && bytes.Equal(ms[i+1].key, m.key) {
			continue // a later value of the same key: the map keeps that one
		}
		out = append(out, m)
	}
	return out, nil
}

// mapMembers is objectMembers through the map.
func mapMembers(obj []byte, buf []member) ([]member, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(obj, &m); err != nil {
		return nil, err
	}
	ms := buf[:0]
	for _, k := range slices.Sorted(maps.Keys(m)) {
		ms = append(ms, member{[]byte(k), m[k]})
	}
	return ms, nil
}

// unsetCompact is unsetValue(compactJSON(v)) for a valid value v, without
// the compacted copy: only an object's or array's insignificant spaces
// could make it unset.
func unsetCompact(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	if len(v) >= 2 && (v[0] == '{' || v[0] == '[') {
		return jsonscan.SkipSpace(v, 1) == len(v)-1
	}
	return unsetValue(v)
}
