package wire

import (
	"bytes"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
)

// objectKind is what a provider holds.
type ObjectKind uint8

const (
	ObjectResponse ObjectKind = iota
	ObjectFile
	ObjectConversation
	ObjectContainer
	ObjectCache
	ObjectBatch
)

var objectKindNames = [...]string{"response", "file", "conversation", "container", "cache", "batch"}

func (k ObjectKind) String() string { return objectKindNames[k] }

// objectRef names one object.
type ObjectRef struct {
	Kind ObjectKind
	ID   string
}

// tableKey is the object's key in the owner table: a response's bare id,
// as the table always held them; other kinds behind their name and a NUL,
// which no id holds (validResponseID), so kinds never collide.
func (o ObjectRef) TableKey() string {
	if o.Kind == ObjectResponse {
		return o.ID
	}
	return o.Kind.String() + "\x00" + o.ID
}

// MaxObjectIDLen bounds an object id the proxy remembers or looks up.
const MaxObjectIDLen = 256

// ObjectIDValue decodes a raw JSON string holding an object id, or "" for
// one that is not plausible (validObjectID).
func ObjectIDValue(v []byte) string {
	if !jsonscan.IsString(v) || len(v) > 2+6*MaxObjectIDLen {
		return ""
	}
	var buf [MaxObjectIDLen]byte
	id := v[1 : len(v)-1]
	if bytes.IndexByte(id, '\\') >= 0 {
		id = jsonscan.AppendString(buf[:0], v)
	}
	if !ValidObjectID(id) {
		return ""
	}
	return string(id)
}

// ValidObjectID: ids are stored, logged and matched against request
// paths, so one is at most 256 bytes of printable ASCII without spaces,
// quotes, backslashes or the URL delimiters / ? # % (as a response id).
func ValidObjectID(id []byte) bool {
	if len(id) == 0 || len(id) > MaxObjectIDLen {
		return false
	}
	for _, c := range id {
		if c <= ' ' || c >= 0x7f {
			return false
		}
		switch c {
		case '"', '\\', '/', '?', '#', '%':
			return false
		}
	}
	return true
}

// ObjectNamer is the capability of a dialect whose requests name
// provider-held objects (files, containers, conversations, caches): its
// rules say where. The engine routes such a request to the objects'
// holder (objects.go in the root).
type ObjectNamer interface {
	ObjectRules() []ObjectRule
}

// ObjectRule says where a dialect's requests name one kind of object.
type ObjectRule struct {
	// Marker: a body without it names no such object (one byte search,
	// the whole cost for a request that names none).
	Marker []byte
	Kind   ObjectKind
	// Paths are where the API defines the member naming the object
	// (ObjectPath); nowhere else does a member of that name count.
	Paths []ObjectPath
	// ID decodes the member's value into an id; nil: ObjectIDValue.
	ID func([]byte) string
}

// NamedObjects appends the objects a body names by rules, up to cap(out).
func NamedObjects(rules []ObjectRule, body []byte, out []ObjectRef) []ObjectRef {
	return NamedObjectsIn(rules, body, nil, out)
}

// NamedObjectsIn is NamedObjects with the parse's index of the body's
// top-level members: a rule whose paths are all top-level members
// (Responses' conversation, Anthropic's container, Gemini's cachedContent)
// asks the index instead of searching an agent's body of hundreds of
// kilobytes for its marker, and another rule asks what the parse's walk
// saw of its marker (ObjectWords) before it searches.
func NamedObjectsIn(rules []ObjectRule, body []byte, top *jsonscan.Top, out []ObjectRef) []ObjectRef {
	for i := range rules {
		r := &rules[i]
		if len(out) >= cap(out) {
			continue
		}
		if key, ok := r.topLevel(); ok && top.Holds(body) {
			if !topHas(top, body, key) {
				continue
			}
		} else if seen, known := top.Marked(body).Saw(r.Marker); known {
			if !seen {
				continue
			}
		} else if !bytes.Contains(body, r.Marker) {
			continue
		}
		id := r.ID
		if id == nil {
			id = ObjectIDValue
		}
		for _, p := range r.Paths {
			out = p.appendIDs(body, r.Kind, id, out)
		}
	}
	return out
}

// topLevel reports the member a rule's paths all name at the top level,
// when they do.
func (r *ObjectRule) topLevel() (string, bool) {
	if len(r.Paths) == 0 {
		return "", false
	}
	key := ""
	for _, p := range r.Paths {
		if len(p) != 1 || p[0].each || p[0].filter != "" || (key != "" && p[0].key != key) {
			return "", false
		}
		key = p[0].key
	}
	return key, true
}

// topHas reports whether the indexed body has the top-level member key.
func topHas(top *jsonscan.Top, body []byte, key string) bool {
	found := false
	_ = top.Scan(body, func(k []byte, _, _ int) bool {
		found = jsonscan.KeyIs(k, key)
		return !found
	})
	return found
}

// ObjectWords are the markers of rules, for the parse's walk to watch
// (jsonscan.Watch): a marker is a prefilter only, the rule's paths decide,
// and the walk passes every whole string the body holds (a marker only
// ever matches one: an unescaped quote in JSON is a string's end).
func ObjectWords(rules []ObjectRule) *jsonscan.Words {
	var ws [][]byte
	for _, r := range rules {
		ws = append(ws, r.Marker)
	}
	return jsonscan.NewWords(ws...)
}
