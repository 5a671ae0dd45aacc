package jsonscan

import "errors"

// Top is where the top-level members of one JSON object stand, as the
// walk that validated the object found them: a reader of one member finds
// it without walking the object again. A coding agent's request body is
// hundreds of kilobytes, and several readers each want one member of it
// (the session key, Responses' store and previous_response_id).
type Top struct {
	body    []byte
	members []topMember
	inline  [8]topMember // most bodies have fewer members: no allocation
	// Marks is what the walk saw of the words it watched (watch.go).
	Marks Watch
}

type topMember struct {
	key  []byte
	s, e int
}

// Reset starts t over for body.
func (t *Top) Reset(body []byte) {
	t.body, t.members, t.Marks = body, t.inline[:0], Watch{}
}

// Add records the next member of the body, in order: its raw key and the
// range of its value.
func (t *Top) Add(key []byte, s, e int) {
	t.members = append(t.members, topMember{key, s, e})
}

// Holds reports whether t indexes body: the same bytes, not a copy. It
// compares the start and the length only, so a body must never be
// rewritten in place once indexed; the proxy never does (a rewrite, such
// as the model's substitution, makes a new slice, which is walked).
func (t *Top) Holds(body []byte) bool {
	return t != nil && len(body) > 0 && len(t.body) == len(body) && &t.body[0] == &body[0]
}

// Index walks body as ScanTopLevel does and records every member, for a
// parse that reads no member of its own; an error is ScanTopLevel's.
func (t *Top) Index(body []byte) error { return t.IndexWatching(body, nil) }

// IndexWatching is Index noting words (nil: none) in t.Marks as it walks.
func (t *Top) IndexWatching(body []byte, words *Words) error {
	t.Reset(body)
	var w *Watch
	if words != nil {
		t.Marks.Words, w = words, &t.Marks
	}
	return scanTop(body, w, func(key []byte, s, e int) bool {
		t.Add(key, s, e)
		return true
	})
}

// Scan is ScanTopLevel(body, fn): fn sees the same members, in order, from
// the index when t holds one for body (the same bytes: only a valid object
// is indexed, so the scan has no error to report), else by a walk.
func (t *Top) Scan(body []byte, fn func(key []byte, vStart, vEnd int) bool) error {
	if !t.Holds(body) {
		return ScanTopLevel(body, fn)
	}
	for _, m := range t.members {
		if !fn(m.key, m.s, m.e) {
			break
		}
	}
	return nil
}

// Lookup is Lookup(body, path...): the first top-level member named
// path[0] comes from the index when t holds one for body, and only its
// value is walked for the rest of the path.
func (t *Top) Lookup(body []byte, path ...string) ([]byte, bool) {
	if !t.Holds(body) || len(path) == 0 {
		return Lookup(body, path...)
	}
	for _, m := range t.members {
		if KeyIs(m.key, path[0]) {
			return Lookup(body[m.s:m.e], path[1:]...)
		}
	}
	return nil, false
}

var ErrScan = errors.New("request body: expected a JSON object")

// scanTopLevel calls fn with each top-level key of a JSON object (raw, as
// written) and the byte range of its value, validating as it goes.
// Returning false from fn stops the scan.
func ScanTopLevel(body []byte, fn func(key []byte, vStart, vEnd int) bool) error {
	return scanTop(body, nil, fn)
}

// scanTop is ScanTopLevel, the walk noting w's words when w is not nil.
func scanTop(body []byte, w *Watch, fn func(key []byte, vStart, vEnd int) bool) error {
	it, ok := Open(body, 0, 0)
	if !ok || !it.IsObject() {
		return ErrScan
	}
	it.Watch(w)
	for it.Next() {
		start := it.Pos
		v := it.Value()
		if v == nil {
			break
		}
		if !fn(it.Key, start, start+len(v)) {
			return nil
		}
	}
	if !it.End() {
		return ErrScan
	}
	return nil
}
