package llmhedge

import (
	"bytes"
	"net/http"
	"sync"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

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
}

// discoverOwner is called for a Responses id the owner table does not
// know (or knows as a provider no longer configured). It waits for a
// discovery of the same id already in flight and then reads the table
// again; otherwise this request leads the discovery. It returns the
// owner when it became known, else the request's discovery.
func (h *Handler) discoverOwner(r *http.Request, id string) (*provider, *discovery) {
	k := discoveryKey{client: responseClient(r), id: id}
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
func (h *Handler) endDiscovery(st *requestState, found *provider, notFound bool) {
	d := st.discover
	if d == nil || d.ended {
		return
	}
	d.ended = true
	switch {
	case found != nil:
		h.owners.remember(d.key.client, d.key.id, ownerKey(found), clock())
		st.skips = append(st.skips, chainEntry{Provider: found.name, OffsetMs: msSince(st.start), Event: "discover_found"})
		h.metrics.discovered("found")
	case notFound:
		st.skips = append(st.skips, chainEntry{OffsetMs: msSince(st.start), Event: "discover_not_found"})
		h.metrics.discovered("not_found")
	}
	h.owners.flights.leave(d.key, d.done)
	d.done = nil
}

// discoverMiss turns a failed attempt of a discovery whose answer says
// the response is not there into a miss (classObjectMissing): no health
// charge, not counted against the attempt limit.
func (st *requestState) discoverMiss(a *attempt) {
	if st.discover == nil || st.discover.ended || a.errBody == nil || !st.discover.missing(a.status, a.errBody) {
		return
	}
	a.class = wire.ClassObjectMissing
	st.discover.misses++
}
