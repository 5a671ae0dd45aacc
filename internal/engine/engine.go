// Package engine is the request engine of llm_hedge as a library: it takes
// a request, the providers and the policy, runs the attempts (first,
// hedge, failover, retry, continuation), commits one, relays it, and
// tells an Observer what happened. It imports no Caddy, zap or Prometheus:
// the Caddy layer (the module's root package) reads the configuration,
// owns what outlives a config (provider health, the affinity and response
// owner tables, the dashboard's board), implements the Observer with its
// metrics, log lines and placeholders, and calls Serve.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"

	"github.com/llmhedge/caddy-llm-hedge/internal/affinity"
	"github.com/llmhedge/caddy-llm-hedge/internal/dashboard"
	"github.com/llmhedge/caddy-llm-hedge/internal/health"
	"github.com/llmhedge/caddy-llm-hedge/internal/limit"
	"github.com/llmhedge/caddy-llm-hedge/internal/routing"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// Env is what the engine is given by the layer that owns the process:
// the state shared across configs and the ways to report.
type Env struct {
	// Observer hears the engine's events and each request's report.
	Observer Observer
	// Log takes the engine's few log lines of its own (a stalled stream,
	// refused cloud credentials...); nil discards them.
	Log *slog.Logger
	// Health returns the shared health of a provider (name, base URL,
	// vendor); every call is paired with a release by the caller when the
	// engine is closed.
	Health func(name, baseURL, vendor string) (*health.Provider, error)
	// Affinity is the session table when affinity is on, else nil.
	Affinity *affinity.Table
	// Owners is the table of response and object owners, or nil.
	Owners *ResponseOwners
	// Board is the dashboard's board a finished request is recorded on,
	// or nil.
	Board *dashboard.Board
	// Exit is done when the process exits past its grace period: every
	// request still running then ends with wire.ErrShutdown.
	Exit context.Context
	// ClientIP is the client's address as the server judged it (trusted
	// proxies applied), or "" to use the connection's.
	ClientIP func(*http.Request) string
}

// Engine serves the requests of one configuration. It is built once per
// config (a reload builds a new one beside the old, whose requests keep
// running) and is safe for concurrent use.
type Engine struct {
	Config
	env         Env
	providers   []*provider
	transport   map[string]*http.Transport
	hedgeBudget *limit.Budget
	retryBudget *limit.Budget
	affinity    *affinity.Table
	policy      routing.Policy
	owners      *ResponseOwners
	rejects     [][]byte
	cooldown    health.Cooldown
	obs         observers
	log         *slog.Logger
	board       *dashboard.Board
	exit        context.Context
	rand        func() float64
}

// New builds the engine of cfg and its providers, in the order given. An
// error names the provider it is about; the providers whose health was
// loaded are released by Close either way.
func New(cfg Config, providers []ProviderConfig, env Env) (*Engine, error) {
	h := &Engine{
		Config: cfg, env: env, transport: make(map[string]*http.Transport),
		affinity: env.Affinity, policy: cfg.Policy, owners: env.Owners, cooldown: cfg.Cooldown,
		obs: observers{env.Observer}, log: env.Log, board: env.Board, exit: env.Exit, rand: rand.Float64,
	}
	if h.env.Health == nil {
		return h, errors.New("engine: no health source")
	}
	for _, phrase := range cfg.Stream.Reject {
		h.rejects = append(h.rejects, []byte(phrase))
	}
	if cfg.Hedge.BudgetTokens {
		h.hedgeBudget = limit.NewWeightedBudget(cfg.Hedge.BudgetPercent, hedgeBudgetFloor, budgetWindow)
	} else {
		h.hedgeBudget = limit.NewBudget(cfg.Hedge.BudgetPercent, hedgeBudgetFloor, budgetWindow)
	}
	h.retryBudget = limit.NewBudget(cfg.Retry.BudgetPercent, retryBudgetFloor, budgetWindow)
	seen := make(map[string]bool)
	for i := range providers {
		pc := &providers[i]
		if seen[pc.Name] {
			return h, fmt.Errorf("provider %q: duplicate name", pc.Name)
		}
		seen[pc.Name] = true
		p, err := newProvider(pc, h)
		if err != nil {
			return h, fmt.Errorf("provider %q: %w", pc.Name, err)
		}
		h.providers = append(h.providers, p)
	}
	return h, nil
}

// Publish makes this config's word on its providers the shared one: the
// priority and weight the admin view and routing read, each key's
// quota_reserve, and the refused keys given another chance, as a reload
// does (SPEC 14). The Caddy layer calls it last in Provision: a config
// refused before it leaves these as the running config set them.
func (h *Engine) Publish() {
	for _, p := range h.providers {
		p.health.Route.Priority.Store(int64(p.cfg.Priority))
		p.health.Route.Weight.Store(int64(p.weight))
		for _, k := range p.keys {
			k.St.Reserve.Store(p.reserve)
			if k.St.Disabled.Swap(false) {
				h.obs.Transition(Transition{Kind: KeyReenabled, Provider: p.name, Key: k.St.Fp, Reason: "reload"})
			}
		}
	}
}

// Close releases the providers' keys and closes the idle upstream
// connections. In-flight requests keep running on their own contexts: a
// reload never cuts a stream. The provider health stays the caller's to
// release.
func (h *Engine) Close() {
	for _, p := range h.providers {
		p.health.Keys.Release(p.keys)
	}
	for _, t := range h.transport {
		t.CloseIdleConnections()
	}
}

// shutdownCut reports whether ctx ended because the process exits.
func shutdownCut(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), wire.ErrShutdown)
}

// Serve serves one request: a completion with failover and hedging, or a
// forwarded call to one healthy provider.
func (h *Engine) Serve(w http.ResponseWriter, r *http.Request) error {
	d := dialectOfPath(r.URL.Path)
	if d == wire.DialectNone {
		return h.forward(w, r)
	}
	if r.Method != http.MethodPost {
		h.refuseMethod(w, r, d)
		return nil
	}
	return h.serveCompletion(w, r, d)
}

// discard takes the log lines of an Engine without a Log.
var discard = slog.New(slog.DiscardHandler)

func orDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return discard
	}
	return l
}
