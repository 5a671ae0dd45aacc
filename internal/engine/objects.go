package engine

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// Provider-held objects (SPEC 16): what a provider creates and later
// requests name, so that only that provider can serve them. Responses
// were the first (responses_owner.go); files, conversations, containers,
// Gemini caches and batches follow the same path: one table (the owner
// table of responses_owner.go, keyed by kind and id), one discovery
// (below), per dialect its rules saying where its requests name objects
// (internal/dialect/<name>/objects.go, a wire.ObjectNamer), and the paths
// that create and call them (below).

// objectOwner returns the configured provider holding o for the client
// of r, if known.
func (h *Engine) objectOwner(r *http.Request, o wire.ObjectRef) *provider {
	return h.ownerOf(r, o.TableKey())
}

// discoverObject is discoverOwner for any kind: the owner when known (or
// found meanwhile by a concurrent discovery), else this request's
// discovery of o.
func (h *Engine) discoverObject(r *http.Request, o wire.ObjectRef) (*provider, *discovery) {
	p, d := h.discoverOwner(r, o.TableKey())
	if d != nil {
		d.ref = o
	}
	return p, d
}

// rememberObject records that provider p holds o for the client of r.
func (h *Engine) rememberObject(r *http.Request, o wire.ObjectRef, p *provider) {
	if h.owners == nil || o.ID == "" {
		return
	}
	h.owners.remember(h.responseClient(r), o.TableKey(), ownerKey(p), clock())
}

// pinObject pins a completion that names a provider-held object (a file,
// a conversation, a container, a cache) to its holder, or discovers the
// holder of the first one named when none is known. A request naming no
// object costs each dialect's byte search for its markers, nothing else.
func pinObject(st *requestState, body []byte) {
	h := st.h
	var buf [4]wire.ObjectRef
	refs := namedObjects(st.dialect, body, &st.req.Top, buf[:0])
	if len(refs) == 0 {
		return
	}
	for _, o := range refs {
		if p := h.objectOwner(st.r, o); p != nil {
			st.pinned, st.pinRef = p, o
			return
		}
	}
	st.pinned, st.discover = h.discoverObject(st.r, refs[0])
	if st.discover != nil {
		st.skips = append(st.skips, ChainEntry{OffsetMs: msSince(st.start), Event: "discover"})
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
func namedObjects(d wire.Dialect, body []byte, top *jsonscan.Top, out []wire.ObjectRef) []wire.ObjectRef {
	if on, ok := d.(wire.ObjectNamer); ok {
		return wire.NamedObjectsIn(on.ObjectRules(), body, top, out)
	}
	return out
}

// The API paths that create provider-held objects and call them by id,
// all reached through `forward` globs. A create answered 2xx is read (it
// is a small JSON object) to remember which provider holds the new id; a
// call by id goes to that provider, or discovers it (objects.go).

// objectCollection is one API's collection of objects: POST to path
// creates one, path/{id}[/...] calls it.
type objectCollection struct {
	path string
	kind wire.ObjectKind
	// name is the member of the create answer holding the new id: "id",
	// or Gemini's resource name ("name", or "file.name" inside the
	// answer's "file"), read as <last path segment>/<id>.
	name string
}

var objectCollections = []objectCollection{
	{"/v1/files", wire.ObjectFile, "id"},                 // OpenAI, and Anthropic's Files API
	{"/v1/conversations", wire.ObjectConversation, "id"}, // OpenAI Conversations (and their items)
	{"/v1/batches", wire.ObjectBatch, "id"},              // OpenAI
	{"/v1/messages/batches", wire.ObjectBatch, "id"},     // Anthropic Message Batches
	{"/v1/containers", wire.ObjectContainer, "id"},       // OpenAI Containers (code interpreter)
	{"/v1beta/cachedContents", wire.ObjectCache, "name"}, // answered with the cache: {"name": "cachedContents/..."}
	{"/v1beta/files", wire.ObjectFile, "file.name"},      // answered {"file": {"name": "files/..."}}
	{"/upload/v1beta/files", wire.ObjectFile, "file.name"},
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
func objectTargets(st *requestState, d wire.Dialect) []*provider {
	h := st.h
	o, ok := objectOfPath(st.r.URL.Path)
	if !ok || h.owners == nil {
		return h.auxCandidates(d)
	}
	p, disc := h.discoverObject(st.r, o)
	if p != nil {
		return holderTargets(st, o, p, d)
	}
	st.discover = disc // ended by finish when no provider is asked
	cands := discoveryCandidates(h.auxCandidates(d))
	if len(cands) > 0 && disc != nil {
		st.skips = append(st.skips, ChainEntry{OffsetMs: msSince(st.start), Event: "discover"})
	}
	return cands
}

// discoveryCandidates are the candidates a discovery may ask without
// carrying the client's own key to another vendor (SPEC 15): every
// provider with a key of its own, and the pass-through ones of the vendor
// of the first (`vendor`, by default the base URL's host: set one vendor
// on mirrors of one API to let a discovery ask them all).
func discoveryCandidates(cands []*provider) []*provider {
	vendor := ""
	out := cands[:0:0]
	for _, p := range cands {
		if p.passThroughKey() {
			if vendor == "" {
				vendor = p.vendor
			} else if p.vendor != vendor {
				continue
			}
		}
		out = append(out, p)
	}
	return out
}

// noteCreated remembers the holder of an object a forwarded create made:
// the answer (2xx, at most maxCreatedBody) is read for its id, then
// relayed as it came.
func noteCreated(st *requestState, a *attempt) {
	h := st.h
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
	h.rememberObject(st.r, c.createdID(body), a.p)
}

// createdID reads the id of the object a create answer describes, in
// the answer's own shape.
func (c objectCollection) createdID(body []byte) wire.ObjectRef {
	v, _ := jsonscan.Lookup(body, strings.Split(c.name, ".")...)
	id := wire.ObjectIDValue(v)
	if c.name != "id" {
		id = wire.ResourceName(v, c.path[strings.LastIndexByte(c.path, '/')+1:]+"/")
	}
	return wire.ObjectRef{Kind: c.kind, ID: id}
}

// Discovery of a Responses id this instance does not know: a response
// created through another instance, or through this one before a restart
// (the owner table survives reloads, not restarts). The request goes to
// the candidates that could hold the response, one at a time in plan
// order; an answer that says the response does not exist there moves on
// without charging the provider's health, the retry budget or the
// request's attempt limit, and is no failover. The first provider that
// accepts holds it and is remembered; when none does, the client gets the
// last provider's not-found answer as is. A known id costs nothing here:
// the owner table's lookup, done anyway, pins it.

// launchDiscoverReason is the reason of an attempt that asks the next
// candidate after a not-found answer.
const launchDiscoverReason = "discover"

// maxDiscoveries bounds the discoveries in flight per instance that other
// requests may wait for; past it a request discovers on its own.
const maxDiscoveries = 1024

// discoveryWaitHook, when set (by a test only), is called as a request
// starts waiting for another's discovery.
var discoveryWaitHook func()

// discoveryKey names a discovery: the client of the table and the id.
type discoveryKey struct {
	client uint64
	id     string
}

// discoveries are the discoveries in flight, each closed when it ends so
// that the requests waiting for it read the owner table again.
type discoveries struct {
	mu      sync.Mutex
	running map[discoveryKey]chan struct{}
}

// join returns the channel of the discovery of k in flight (lead false),
// or starts one (lead true; done is nil when the bound is reached).
func (ds *discoveries) join(k discoveryKey) (done chan struct{}, lead bool) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if done := ds.running[k]; done != nil {
		return done, false
	}
	if ds.running == nil {
		ds.running = map[discoveryKey]chan struct{}{}
	}
	if len(ds.running) >= maxDiscoveries {
		return nil, true
	}
	done = make(chan struct{})
	ds.running[k] = done
	return done, true
}

func (ds *discoveries) leave(k discoveryKey, done chan struct{}) {
	if done == nil {
		return
	}
	ds.mu.Lock()
	if ds.running[k] == done {
		delete(ds.running, k)
	}
	ds.mu.Unlock()
	close(done)
}

// discovery is a request's discovery of one id.
type discovery struct {
	key    discoveryKey
	done   chan struct{} // nil: not led (bound reached) or already ended
	misses int           // not-found answers: they do not count as attempts
	ended  bool
	ref    wire.ObjectRef // what is looked for (objects.go); zero: the response key.id
	// holder is the remembered holder (holder.go): its own answers are
	// final, and the others are asked only once it failed.
	holder *provider
}

// discoverOwner is called for a Responses id the owner table does not
// know (or knows as a provider no longer configured). It waits for a
// discovery of the same id already in flight and then reads the table
// again; otherwise this request leads the discovery. It returns the
// owner when it became known, else the request's discovery.
func (h *Engine) discoverOwner(r *http.Request, id string) (*provider, *discovery) {
	k := discoveryKey{client: h.responseClient(r), id: id}
	for {
		if p := h.ownerOf(r, id); p != nil {
			return p, nil
		}
		done, lead := h.owners.flights.join(k)
		if lead {
			return nil, &discovery{key: k, done: done}
		}
		if discoveryWaitHook != nil {
			discoveryWaitHook()
		}
		select {
		case <-done:
		case <-r.Context().Done():
			return nil, &discovery{key: k} // the client left: nothing to wait for
		}
	}
}

// missing reports whether an answer says the response is not at that
// provider: OpenAI's previous_response_not_found (400 or 404), or for a
// call by id a 404 invalid_request_error that names the id.
func (d *discovery) missing(status int, body []byte) bool {
	if d.ref.Kind != wire.ObjectResponse {
		return objectMissing(d.ref, status, body)
	}
	if status != http.StatusNotFound && status != http.StatusBadRequest {
		return false
	}
	code, _ := jsonscan.Lookup(body, "error", "code")
	if string(code) == `"previous_response_not_found"` {
		return true
	}
	if status != http.StatusNotFound {
		return false
	}
	typ, _ := jsonscan.Lookup(body, "error", "type")
	msg, _ := jsonscan.Lookup(body, "error", "message")
	return string(typ) == `"invalid_request_error"` && bytes.Contains(msg, []byte(d.key.id))
}

// end closes a discovery once: found names the holder (remembered), nil
// when none held it (notFound) or the request ended otherwise.
func endDiscovery(st *requestState, found *provider, notFound bool) {
	h := st.h
	d := st.discover
	if d == nil || d.ended {
		return
	}
	d.ended = true
	switch {
	case found != nil && found == d.holder:
		// the remembered holder answered: nothing was discovered
	case found != nil:
		h.owners.remember(d.key.client, d.key.id, ownerKey(found), clock())
		if st.pinned != nil {
			st.pinned = found // a continuation goes to the holder found, not to the one that failed
		}
		st.skips = append(st.skips, ChainEntry{Provider: found.name, OffsetMs: msSince(st.start), Event: "discover_found"})
		h.obs.Discovered("found")
	case notFound && st.objectUnsure():
		// a candidate that could hold it failed: the client is told to retry
		st.skips = append(st.skips, ChainEntry{OffsetMs: msSince(st.start), Event: "discover_unavailable"})
		h.obs.Discovered("unavailable")
	case notFound:
		st.skips = append(st.skips, ChainEntry{OffsetMs: msSince(st.start), Event: "discover_not_found"})
		h.obs.Discovered("not_found")
	}
	h.owners.flights.leave(d.key, d.done)
	d.done = nil
}

// discoverMiss turns a failed attempt of a discovery whose answer says
// the response is not there into a miss (classObjectMissing): no health
// charge, not counted against the attempt limit.
func (st *requestState) discoverMiss(a *attempt) {
	if st.discover == nil || st.discover.ended || a.p == st.discover.holder || a.errBody == nil || !st.discover.missing(a.status, a.errBody) {
		return
	}
	a.class = wire.ClassObjectMissing
	st.discover.misses++
}
