package llmhedge

// An instance's life in a fleet: the readiness a load balancer polls, and
// the requests still running when the process exits.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/llmhedge/caddy-llm-hedge/internal/affinity"
	"github.com/llmhedge/caddy-llm-hedge/internal/engine"
	"github.com/llmhedge/caddy-llm-hedge/internal/health"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

func init() {
	caddy.RegisterModule(ReadinessHandler{})
	httpcaddyfile.RegisterHandlerDirective("llm_hedge_health", parseReadinessCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("llm_hedge_health", httpcaddyfile.Before, "reverse_proxy")
}

// ReadinessHandler answers a load balancer's health check of this
// instance (docs/fleet.md): 200 while it takes new requests, 503 from the
// moment its shutdown is scheduled (Caddy's `shutdown_delay`), so that the
// balancer moves it out of rotation before its listener closes:
//
//	handle /llm_hedge/health {
//		llm_hedge_health
//	}
//
// It says nothing of the providers: an outage of every provider is the
// fleet's, and the instance still answers it in each client's dialect,
// which a balancer with no instance left could not.
type ReadinessHandler struct{}

// CaddyModule returns the Caddy module information.
func (ReadinessHandler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.llm_hedge_health",
		New: func() caddy.Module { return new(ReadinessHandler) },
	}
}

// ServeHTTP answers the check; it never calls next.
func (ReadinessHandler) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	repl, _ := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if repl != nil {
		if down, _ := repl.Get("http.shutting_down"); down == true {
			left, _ := repl.Get("http.time_until_shutdown")
			ms := int64(0)
			if d, ok := left.(time.Duration); ok {
				ms = max(0, d.Milliseconds())
			}
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"status":"shutting_down","shutdown_in_ms":` + strconv.FormatInt(ms, 10) + "}\n"))
			return nil
		}
	}
	_, _ = w.Write([]byte(`{"status":"ready"}` + "\n"))
	return nil
}

// parseReadinessCaddyfile reads `llm_hedge_health` (no arguments).
func parseReadinessCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	rh := new(ReadinessHandler)
	return rh, rh.UnmarshalCaddyfile(h.Dispenser)
}

// UnmarshalCaddyfile takes no arguments and no block.
func (*ReadinessHandler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	if d.NextBlock(0) {
		return d.Errf("llm_hedge_health takes no options")
	}
	return nil
}

// Interface guards
var (
	_ caddyhttp.MiddlewareHandler = (*ReadinessHandler)(nil)
	_ caddyfile.Unmarshaler       = (*ReadinessHandler)(nil)
)

// processExit ends the requests still running when the process exits.
// Caddy cleans the modules up only after its servers' Shutdown returned:
// when the process is exiting, a request still in flight then has
// outlived grace_period, and the process is about to end its connection.
// Cancelled with wire.ErrShutdown, a committed stream ends with the
// dialect's error event and a request not yet committed gets a 503,
// instead of a connection cut that a client cannot tell from a network
// fault. A reload never fires it: its old requests keep running.
var processExit = struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup // the requests in flight, of every config
	once   sync.Once      // every handler's Cleanup calls endRequestsOnExit
}{}

func init() {
	processExit.ctx, processExit.cancel = context.WithCancelCause(context.Background())
}

// exitWait bounds how long Cleanup waits for the cancelled requests to
// write their ends before the process exits. exitFlush is the wait after
// the last handler returned: net/http writes the end of a response (the
// last chunk, the buffered body) after its handler returns, and nothing
// signals when it has.
const (
	exitWait  = 2 * time.Second
	exitFlush = 100 * time.Millisecond
)

// trackRequest counts a request in flight until the returned func runs.
func trackRequest() func() {
	processExit.wg.Add(1)
	return processExit.wg.Done
}

// endRequestsOnExit cancels every request in flight when the process is
// exiting and waits, up to exitWait, for them to finish writing: once,
// however many handlers the config has.
func endRequestsOnExit() {
	if !caddy.Exiting() {
		return
	}
	processExit.once.Do(func() {
		processExit.cancel(wire.ErrShutdown)
		done := make(chan struct{})
		go func() {
			processExit.wg.Wait()
			close(done)
		}()
		select {
		case <-done:
			time.Sleep(exitFlush)
		case <-time.After(exitWait):
		}
	})
}

// onExit runs f when the process exits past its grace period (f cancels
// a request with wire.ErrShutdown); stop releases it.
func onExit(f func()) (stop func() bool) {
	return context.AfterFunc(processExit.ctx, f)
}

// shutdownCut reports whether ctx ended because the process exits.
func shutdownCut(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), wire.ErrShutdown)
}

// What outlives a config: a reload provisions the new handlers before it
// cleans up the old ones, so the tables below, held in Caddy's usage pool
// and counted by reference, carry what the old config learned (health,
// sessions' winners, response owners) into the new one.

// providerPool holds the health of every provider, keyed by healthKey. It is
// package-level so that a config reload, which provisions new handlers before
// cleaning up the old ones, finds the same entries and keeps what was learned.
var providerPool = caddy.NewUsagePool()

// healthKey identifies a provider across handlers: two llm_hedge handlers
// naming the same upstream share its health.
func healthKey(name, baseURL string) string {
	return name + "|" + baseURL
}

// loadHealth returns the shared health of a provider, creating it on first
// use, and records vendor (the latest Provision wins). Every call must be
// paired with releaseHealth in Cleanup.
func loadHealth(name, baseURL, vendor string) (*health.Provider, error) {
	val, _, err := providerPool.LoadOrNew(healthKey(name, baseURL), func() (caddy.Destructor, error) {
		return &health.Provider{Name: name, BaseURL: baseURL, Latency: health.NewLatencyTracker()}, nil
	})
	if err != nil {
		return nil, fmt.Errorf("provider %s: loading health: %w", name, err)
	}
	ph, ok := val.(*health.Provider)
	if !ok {
		return nil, fmt.Errorf("provider %s: loading health: unexpected %T in pool", name, val)
	}
	ph.Vendor.Store(&vendor)
	return ph, nil
}

// releaseHealth drops one reference taken by loadHealth. The state is
// forgotten only when no handler of the running config names the provider.
func releaseHealth(name, baseURL string) {
	// Destruct never fails, and Delete on a missing key is a no-op.
	_, _ = providerPool.Delete(healthKey(name, baseURL))
}

// sharedAffinity is a remembered-winner table in providerPool, one per
// ttl, so that a reload keeping the ttl keeps what failovers taught, as it
// keeps the health: a conversation stays where its prompt cache is.
type sharedAffinity struct{ *affinity.Table }

// Destruct implements caddy.Destructor; the table holds no goroutine.
func (sharedAffinity) Destruct() error { return nil }

func affinityPoolKey(ttl time.Duration) string {
	if ttl <= 0 {
		ttl = affinity.DefaultTTL
	}
	return "affinity|" + ttl.String()
}

// loadAffinity returns the shared table of ttl, creating it on first use.
// Each caller holds one reference, released by releaseAffinity. The
// constructor never fails, and the key is this table's alone.
func loadAffinity(ttl time.Duration) *affinity.Table {
	val, _, _ := providerPool.LoadOrNew(affinityPoolKey(ttl), func() (caddy.Destructor, error) {
		return sharedAffinity{affinity.NewTable(defaultAffinityCapacity, ttl)}, nil
	})
	return val.(sharedAffinity).Table
}

// releaseAffinity drops the reference loadAffinity gave for table (nil:
// affinity off, nothing to drop).
func releaseAffinity(table *affinity.Table, ttl time.Duration) {
	if table != nil {
		_, _ = providerPool.Delete(affinityPoolKey(ttl))
	}
}

// responseOwnersPoolKey keys the one table of response owners.
const responseOwnersPoolKey = "llm_hedge/response_owners"

// sharedOwners is the table of response owners in providerPool.
type sharedOwners struct{ *engine.ResponseOwners }

// Destruct implements caddy.Destructor; the table holds no goroutine.
func (sharedOwners) Destruct() error { return nil }

// loadResponseOwners returns the shared table, creating it on first use.
// Each caller holds one reference, released by releaseResponseOwners.
func loadResponseOwners() (*engine.ResponseOwners, error) {
	val, _, err := providerPool.LoadOrNew(responseOwnersPoolKey, func() (caddy.Destructor, error) {
		return sharedOwners{engine.NewResponseOwners(engine.ResponseOwnersCapacity())}, nil
	})
	if err != nil {
		return nil, fmt.Errorf("loading the response owners: %w", err)
	}
	ro, ok := val.(sharedOwners)
	if !ok {
		return nil, fmt.Errorf("loading the response owners: unexpected %T in pool", val)
	}
	return ro.ResponseOwners, nil
}

func releaseResponseOwners() { _, _ = providerPool.Delete(responseOwnersPoolKey) }
