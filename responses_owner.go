package llmhedge

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/llmhedge/caddy-llm-hedge/internal/affinity"
)

// Bounds of the table of response owners: OpenAI keeps a stored response
// for 30 days, but a conversation continued by previous_response_id after a
// week is rare, and 100,000 ids cost about 5 MB (ids are kept as hashes).
// One client (a site and a client credential, responseClient) holds at
// most a tenth of them, so that its flood of stored responses only evicts
// its own ids.
const (
	responseOwnersTTL     = 7 * 24 * time.Hour
	responseOwnersPoolKey = "llm_hedge/response_owners"
)

// responseOwnersCapacity is the whole table's bound (a variable for the
// tests, which shrink it).
var responseOwnersCapacity = 100_000

// responseOwners remembers which provider created each Responses API
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
type responseOwners struct {
	mu                  sync.Mutex
	capacity, perClient int
	clients             map[uint64]*affinity.Table
	total               int         // ids held, expired ones not yet swept included
	flights             discoveries // of ids not in the table (discover.go)
}

// Destruct implements caddy.Destructor; the table holds no goroutine.
func (*responseOwners) Destruct() error { return nil }

func newResponseOwners(capacity int) *responseOwners {
	return &responseOwners{capacity: capacity, perClient: max(1, capacity/10), clients: map[uint64]*affinity.Table{}}
}

// loadResponseOwners returns the shared table, creating it on first use.
// Each caller holds one reference, released by releaseResponseOwners.
func loadResponseOwners() (*responseOwners, error) {
	val, _, err := providerPool.LoadOrNew(responseOwnersPoolKey, func() (caddy.Destructor, error) {
		return newResponseOwners(responseOwnersCapacity), nil
	})
	if err != nil {
		return nil, fmt.Errorf("loading the response owners: %w", err)
	}
	ro, ok := val.(*responseOwners)
	if !ok {
		return nil, fmt.Errorf("loading the response owners: unexpected %T in pool", val)
	}
	return ro, nil
}

func releaseResponseOwners() { _, _ = providerPool.Delete(responseOwnersPoolKey) }

// responseClient names the client of a request for the table: the site
// (its Host) and the client's credential as it sent it (an API key
// header), or its address when it sends none. Only a hash is kept.
func responseClient(r *http.Request) uint64 {
	who := ""
	for _, name := range [...]string{"Authorization", "X-Api-Key", "Api-Key", "X-Goog-Api-Key"} {
		if who = r.Header.Get(name); who != "" {
			break
		}
	}
	if who == "" {
		who, _ = caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string)
	}
	if who == "" {
		who, _, _ = net.SplitHostPort(r.RemoteAddr)
	}
	return xxhash.Sum64String(strings.ToLower(r.Host) + "\x00" + who)
}

// remember records that provider created the response id for client (ids
// are at most 256 printable bytes: they are checked where they are read).
func (ro *responseOwners) remember(client uint64, id, provider string, now time.Time) {
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
func (ro *responseOwners) evictFromLargest(storing uint64) {
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
func (ro *responseOwners) owner(client uint64, id string, now time.Time) (string, bool) {
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
