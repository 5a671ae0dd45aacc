package llmhedge

import (
	"fmt"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// Bounds of the table of response owners: OpenAI keeps a stored response
// for 30 days, but a conversation continued by previous_response_id after a
// week is rare, and 100,000 ids cost about 5 MB (ids are kept as hashes).
const (
	responseOwnersCapacity = 100_000
	responseOwnersTTL      = 7 * 24 * time.Hour
	responseOwnersPoolKey  = "llm_hedge/response_owners"
)

// responseOwners remembers which provider created each Responses API
// response the proxy served, so that previous_response_id and the calls on
// /v1/responses/{id} reach the provider that holds that response (no other
// provider can serve them). It lives in the package's usage pool beside
// provider health, so a config reload keeps it; it is per instance, like
// health: a response created through another Caddy instance is unknown here.
type responseOwners struct {
	*affinityTable
}

// Destruct implements caddy.Destructor; the table holds no goroutine.
func (*responseOwners) Destruct() error { return nil }

// loadResponseOwners returns the shared table, creating it on first use.
// Each caller holds one reference, released by releaseResponseOwners.
func loadResponseOwners() (*responseOwners, error) {
	val, _, err := providerPool.LoadOrNew(responseOwnersPoolKey, func() (caddy.Destructor, error) {
		return &responseOwners{newAffinityTable(responseOwnersCapacity, responseOwnersTTL)}, nil
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

// remember records that provider created the response id (at most 256
// printable bytes: ids are checked where they are read).
func (ro *responseOwners) remember(id, provider string, now time.Time) {
	if ro == nil || id == "" {
		return
	}
	ro.put(id, provider, now)
}

// owner returns the provider that created the response id, if known.
func (ro *responseOwners) owner(id string, now time.Time) (string, bool) {
	if ro == nil || id == "" {
		return "", false
	}
	return ro.get(id, now)
}
