package engine

import (
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/llmhedge/caddy-llm-hedge/internal/affinity"
	"github.com/llmhedge/caddy-llm-hedge/internal/dialect/responses"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// Bounds of the table of response owners: OpenAI keeps a stored response
// for 30 days, but a conversation continued by previous_response_id after a
// week is rare, and 100,000 ids cost about 5 MB (ids are kept as hashes).
// One client (a site and a client credential, responseClient) holds at
// most a tenth of them, so that its flood of stored responses only evicts
// its own ids.
const (
	responseOwnersTTL = 7 * 24 * time.Hour
)

// responseOwnersCapacity is the whole table's bound (a variable for the
// tests, which shrink it: SetResponseOwnersCapacity).
var responseOwnersCapacity = 100_000

// ResponseOwnersCapacity is the bound of the shared table of response
// owners the Caddy layer creates.
func ResponseOwnersCapacity() int { return responseOwnersCapacity }

// ResponseOwners remembers which provider created each Responses API
// response the proxy served, so that previous_response_id and the calls on
// /v1/responses/{id} reach the provider that holds that response (no other
// provider can serve them). It lives in the package's usage pool beside
// provider health, so a config reload keeps it; it is per instance, like
// health: a response created through another Caddy instance is unknown here.
//
// The ids are kept per client, each client's in its own LRU of at most
// perClient ids. When the whole table is full, the client holding the
// most ids loses its oldest: a client can push out another's ids only
// while it holds fewer than that one.
type ResponseOwners struct {
	mu                  sync.Mutex
	capacity, perClient int
	clients             map[uint64]*affinity.Table
	total               int         // ids held, expired ones not yet swept included
	flights             discoveries // of ids not in the table (objects.go)
}

// NewResponseOwners is the table of response (and object) owners of
// at most capacity ids; the Caddy layer keeps it across reloads.
func NewResponseOwners(capacity int) *ResponseOwners {
	return &ResponseOwners{capacity: capacity, perClient: max(1, capacity/10), clients: map[uint64]*affinity.Table{}}
}

// responseClient names the client of a request for the table: the site
// (its Host) and the client's credential as it sent it (an API key
// header), or its address when it sends none. Only a hash is kept.
func (h *Engine) responseClient(r *http.Request) uint64 {
	who := ""
	for _, name := range [...]string{"Authorization", "X-Api-Key", "Api-Key", "X-Goog-Api-Key"} {
		if who = r.Header.Get(name); who != "" {
			break
		}
	}
	if who == "" {
		if h.env.ClientIP != nil {
			who = h.env.ClientIP(r)
		}
	}
	if who == "" {
		who, _, _ = net.SplitHostPort(r.RemoteAddr)
	}
	return xxhash.Sum64String(strings.ToLower(r.Host) + "\x00" + who)
}

// remember records that provider created the response id for client (ids
// are at most 256 printable bytes: they are checked where they are read).
func (ro *ResponseOwners) remember(client uint64, id, provider string, now time.Time) {
	if ro == nil || id == "" {
		return
	}
	ro.mu.Lock()
	defer ro.mu.Unlock()
	t := ro.clients[client]
	if t == nil {
		t = affinity.NewTable(ro.perClient, responseOwnersTTL)
		ro.clients[client] = t
	}
	n := t.Size()
	t.Put(id, provider, now)
	ro.total += t.Size() - n
	if ro.total > ro.capacity {
		ro.evictFromLargest(client)
	}
}

// evictFromLargest drops the oldest id of the client holding the most;
// on a tie, the client storing now (when it holds more than this one id).
func (ro *ResponseOwners) evictFromLargest(storing uint64) {
	var largest uint64
	most := 0
	for c, t := range ro.clients {
		n := t.Size()
		if n > most || (n == most && c == storing && n > 1) {
			largest, most = c, n
		}
	}
	if most == 0 {
		return
	}
	t := ro.clients[largest]
	t.EvictOldest()
	ro.total--
	if t.Size() == 0 {
		delete(ro.clients, largest)
	}
}

// owner returns the provider that created the response id for client, if
// known.
func (ro *ResponseOwners) owner(client uint64, id string, now time.Time) (string, bool) {
	if ro == nil || id == "" {
		return "", false
	}
	ro.mu.Lock()
	defer ro.mu.Unlock()
	t := ro.clients[client]
	if t == nil {
		return "", false
	}
	n := t.Size()
	p, ok := t.Get(id, now)
	if m := t.Size(); m != n {
		ro.total -= n - m
		if m == 0 {
			delete(ro.clients, client)
		}
	}
	return p, ok
}

// Responses API state: a response lives at the provider that
// created it. The proxy remembers the creator of every response it served
// (responses_owner.go) and sends what names that response there: a
// completion continuing it by previous_response_id, and the calls on
// /v1/responses/{id}. An id it does not know may have been created through
// another instance (the table is per instance) or directly: a completion
// routes as usual (a provider without it answers its own 404 or 400), a
// call by id is 404 without an upstream call.

// ownerKey is how the table names a provider: its name and base URL, as
// its health is keyed, so two configs' same-named providers never mix.
func ownerKey(p *provider) string { return p.name + "|" + p.baseURL.String() }

// ownerOf returns the configured provider that created the response id
// for the client of r.
func (h *Engine) ownerOf(r *http.Request, id string) *provider {
	key, ok := h.owners.owner(h.responseClient(r), id, clock())
	if !ok {
		return nil
	}
	for _, p := range h.providers {
		if ownerKey(p) == key {
			return p
		}
	}
	return nil
}

// pinResponse pins a Responses completion that continues a response the
// proxy knows (previous_response_id) to that response's creator: the plan
// holds it alone, hedging and the fallback models are off; same-provider
// retries stay.
func pinResponse(st *requestState, body []byte) {
	h := st.h
	if h.owners == nil {
		return
	}
	if st.dialect != dialectResponses {
		pinObject(st, body) // objects.go: a file, a container, a cache
		return
	}
	if id := responses.PreviousResponseID(body, &st.req.Top); id != "" {
		st.pinRef = wire.ObjectRef{Kind: wire.ObjectResponse, ID: id}
		if st.pinned = h.ownerOf(st.r, id); st.pinned == nil {
			st.pinned, st.discover = h.discoverOwner(st.r, id)
			if st.discover != nil {
				st.skips = append(st.skips, ChainEntry{OffsetMs: msSince(st.start), Event: "discover"})
			}
		}
		return
	}
	pinObject(st, body) // a conversation, a file
}

// pinPlan narrows the candidates of a pinned request to its owner. An
// owner that is no candidate (it does not serve the model, or its `api`
// does not take Responses clients) leaves the plan as it was: no other
// provider can serve the request any better, so it is routed as usual and
// the provider's own error answers.
func (st *requestState) pinPlan(cands []*provider) []*provider {
	if st.pinned == nil {
		if st.discover != nil {
			return discoveryCandidates(cands)
		}
		return cands
	}
	for _, p := range cands {
		if p == st.pinned {
			st.skips = append(st.skips, ChainEntry{Provider: p.name, OffsetMs: msSince(st.start), Event: "pinned_previous_response"})
			return []*provider{p}
		}
	}
	st.pinned = nil
	return cands
}

// rememberResponse records the winner of a Responses completion as the
// creator of its response: the id of the response.created event the gate
// buffered, or the id of the complete body. A response the provider does
// not keep (`"store": false`, as Codex sends; a compaction) cannot be read
// or continued by id: it would only push useful ids out of the table.
func (st *requestState) rememberResponse(a *attempt) {
	h := st.h
	if st.dialect != dialectResponses || h.owners == nil || !responses.ResponseStored(st.req.Body, &st.req.Top) ||
		strings.HasSuffix(strings.TrimSuffix(st.r.URL.Path, "/"), "/compact") {
		return
	}
	var id string
	switch {
	case a.body != nil:
		id = responses.BodyID(a.body)
	case a.gate != nil:
		var rd sse.Reader
		rd.ResetBytes(a.gate.Buffered()) // parsed in place: no copy, no buffer
		for id == "" {
			ev, err := rd.Next()
			if err != nil {
				break
			}
			id = responses.CreatedID(ev)
		}
	}
	h.owners.remember(h.responseClient(st.r), id, ownerKey(a.p), clock())
}

// responseIDOfPath returns the response id of a call by id
// (/v1/responses/{id}, .../cancel, .../input_items), or "".
func responseIDOfPath(method, p string) string {
	rest, ok := strings.CutPrefix(strings.TrimSuffix(p, "/"), "/v1/responses/")
	if !ok {
		return ""
	}
	id, sub, _ := strings.Cut(rest, "/")
	switch {
	case method == http.MethodPost && sub == "cancel",
		method == http.MethodGet && sub == "input_items",
		(method == http.MethodGet || method == http.MethodDelete) && sub == "" && id != "input_tokens":
		return id
	}
	return ""
}

// forwardTargets are the providers a forwarded call may go to: a call on
// a response by id goes to its creator alone; one whose creator is not
// known is discovered among the providers serving Responses clients
// (objects.go); one that no provider serves is 404 in OpenAI's shape
// (false: answered). Any other call goes to the providers of its dialect.
func forwardTargets(w http.ResponseWriter, st *requestState, d wire.Dialect) ([]*provider, bool) {
	h := st.h
	r := st.r
	id := responseIDOfPath(r.Method, r.URL.Path)
	if id == "" {
		return objectTargets(st, d), true // objects.go
	}
	st.dialect = dialectResponses
	if h.owners != nil {
		p, disc := h.discoverOwner(r, id)
		if p != nil {
			return holderTargets(st, wire.ObjectRef{Kind: wire.ObjectResponse, ID: id}, p, dialectResponses), true
		}
		if cands := discoveryCandidates(h.auxCandidates(dialectResponses)); len(cands) > 0 {
			st.discover = disc
			st.skips = append(st.skips, ChainEntry{OffsetMs: msSince(st.start), Event: "discover"})
			return cands, true
		}
		st.discover = disc // ended by finish
	}
	st.refuse(w, http.StatusNotFound, "No response found with id '"+clipID(id)+"': no provider here serves the Responses API.")
	return nil, false
}

// missingStatus: the statuses a not-found answer comes with (404; a 400
// or 403 naming the object, as Gemini answers another project's file or
// cache: objectMissing).
func missingStatus(status int) bool {
	return status == http.StatusNotFound || status == http.StatusBadRequest || status == http.StatusForbidden
}

// forwardMissed reads the answer of a discovery's candidate to a call by
// id: true when it says the response is not there and another candidate
// is left (the answer is dropped: the next one is asked), false otherwise
// (the answer is relayed; the last candidate's not-found ends the
// discovery as not_found).
func forwardMissed(st *requestState, a *attempt, last bool) bool {
	h := st.h
	d := st.discover
	if d == nil || d.ended || a.p == d.holder || !missingStatus(a.resp.StatusCode) {
		return false
	}
	h.readUpstreamError(a, st.dialect, st.r.Context())
	a.status = a.resp.StatusCode
	if !d.missing(a.status, a.errBody) {
		return false
	}
	a.class = wire.ClassObjectMissing
	if last {
		endDiscovery(st, nil, true)
		return false
	}
	a.end()
	a.outcome = "discover_miss"
	d.misses++
	h.obs.Attempt(a.p.name, "failed_"+string(a.class))
	return true
}

// clipID bounds an id echoed in an error message; it is the client's own
// path segment, already checked by checkEscapedPath.
func clipID(id string) string {
	if len(id) > responses.MaxResponseIDLen {
		return id[:responses.MaxResponseIDLen] + "..."
	}
	return id
}
