package llmhedge

import (
	"bytes"
	"io"
	"net/http"
	"strings"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// The API paths that create provider-held objects and call them by id,
// all reached through `forward` globs. A create answered 2xx is read (it
// is a small JSON object) to remember which provider holds the new id; a
// call by id goes to that provider, or discovers it (discover.go).

// objectCollection is one API's collection of objects: POST to path
// creates one, path/{id}[/...] calls it.
type objectCollection struct {
	path string
	kind wire.ObjectKind
	name string // the member of a created object holding its id: "id", or Gemini's "name"
}

var objectCollections = []objectCollection{
	{"/v1/files", wire.ObjectFile, "id"},                 // OpenAI, and Anthropic's Files API
	{"/v1/conversations", wire.ObjectConversation, "id"}, // OpenAI Conversations (and their items)
	{"/v1/batches", wire.ObjectBatch, "id"},              // OpenAI
	{"/v1/messages/batches", wire.ObjectBatch, "id"},     // Anthropic Message Batches
	{"/v1beta/cachedContents", wire.ObjectCache, "name"},
	{"/v1beta/files", wire.ObjectFile, "name"},
}

// maxCreatedBody bounds the answer to a create read before it is relayed.
const maxCreatedBody = 1 << 20

// objectOfPath returns the object a call by id names (any method: each
// API's methods on it all need its holder).
func objectOfPath(p string) (wire.ObjectRef, bool) {
	p = strings.TrimSuffix(p, "/")
	for _, c := range objectCollections {
		rest, ok := strings.CutPrefix(p, c.path+"/")
		if !ok {
			continue
		}
		id, _, _ := strings.Cut(rest, "/")
		if wire.ValidObjectID([]byte(id)) {
			return wire.ObjectRef{Kind: c.kind, ID: id}, true
		}
	}
	return wire.ObjectRef{}, false
}

// createdCollection returns the collection a request creates an object in.
func createdCollection(method, p string) (objectCollection, bool) {
	if method != http.MethodPost {
		return objectCollection{}, false
	}
	p = strings.TrimSuffix(p, "/")
	for _, c := range objectCollections {
		if p == c.path {
			return c, true
		}
	}
	return objectCollection{}, false
}

// objectTargets are the providers a forwarded call may go to, for a call
// that is not on a response: a call on an object by id goes to its holder
// alone, or is discovered among the providers of its dialect; any other
// call goes to the providers of its dialect.
func (h *Handler) objectTargets(st *requestState, d wire.Dialect) []*provider {
	o, ok := objectOfPath(st.r.URL.Path)
	if !ok || h.owners == nil {
		return h.auxCandidates(d)
	}
	p, disc := h.discoverObject(st.r, o)
	if p != nil {
		return []*provider{p}
	}
	st.discover = disc // ended by finish when no provider is asked
	cands := h.auxCandidates(d)
	if len(cands) > 0 && disc != nil {
		st.skips = append(st.skips, chainEntry{OffsetMs: msSince(st.start), Event: "discover"})
	}
	return cands
}

// noteCreated remembers the holder of an object a forwarded create made:
// the answer (2xx, at most maxCreatedBody) is read for its id, then
// relayed as it came.
func (h *Handler) noteCreated(st *requestState, a *attempt) {
	c, ok := createdCollection(st.r.Method, st.r.URL.Path)
	if !ok || h.owners == nil || a.resp.StatusCode/100 != 2 {
		return
	}
	body, err := io.ReadAll(io.LimitReader(a.resp.Body, maxCreatedBody+1))
	a.resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), a.resp.Body), a.resp.Body}
	if err != nil || len(body) > maxCreatedBody {
		return
	}
	v, _ := jsonscan.Lookup(body, c.name)
	id := wire.ObjectIDValue(v)
	if c.name == "name" {
		id = wire.ResourceID(v, c.path[strings.LastIndexByte(c.path, '/')+1:]+"/")
	}
	h.rememberObject(st.r, wire.ObjectRef{Kind: c.kind, ID: id}, a.p)
}
