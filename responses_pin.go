package llmhedge

import (
	"bytes"
	"net/http"
	"strings"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
)

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
func ownerKey(p *provider) string { return healthKey(p.name, p.baseURL.String()) }

// ownerOf returns the configured provider that created the response id
// for the client of r.
func (h *Handler) ownerOf(r *http.Request, id string) *provider {
	key, ok := h.owners.owner(responseClient(r), id, clock())
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
func (h *Handler) pinResponse(st *requestState, body []byte) {
	if h.owners == nil {
		return
	}
	if st.dialect != dialectResponses {
		h.pinObject(st, body) // objects.go: a file, a container, a cache
		return
	}
	if id := previousResponseID(body); id != "" {
		if st.pinned = h.ownerOf(st.r, id); st.pinned == nil {
			st.pinned, st.discover = h.discoverOwner(st.r, id)
			if st.discover != nil {
				st.skips = append(st.skips, chainEntry{OffsetMs: msSince(st.start), Event: "discover"})
			}
		}
		return
	}
	h.pinObject(st, body) // a conversation, a file
}

// pinPlan narrows the candidates of a pinned request to its owner. An
// owner that is no candidate (it does not serve the model, or its `api`
// does not take Responses clients) leaves the plan as it was: no other
// provider can serve the request any better, so it is routed as usual and
// the provider's own error answers.
func (st *requestState) pinPlan(cands []*provider) []*provider {
	if st.pinned == nil {
		return cands
	}
	for _, p := range cands {
		if p == st.pinned {
			st.skips = append(st.skips, chainEntry{Provider: p.name, OffsetMs: msSince(st.start), Event: "pinned_previous_response"})
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
	if st.dialect != dialectResponses || h.owners == nil || !responseStored(st.req.body) ||
		strings.HasSuffix(strings.TrimSuffix(st.r.URL.Path, "/"), "/compact") {
		return
	}
	var id string
	switch {
	case a.body != nil:
		id = responsesBodyID(a.body)
	case a.gate != nil:
		rd := sse.NewReader(bytes.NewReader(a.gate.buffered()), len(a.gate.buffered())+1)
		for id == "" {
			ev, err := rd.Next()
			if err != nil {
				break
			}
			id = responsesCreatedID(ev)
		}
	}
	h.owners.remember(responseClient(st.r), id, ownerKey(a.p), clock())
}

// responseStored reports whether a request asks the provider to keep its
// response: unless its top-level store is false (the last of duplicate
// keys counts, as for the provider).
func responseStored(body []byte) bool {
	stored := true
	_ = jsonscan.ScanTopLevel(body, func(key []byte, s, e int) bool {
		if jsonscan.KeyIs(key, "store") {
			stored = string(body[s:e]) != "false"
		}
		return true
	})
	return stored
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
// (discover.go); one that no provider serves is 404 in OpenAI's shape
// (false: answered). Any other call goes to the providers of its dialect.
func (h *Handler) forwardTargets(w http.ResponseWriter, st *requestState, d dialect) ([]*provider, bool) {
	r := st.r
	id := responseIDOfPath(r.Method, r.URL.Path)
	if id == "" {
		return h.objectTargets(st, d), true // objects_paths.go
	}
	st.dialect = dialectResponses
	if h.owners != nil {
		p, disc := h.discoverOwner(r, id)
		if p != nil {
			return []*provider{p}, true
		}
		if cands := h.auxCandidates(dialectResponses); len(cands) > 0 {
			st.discover = disc
			st.skips = append(st.skips, chainEntry{OffsetMs: msSince(st.start), Event: "discover"})
			return cands, true
		}
		st.discover = disc // ended by finish
	}
	st.refuse(w, http.StatusNotFound, "No response found with id '"+clipID(id)+"': no provider here serves the Responses API.")
	return nil, false
}

// forwardMissed reads the answer of a discovery's candidate to a call by
// id: true when it says the response is not there and another candidate
// is left (the answer is dropped: the next one is asked), false otherwise
// (the answer is relayed; the last candidate's not-found ends the
// discovery as not_found).
func (h *Handler) forwardMissed(st *requestState, a *attempt, last bool) bool {
	d := st.discover
	if d == nil || d.ended || a.resp.StatusCode != http.StatusNotFound {
		return false
	}
	h.readUpstreamError(a, st.dialect, st.r.Context())
	a.status = a.resp.StatusCode
	if !d.missing(a.status, a.errBody) {
		return false
	}
	a.class = classObjectMissing
	if last {
		h.endDiscovery(st, nil, true)
		return false
	}
	a.end()
	a.outcome = "discover_miss"
	d.misses++
	h.metrics.attempt(a.p.name, "failed_"+string(a.class))
	return true
}

// clipID bounds an id echoed in an error message; it is the client's own
// path segment, already checked by checkEscapedPath.
func clipID(id string) string {
	if len(id) > maxResponseIDLen {
		return id[:maxResponseIDLen] + "..."
	}
	return id
}
