// Package llmhedge is a Caddy HTTP handler that makes several unreliable
// LLM providers look like one fast, reliable endpoint for clients of four
// dialects (Anthropic Messages, OpenAI Chat Completions, OpenAI Responses,
// Gemini), natively or through Bedrock, Vertex AI and Azure OpenAI: it fails over before the first byte reaches
// the client, races slow streams against alternative providers, cools down
// providers that fail, retries with backoff and Retry-After, and never
// hands a client a silently truncated stream.
package llmhedge

import (
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	// The simulated provider is compiled into every build: the embedded
	// default (Caddyfile.example) and rehearsals of failures need it.

	"github.com/llmhedge/caddy-llm-hedge/internal/affinity"
	"github.com/llmhedge/caddy-llm-hedge/internal/engine"
	"github.com/llmhedge/caddy-llm-hedge/internal/health"
	"github.com/llmhedge/caddy-llm-hedge/internal/routing"
	_ "github.com/llmhedge/caddy-llm-hedge/sim"
)

func init() {
	caddy.RegisterModule(Handler{})
}

// Handler is the `llm_hedge` HTTP handler. It serves LLM completion
// requests (`/v1/messages`, `/v1/chat/completions`, `/v1/responses`,
// Gemini's `:generateContent` and `:streamGenerateContent`) from a list of
// providers, with failover, hedging, cooldowns and retries; the models
// list, token counts and the paths listed by Forward are forwarded to one
// healthy provider, and every other path is 404.
//
// After a request it sets these placeholders, for the access log and the
// handlers that follow:
//
//	{http.llm_hedge.provider}       the provider that served it, or empty
//	{http.llm_hedge.dialect}        the client's dialect: anthropic, openai, responses or gemini
//	{http.llm_hedge.model}          the model that served it (the provider's word, else the model sent)
//	{http.llm_hedge.attempts}       attempts made, hedges and retries included
//	{http.llm_hedge.hedged}         whether a hedge was launched
//	{http.llm_hedge.outcome}        success, upstream_error, client_error, exhausted, timeout, client_abort or stream_error
//	{http.llm_hedge.first_byte_ms}  time to the first valid event of the winner, in ms
//	{http.llm_hedge.input_tokens}   input tokens the provider reported
//	{http.llm_hedge.output_tokens}  output tokens the provider reported
type Handler struct {
	// The upstream LLM providers. At least one is required; names are
	// unique. Default: none.
	Providers []*Provider `json:"providers,omitempty"`

	// Per-attempt and per-request time limits.
	Timeouts Timeouts `json:"timeouts,omitzero"`

	// Hedge racing of streaming requests.
	Hedge HedgeConfig `json:"hedge,omitzero"`

	// Retry policy: attempts per request, same-provider retries, backoff,
	// Retry-After, the retry budget and fallback models.
	Retry RetryConfig `json:"retry,omitzero"`

	// Circuit breaking of providers that keep failing.
	Cooldown CooldownConfig `json:"cooldown,omitzero"`

	// Stream validation and relaying.
	Stream StreamConfig `json:"stream,omitzero"`

	// Sticky routing of a conversation to the provider that served it last,
	// where its prompt cache is.
	Affinity AffinityConfig `json:"affinity,omitzero"`

	// How the provider a request tries first is chosen within a priority
	// tier, in the words of Caddy's lb_policy: "adaptive" (the least cost
	// from the provider's recent first-event time for the request's size,
	// its attempts in flight, its recent failure rate and its keys' quota
	// left, weight a prior; each provider keeps at least 1% of the picks
	// to explore), "weighted_random" (in proportion to weight) or "first"
	// (in the order written). A session's affinity pick comes first under
	// every policy (under adaptive, unless its first events are over 3x
	// the tier's fastest). Default: adaptive.
	LBPolicy string `json:"lb_policy,omitempty"`

	// Largest request body accepted, in bytes; larger bodies get 413 in the
	// client's dialect. Default: 32 MiB.
	MaxBody int64 `json:"max_body,omitempty"`

	// Globs of further API paths forwarded as is, any method, to one
	// provider with its key (files, batches, ...): shell syntax as in a
	// provider's models, `*` does not cross a `/` except `*` alone, which
	// matches every path. They fail over on connection errors; GET and
	// HEAD also on a 5xx. Default: none; only the completion paths and
	// GET /v1/models, GET /v1/models/{id}, POST /v1/messages/count_tokens
	// and POST /v1/responses/input_tokens are served, and the calls on a
	// response by id (GET/DELETE /v1/responses/{id}, .../cancel,
	// .../input_items), which go to the provider that created it; every
	// other path is 404 in the client's dialect.
	Forward []string `json:"forward,omitempty"`

	// Prices of the models, for the spend by purpose (docs/cost.md): the
	// first whose glob matches the model an attempt used; a provider's own
	// prices come first. Default: none (tokens counted, no money).
	Prices []Price `json:"prices,omitempty"`

	engine *engine.Engine
	// loaded are the providers whose shared health Provision took,
	// released by Cleanup; affinity and owners the shared tables taken.
	loaded   []*health.Provider
	affinity *affinity.Table
	owners   *engine.ResponseOwners
	logger   *zap.Logger
	metrics  *handlerMetrics
	obs      *observer // the engine's Observer: metrics, logs, placeholders
}

// Timeouts bound each phase of an attempt and the whole request.
type Timeouts struct {
	// Dial + TLS handshake of one attempt; also how long an HTTP/2
	// connection's PING may go unanswered (at least 5s) before the
	// connection is closed as dead. Default: 10s.
	Connect caddy.Duration `json:"connect,omitempty"`
	// Streaming attempt: from sending the request to its first valid event
	// (the moment it can be committed). Default: 60s. A provider's first_byte_timeout
	// overrides it.
	FirstByte caddy.Duration `json:"first_byte,omitempty"`
	// Non-streaming attempt: from sending the request to the whole
	// response. Default: 10m.
	Response caddy.Duration `json:"response,omitempty"`
	// Committed stream: the longest gap between two events (pings count).
	// Default: 90s.
	Idle caddy.Duration `json:"idle,omitempty"`
	// Whole request: every attempt, wait and the relay. Default: 15m.
	Total caddy.Duration `json:"total,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.llm_hedge",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Provision sets defaults, expands keys, joins the shared provider
// health pool and builds the engine.
func (h *Handler) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	if err := h.checkConfig(); err != nil {
		return err
	}
	h.setDefaults()
	m, err := provisionMetrics(ctx)
	if err != nil {
		return err
	}
	h.metrics = m
	repl := caddy.NewReplacer()
	specs := make([]engine.ProviderConfig, 0, len(h.Providers))
	for _, pc := range h.Providers {
		spec, err := providerSpec(pc, repl)
		if err != nil {
			return fmt.Errorf("provider %q: %w", pc.Name, err)
		}
		if literalKey(pc) {
			// The module never logs a key, but Caddy serves its whole config at
			// GET /config/ and logs it at debug level: keep keys out of it.
			h.logger.Warn("provider key is written literally in the config, where Caddy's admin API and debug log can show it; use {env.VAR}",
				zap.String("provider", pc.Name))
		}
		specs = append(specs, spec)
	}
	if h.Affinity.enabled() {
		h.affinity = loadAffinity(time.Duration(h.Affinity.TTL))
	}
	if h.Hedge.enabled() && h.Hedge.Percentile > 0 {
		if msg := budgetMismatch(h.Hedge.Percentile, h.Hedge.budgetPercent()); msg != "" {
			h.logger.Warn("hedge percentile and budget disagree", zap.String("detail", msg))
		}
	}
	if h.owners, err = loadResponseOwners(); err != nil {
		return err
	}
	h.obs = &observer{logger: h.logger, metrics: h.metrics, prices: newPrices(h)}
	h.engine, err = engine.New(h.engineConfig(), specs, engine.Env{
		Observer: h.obs,
		Log:      ctx.Slogger(),
		Health: func(name, baseURL, vendor string) (*health.Provider, error) {
			ph, err := loadHealth(name, baseURL, vendor)
			if err == nil {
				h.loaded = append(h.loaded, ph)
			}
			return ph, err
		},
		Affinity: h.affinity,
		Owners:   h.owners,
		Board:    &board,
		Exit:     processExit.ctx,
		ClientIP: clientIP,
	})
	if err != nil {
		return err
	}
	for _, pc := range h.Providers {
		noteMaxInFlight(pc.Name, pc.MaxInFlight)
	}
	h.engine.Publish()
	noteReload(len(h.Providers))
	return nil
}

// lastReload is when the dashboard's feed last noted a config loaded (unix
// seconds): every llm_hedge handler of a config provisions, and one line
// a second says it.
var lastReload atomic.Int64

// noteReload puts a loaded config in the dashboard's feed.
func noteReload(providers int) {
	now := engine.Now()
	if prev := lastReload.Load(); prev == now.Unix() || !lastReload.CompareAndSwap(prev, now.Unix()) {
		return
	}
	board.RecordTransition(now, "reload", "", fmt.Sprintf("config loaded: %d providers", providers))
}

// engineConfig is the policy the engine runs, defaults applied.
func (h *Handler) engineConfig() engine.Config {
	policy, _ := routing.ParsePolicy(h.LBPolicy) // checkConfig refused another name
	return engine.Config{
		Timeouts: engine.Timeouts{Connect: time.Duration(h.Timeouts.Connect), FirstByte: time.Duration(h.Timeouts.FirstByte),
			Response: time.Duration(h.Timeouts.Response), Idle: time.Duration(h.Timeouts.Idle), Total: time.Duration(h.Timeouts.Total)},
		Hedge:          h.Hedge.engine(),
		Retry:          h.Retry.engine(),
		Stream:         h.Stream.engine(),
		Cooldown:       h.Cooldown.config(),
		Policy:         policy,
		AffinityTTL:    time.Duration(h.Affinity.TTL),
		AffinityHeader: h.Affinity.Header,
		MaxBody:        h.MaxBody,
		Forward:        h.Forward,
	}
}

// clientIP is the client's address as Caddy judged it (trusted proxies
// applied).
func clientIP(r *http.Request) string {
	ip, _ := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string)
	return ip
}

// Validate rejects configurations that cannot work.
func (h *Handler) Validate() error {
	if len(h.Providers) == 0 {
		return errors.New("no provider configured")
	}
	for _, d := range []struct {
		name string
		v    caddy.Duration
	}{
		{"timeouts.connect", h.Timeouts.Connect}, {"timeouts.first_byte", h.Timeouts.FirstByte},
		{"timeouts.response", h.Timeouts.Response}, {"timeouts.idle", h.Timeouts.Idle},
		{"timeouts.total", h.Timeouts.Total},
	} {
		if d.v < 0 {
			return fmt.Errorf("%s: negative duration", d.name)
		}
	}
	for _, g := range h.Forward {
		if err := engine.CheckForwardGlob(g); err != nil {
			return fmt.Errorf("forward: %w", err)
		}
	}
	if err := h.Hedge.validate(); err != nil {
		return err
	}
	if err := h.Retry.validate(); err != nil {
		return err
	}
	return h.Cooldown.validate()
}

// Cleanup releases this handler's references to the shared provider health
// and tables and closes idle upstream connections. In-flight requests keep
// running on their own contexts: a reload never cuts a stream.
func (h *Handler) Cleanup() error {
	for _, ph := range h.loaded {
		releaseHealth(ph.Name, ph.BaseURL)
	}
	if h.engine != nil {
		h.engine.Close()
	}
	if h.owners != nil {
		// kept: requests of this config outlive a reload and remember ids
		releaseResponseOwners()
	}
	releaseAffinity(h.affinity, time.Duration(h.Affinity.TTL))
	endRequestsOnExit()
	return nil
}

func (h *Handler) setDefaults() {
	setDur := func(d *caddy.Duration, def time.Duration) {
		if *d == 0 {
			*d = caddy.Duration(def)
		}
	}
	setDur(&h.Timeouts.Connect, defaultConnectTimeout)
	setDur(&h.Timeouts.FirstByte, defaultFirstByteTimeout)
	setDur(&h.Timeouts.Response, defaultResponseTimeout)
	setDur(&h.Timeouts.Idle, defaultIdleTimeout)
	setDur(&h.Timeouts.Total, defaultTotalTimeout)
	if h.MaxBody == 0 {
		h.MaxBody = defaultMaxBody
	}
	h.Hedge.setDefaults()
	h.Retry.setDefaults()
	h.Stream.setDefaults()
	h.Affinity.setDefaults()
}

// ServeHTTP serves LLM completion requests with failover and hedging, and
// forwards the other paths it serves to one healthy provider: the engine's
// work, counted among the requests a process exit waits for.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	defer trackRequest()()
	return h.engine.Serve(w, r)
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
