package wire

import (
	"strings"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
)

// ObjectPath is where an API defines a member naming an object: from the
// top-level object down, member names; "[]" after one, each element of
// its array; "{key=a|b}" after one, only an object whose key is one of
// those strings. For example Anthropic's uploaded file in a document or
// image block:
//
//	messages[].content[]{type=document|image}.source{type=file}.file_id
//
// A member of that name anywhere else (a tool call's input, metadata, a
// tool's schema) is the client's own data: it names no object.
type ObjectPath []pathStep

type pathStep struct {
	key    string   // the member to descend into ("" : the value itself)
	each   bool     // then each element of that array
	filter string   // then only an object whose member filter is ...
	values []string // ... one of these strings
}

// Path parses a path (package-level rules are literals: it panics on a
// malformed one).
func Path(s string) ObjectPath {
	var p ObjectPath
	for seg := range strings.SplitSeq(s, ".") {
		key := seg
		if i := strings.IndexAny(seg, "[{"); i >= 0 {
			key, seg = seg[:i], seg[i:]
		} else {
			seg = ""
		}
		if key == "" {
			panic("wire.Path " + s + ": a segment without a member name")
		}
		p = append(p, pathStep{key: key})
		for seg != "" {
			switch {
			case strings.HasPrefix(seg, "[]"):
				p = append(p, pathStep{each: true})
				seg = seg[2:]
			case seg[0] == '{':
				end := strings.IndexByte(seg, '}')
				k, vs, ok := strings.Cut(seg[1:max(end, 1)], "=")
				if end < 0 || !ok || k == "" || vs == "" {
					panic("wire.Path " + s + ": want {key=a|b}")
				}
				p = append(p, pathStep{filter: k, values: strings.Split(vs, "|")})
				seg = seg[end+1:]
			default:
				panic("wire.Path " + s + ": unexpected " + seg)
			}
		}
	}
	return p
}

// appendIDs appends, as objects of kind, the ids id reads from the values
// at p inside the JSON value v (up to cap(out)).
func (p ObjectPath) appendIDs(v []byte, kind ObjectKind, id func([]byte) string, out []ObjectRef) []ObjectRef {
	for len(p) > 0 && len(out) < cap(out) {
		s := &p[0]
		switch {
		case s.each:
			it, ok := jsonscan.Open(v, 0, 0)
			if !ok || it.IsObject() {
				return out
			}
			for it.Next() && len(out) < cap(out) {
				e := it.Value()
				if e == nil {
					break
				}
				out = p[1:].appendIDs(e, kind, id, out)
			}
			return out
		case s.filter != "":
			f, _ := jsonscan.Lookup(v, s.filter)
			if !oneOf(f, s.values) {
				return out
			}
		default:
			m, ok := jsonscan.Lookup(v, s.key)
			if !ok {
				return out
			}
			v = m
		}
		p = p[1:]
	}
	if len(p) == 0 && len(out) < cap(out) {
		if ref := id(v); ref != "" {
			out = append(out, ObjectRef{Kind: kind, ID: ref})
		}
	}
	return out
}

// oneOf reports whether the raw value v is one of the strings.
func oneOf(v []byte, values []string) bool {
	for _, w := range values {
		if jsonscan.StringIs(v, w) {
			return true
		}
	}
	return false
}

// StringOrID reads an id given as a string or as an object's "id"
// (`"conversation": "conv_1"` or `{"id": "conv_1"}`).
func StringOrID(v []byte) string {
	if !jsonscan.IsString(v) {
		v, _ = jsonscan.Lookup(v, "id")
	}
	return ObjectIDValue(v)
}

// ResourceName reads the id from a resource name of the form prefix+id,
// one segment ("cachedContents/abc" with prefix "cachedContents/"); ""
// for any other string.
func ResourceName(v []byte, prefixes ...string) string {
	if !jsonscan.IsString(v) || len(v) > 2+6*MaxObjectIDLen {
		return ""
	}
	s := jsonscan.Unquote(v)
	for _, pre := range prefixes {
		if id, ok := strings.CutPrefix(s, pre); ok && ValidObjectID([]byte(id)) {
			return id
		}
	}
	return ""
}
