package llmhedge

import (
	"strings"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
)

// namedObjects appends the objects a completion body names, by its
// dialect's rules (objects_<dialect>.go), up to cap(out).
func namedObjects(d dialect, body []byte, out []objectRef) []objectRef {
	switch d {
	case dialectAnthropic:
		return anthropicObjects(body, out)
	case dialectOpenAI:
		return openAIObjects(body, out)
	case dialectResponses:
		return responsesObjects(body, out)
	case dialectGemini:
		return geminiObjects(body, out)
	}
	return out
}

// appendKeyIDs appends, as objects of kind, the id values of every member
// named key at any depth of a JSON body (up to cap(out); a value that is
// no plausible id is skipped). Bodies are walked in place.
func appendKeyIDs(body []byte, key string, kind objectKind, out []objectRef, id func([]byte) string) []objectRef {
	it, ok := jsonscan.Open(body, 0, 0)
	if !ok {
		return out
	}
	return walkKeyIDs(&it, key, kind, out, id)
}

func walkKeyIDs(it *jsonscan.Iter, key string, kind objectKind, out []objectRef, id func([]byte) string) []objectRef {
	for it.Next() && len(out) < cap(out) {
		if it.IsObject() && it.KeyIs(key) {
			if v := id(it.Value()); v != "" {
				out = append(out, objectRef{kind, v})
			}
			continue
		}
		if c, ok := it.Enter(); ok {
			out = walkKeyIDs(&c, key, kind, out, id)
			it.Leave(&c)
		}
	}
	return out
}

// topLevelID returns the id a top-level member names: a string id, or an
// object's "id" (`"conversation": {"id": ...}`, `"container": {...}`).
func topLevelID(body []byte, key string) string {
	var id string
	_ = jsonscan.ScanTopLevel(body, func(k []byte, s, e int) bool {
		if jsonscan.KeyIs(k, key) {
			v := body[s:e]
			if !jsonscan.IsString(v) {
				v, _ = jsonscan.Lookup(v, "id")
			}
			id = objectIDValue(v)
		}
		return true
	})
	return id
}

// resourceID returns the last segment of a resource name after marker
// ("cachedContents/abc", ".../v1beta/files/abc" -> "abc"), or "".
func resourceID(v []byte, marker string) string {
	if !jsonscan.IsString(v) || len(v) > 2+6*maxObjectIDLen {
		return ""
	}
	s := jsonscan.Unquote(v)
	i := strings.LastIndex(s, marker)
	if i < 0 {
		return ""
	}
	id := s[i+len(marker):]
	if !validObjectID([]byte(id)) {
		return ""
	}
	return id
}
