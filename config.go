package llmhedge

import (
	"fmt"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/headers"

	"github.com/llmhedge/caddy-llm-hedge/internal/affinity"
	"github.com/llmhedge/caddy-llm-hedge/internal/cloud"
	"github.com/llmhedge/caddy-llm-hedge/internal/engine"
	"github.com/llmhedge/caddy-llm-hedge/internal/health"
	"github.com/llmhedge/caddy-llm-hedge/internal/stream"
)

// Defaults, in one place: the godoc of each field states them, and the
// Caddyfile parser, Provision and the code that falls back on them for an
// unset value read them here.
const (
	defaultConnectTimeout   = 10 * time.Second // timeouts.connect
	defaultFirstByteTimeout = 60 * time.Second // timeouts.first_byte
	defaultResponseTimeout  = 10 * time.Minute // timeouts.response
	defaultIdleTimeout      = 90 * time.Second // timeouts.idle
	defaultTotalTimeout     = 15 * time.Minute // timeouts.total
	defaultMaxBody          = 32 << 20         // max_body

	defaultHedgePercentile  = 90                     // hedge.percentile, when hedge.delay is not set
	defaultHedgeMin         = 500 * time.Millisecond // hedge.min
	defaultHedgeMax         = 8 * time.Second        // hedge.max
	defaultHedgeMaxAttempts = 2                      // hedge.max_attempts
	maxHedgeAttempts        = 5                      // hedge.max_attempts' upper bound
	defaultHedgeBudget      = 10                     // hedge.budget, percent of requests
	hedgeBudgetFloor        = 1                      // hedges per second the budget always allows

	defaultAttempts      = 4                      // retry.attempts
	defaultSameProvider  = 1                      // retry.same_provider
	defaultBackoffBase   = 500 * time.Millisecond // retry.backoff_base
	defaultBackoffMax    = 8 * time.Second        // retry.backoff_max
	defaultRetryAfterMax = 20 * time.Second       // retry.retry_after_max
	defaultRetryBudget   = 20                     // retry.budget, percent of requests
	retryBudgetFloor     = 3                      // retries per second the budget always allows
	budgetWindow         = 10 * time.Second       // the window both budgets count over

	breakerDefaultFailures = health.DefaultFailures // cooldown.failures
	breakerDefaultDuration = health.DefaultDuration // cooldown.duration; cooldown.max defaults to it

	defaultMaxBuffer   = 1 << 20                   // stream.max_buffer, bytes before commit
	defaultResume      = 1                         // stream.resume, continuations of a cut stream per request
	defaultGateBuffer  = stream.DefaultGateBuffer  // a gate's buffer when none is given: stream.max_buffer's default
	defaultGateEvents  = stream.DefaultGateEvents  // events a gate buffers before the first valid one
	defaultFinishGrace = stream.DefaultFinishGrace // an OpenAI stream's wait for [DONE] after its finish_reason

	defaultAffinityTTL      = affinity.DefaultTTL      // affinity.ttl
	defaultAffinityCapacity = affinity.DefaultCapacity // sessions remembered

	defaultQuotaReserve = 0                        // a provider's quota_reserve, percent
	keyCooldownDefault  = 30 * time.Second         // a key's 429 cooldown with no Retry-After or reset header
	rateLimitResetMax   = health.RateLimitResetMax // a rate-limit reset further away is clock skew or garbage: clamped

	// maxClientDeadline bounds X-Stainless-Timeout before it is converted,
	// so a huge value cannot overflow a Duration (it could only raise total,
	// which a client deadline never does).
	maxClientDeadline = 24 * time.Hour
)

// ModelRule maps one model name (or glob) to another.
type ModelRule = engine.ModelRule

// AffinityConfig configures sticky routing of a conversation to the
// provider holding its prompt cache.
type AffinityConfig struct {
	// Disables affinity. Default: false.
	Off bool `json:"off,omitempty"`
	// Read the session key from this request header instead of the body's
	// metadata.user_id (Anthropic) or user (OpenAI). Default: none, the
	// body's field.
	Header string `json:"header,omitempty"`
	// How long a remembered winner is kept for a session. Default: 1h.
	TTL caddy.Duration `json:"ttl,omitempty"`
}

func (c *AffinityConfig) setDefaults() {
	if c.TTL == 0 {
		c.TTL = caddy.Duration(defaultAffinityTTL)
	}
}

func (c *AffinityConfig) enabled() bool { return !c.Off }

// Provider is one upstream LLM API endpoint.
type Provider struct {
	// Unique name of the provider, used in logs, metrics and the admin API.
	Name string `json:"name"`
	// Base URL, e.g. https://api.anthropic.com; the request path is
	// appended to its path, and the request's query to its own query (base
	// first, e.g. `?api-version=...`). Credentials in it (`user:pass@`) are
	// refused: use key or header_up.
	BaseURL string `json:"base_url"`
	// Wire dialect this provider serves: "anthropic", "openai" (which
	// serves both Chat Completions and Responses clients) or "responses";
	// or a cloud protocol: "azure" (OpenAI
	// clients), "bedrock" (Anthropic clients) or "vertex" (Anthropic and
	// Gemini clients).
	// Default: inferred from the request path, so the provider serves all.
	API string `json:"api,omitempty"`
	// The cloud's own options (region, project, aws_profile): internal/cloud.
	cloud.Options
	// API key sent to this provider; `{env.VAR}` is expanded at provision
	// time. When set, the client's own key and auth-scoping headers
	// (OpenAI-Organization, OpenAI-Project, Anthropic-Organization,
	// X-Goog-User-Project) are removed. Default: the client's key is passed
	// through, and the provider's 401/403/404/429 to it are the client's
	// answer: relayed as is, never counted against the provider.
	Key string `json:"key,omitempty"`
	// More API keys of this provider, after key: together a pool in which
	// each key has its own health and quota (a 401/403 disables that key,
	// a 429 cools it, its rate-limit headers say what it has left).
	// `{env.VAR}` is expanded; an empty value or a key twice is an error.
	Keys []string `json:"keys,omitempty"`
	// Percent of a key's remaining quota (requests and tokens, as the
	// provider's rate-limit headers say) kept unused, 0-100. Default: 0.
	QuotaReserve int `json:"quota_reserve,omitempty"`
	// Failure domain; hedges go to another vendor first. Default: the base
	// URL's host.
	Vendor string `json:"vendor,omitempty"`
	// Lower is tried first. Default: 0.
	Priority int `json:"priority,omitempty"`
	// The provider's weight within its priority tier: under lb_policy
	// weighted_random its share of the tier's picks; under adaptive (the
	// default) a prior, dividing its cost, so that it decides while
	// nothing is measured and tilts the choice afterwards. Default: 1.
	Weight int `json:"weight,omitempty"`
	// Globs of requested models this provider serves. Default: all.
	Models []string `json:"models,omitempty"`
	// Rewrites of the requested model for this provider, tried in order;
	// the first match applies.
	ModelMap []ModelRule `json:"model_map,omitempty"`
	// Header manipulations of the upstream request.
	HeadersUp *headers.HeaderOps `json:"headers_up,omitempty"`
	// Attempts at once on this provider. Default: 0 (unlimited).
	MaxInFlight int `json:"max_in_flight,omitempty"`
	// Whether the provider accepts an assistant turn last and continues
	// from its exact text: a mid-stream continuation there sends the
	// delivered text as that turn. Default: on for Anthropic
	// Messages requests on api anthropic, bedrock and vertex; off
	// otherwise (a Gemini request on vertex included: Gemini answers a
	// trailing model turn from the start).
	Prefill *bool `json:"prefill,omitempty"`
	// Client formats this provider serves by translation into its own
	// (`translate anthropic`): SPEC 19, docs/translation.md. Needs the
	// provider's own key. Default: none.
	Translate []string `json:"translate,omitempty"`
	// Overrides timeouts.first_byte for this provider.
	FirstByteTimeout caddy.Duration `json:"first_byte_timeout,omitempty"`
	// PEM file of extra certificate authorities trusted for this provider
	// (a private gateway with its own CA). Default: the system roots.
	TLSTrustedCA string `json:"tls_trusted_ca,omitempty"`
	// Prices of this provider's models, before the handler's (the same
	// model can cost differently through a cloud). Default: none.
	Prices []Price `json:"prices,omitempty"`
}

// hasKey reports whether the provider holds a key of its own: one, or a
// pool.
func (pc *Provider) hasKey() bool { return pc.Key != "" || len(pc.Keys) > 0 }

// providerSpec is pc as the engine takes it: its base URL and keys
// expanded ({env.VAR}), its header_up rules provisioned.
func providerSpec(pc *Provider, repl *caddy.Replacer) (engine.ProviderConfig, error) {
	spec := engine.ProviderConfig{
		Name: pc.Name, BaseURL: repl.ReplaceAll(pc.BaseURL, ""), RawBaseURL: pc.BaseURL, API: pc.API, Options: pc.Options,
		QuotaReserve: pc.QuotaReserve, Vendor: pc.Vendor, Priority: pc.Priority, Weight: pc.Weight,
		Models: pc.Models, ModelMap: pc.ModelMap, MaxInFlight: pc.MaxInFlight, Prefill: pc.Prefill,
		Translate: pc.Translate, FirstByteTimeout: time.Duration(pc.FirstByteTimeout), TLSTrustedCA: pc.TLSTrustedCA,
	}
	if pc.Name == "" {
		return spec, fmt.Errorf("missing name")
	}
	if pc.Key != "" && repl.ReplaceAll(pc.Key, "") == "" {
		return spec, fmt.Errorf("key: expands to an empty value (is the environment variable set?)")
	}
	secrets, err := poolSecrets(pc, repl)
	if err != nil {
		return spec, err
	}
	spec.Keys = secrets
	if ops := pc.HeadersUp; ops != nil {
		if err := ops.Provision(caddy.Context{}); err != nil {
			return spec, fmt.Errorf("header_up: %w", err)
		}
		spec.HeaderUp = func(hdr http.Header, r *http.Request) {
			repl, _ := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
			if repl == nil {
				repl = caddy.NewReplacer()
			}
			ops.ApplyTo(hdr, repl)
		}
	}
	return spec, nil
}

// poolSecrets expands the provider's keys (key, then keys): an empty
// expansion or a key twice is an error, which names the key by its place
// and fingerprint, never by its value.
func poolSecrets(pc *Provider, repl *caddy.Replacer) ([]string, error) {
	raw := pc.Keys
	if pc.Key != "" {
		raw = append([]string{pc.Key}, pc.Keys...)
	}
	out := make([]string, 0, len(raw))
	for i, k := range raw {
		v := repl.ReplaceAll(k, "")
		if v == "" {
			return nil, fmt.Errorf("key %d of %d: expands to an empty value (is the environment variable set?)", i+1, len(raw))
		}
		for _, o := range out {
			if o == v {
				return nil, fmt.Errorf("key %d of %d (%s): the same key twice in one pool", i+1, len(raw), health.Fingerprint(v))
			}
		}
		out = append(out, v)
	}
	return out, nil
}
