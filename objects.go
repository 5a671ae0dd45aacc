package llmhedge

import (
	"bytes"
	"net/http"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// Provider-held objects (SPEC 16): what a provider creates and later
// requests name, so that only that provider can serve them. Responses
// were the first (responses_pin.go); files, conversations, containers,
// Gemini caches and batches follow the same path: one table (the owner
// table of responses_owner.go, keyed by kind and id), one discovery
// (discover.go), and per dialect a file of rules saying where its
// requests name objects (objects_<dialect>.go) and which paths create and
// call them (objects_paths.go).

// objectOwner returns the configured provider holding o for the client
// of r, if known.
func (h *Handler) objectOwner(r *http.Request, o wire.ObjectRef) *provider {
	return h.ownerOf(r, o.TableKey())
}

// discoverObject is discoverOwner for any kind: the owner when known (or
// found meanwhile by a concurrent discovery), else this request's
// discovery of o.
func (h *Handler) discoverObject(r *http.Request, o wire.ObjectRef) (*provider, *discovery) {
	p, d := h.discoverOwner(r, o.TableKey())
	if d != nil {
		d.ref = o
	}
	return p, d
}

// rememberObject records that provider p holds o for the client of r.
func (h *Handler) rememberObject(r *http.Request, o wire.ObjectRef, p *provider) {
	if h.owners == nil || o.ID == "" {
		return
	}
	h.owners.remember(responseClient(r), o.TableKey(), ownerKey(p), clock())
}

// pinObject pins a completion that names a provider-held object (a file,
// a conversation, a container, a cache) to its holder, or discovers the
// holder of the first one named when none is known. A request naming no
// object costs each dialect's byte search for its markers, nothing else.
func (h *Handler) pinObject(st *requestState, body []byte) {
	var buf [4]wire.ObjectRef
	refs := namedObjects(st.dialect, body, buf[:0])
	if len(refs) == 0 {
		return
	}
	for _, o := range refs {
		if p := h.objectOwner(st.r, o); p != nil {
			st.pinned = p
			return
		}
	}
	st.pinned, st.discover = h.discoverObject(st.r, refs[0])
	if st.discover != nil {
		st.skips = append(st.skips, chainEntry{OffsetMs: msSince(st.start), Event: "discover"})
	}
}

// objectMissing reports whether an error answer says o is not at that
// provider, in each API's words: a 404 (OpenAI, Anthropic, Gemini) or a
// 400 or 403 (a completion naming it) whose message names the id and says
// it is not there; or, with a message naming the kind and not a model, a
// 404 of Anthropic's not_found_error or Gemini's NOT_FOUND, or Gemini's
// 403 PERMISSION_DENIED ("CachedContent not found (or permission
// denied)": another project's cache or file is not visible).
func objectMissing(o wire.ObjectRef, status int, body []byte) bool {
	if status != http.StatusNotFound && status != http.StatusBadRequest && status != http.StatusForbidden {
		return false
	}
	msg, _ := jsonscan.Lookup(body, "error", "message")
	if bytes.Contains(msg, []byte(o.ID)) {
		return status == http.StatusNotFound || saysAbsent(msg)
	}
	lower := bytes.ToLower(msg)
	if bytes.Contains(lower, []byte("model")) || !bytes.Contains(lower, []byte(kindWord[o.Kind])) {
		return false
	}
	typ, _ := jsonscan.Lookup(body, "error", "type")
	if len(typ) == 0 {
		typ, _ = jsonscan.Lookup(body, "error", "status")
	}
	switch status {
	case http.StatusNotFound:
		return string(typ) == `"not_found_error"` || string(typ) == `"NOT_FOUND"`
	case http.StatusForbidden:
		return string(typ) == `"PERMISSION_DENIED"` && saysAbsent(msg)
	}
	return false
}

// kindWord is how the APIs' messages name a kind.
var kindWord = [...]string{"response", "file", "conversation", "container", "cached", "batch"}

// saysAbsent reports whether an error message says something does not
// exist (or is not visible, which for another account's object is the same).
func saysAbsent(msg []byte) bool {
	lower := bytes.ToLower(msg)
	for _, w := range [...]string{"not found", "no such", "does not exist", "not exist", "may not exist", "permission"} {
		if bytes.Contains(lower, []byte(w)) {
			return true
		}
	}
	return false
}

// namedObjects appends the objects a completion body names, by its
// dialect's rules (its wire.ObjectNamer), up to cap(out).
func namedObjects(d wire.Dialect, body []byte, out []wire.ObjectRef) []wire.ObjectRef {
	if on, ok := d.(wire.ObjectNamer); ok {
		return wire.NamedObjects(on.ObjectRules(), body, out)
	}
	return out
}
