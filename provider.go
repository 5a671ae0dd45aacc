package llmhedge

import (
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/headers"

	"github.com/llmhedge/caddy-llm-hedge/internal/cloud"
	"github.com/llmhedge/caddy-llm-hedge/internal/health"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

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
}

// provider is the provisioned, immutable runtime form of a Provider.
// hasKey reports whether the provider holds a key of its own: one, or a
// pool.
func (pc *Provider) hasKey() bool { return pc.Key != "" || len(pc.Keys) > 0 }

type provider struct {
	cfg       *Provider
	name      string
	baseURL   *url.URL
	basePath  string            // escaped, without a trailing slash
	dialect   wire.Dialect      // dialectNone: serves whichever the request speaks
	proto     cloud.Protocol    // a cloud (protocol.go), or nil for a native API
	key       string            // the first key of the pool: forwarded calls use it
	keys      []*health.PoolKey // empty: the client's key is passed through
	reserve   int64             // quota_reserve
	vendor    string
	weight    int
	firstByte time.Duration
	prefill   *bool // the operator's prefill; nil: by dialect and route (prefills, resume.go)
	transport *http.Transport
	health    *health.Provider
	latency   *health.LatencyTracker
	xl        map[wire.Dialect]*xlTarget // client formats served by translation (translate.go)
}

func newProvider(pc *Provider, repl *caddy.Replacer, h *Handler) (*provider, error) {
	if pc.Name == "" {
		return nil, fmt.Errorf("missing name")
	}
	// {env.LLM_URL} is expanded here, and checked expanded.
	u, err := url.Parse(repl.ReplaceAll(pc.BaseURL, ""))
	if err != nil {
		return nil, fmt.Errorf("base_url: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("base_url %q: want http(s)://host[:port][/path] (expanded: %q)", pc.BaseURL, u.Redacted())
	}
	if err := checkBaseURL(u); err != nil {
		return nil, fmt.Errorf("base_url %q: %w", u.Redacted(), err)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	d, ok := parseDialect(pc.API)
	pi, viaCloud := parseProtocol(pc.API)
	if viaCloud {
		d, ok = pi.native, true
	}
	if !ok {
		return nil, unknownAPI(pc.API)
	}
	if err := pc.Options.Check(pc.API, pc.hasKey()); err != nil {
		return nil, err
	}
	for _, r := range pc.ModelMap {
		if err := wire.CheckModelName(r.To); err != nil {
			return nil, fmt.Errorf("model %s %s: %w", r.From, r.To, err)
		}
	}
	if mp, ok := d.(wire.ModelInPath); ok {
		// The model goes into the upstream path (one segment).
		for _, r := range pc.ModelMap {
			if err := mp.CheckPathModel(r.To); err != nil {
				return nil, fmt.Errorf("model %s %s: %w", r.From, r.To, err)
			}
		}
	}
	for _, g := range append(append([]string{}, pc.Models...), ruleGlobs(pc.ModelMap)...) {
		if _, err := path.Match(g, ""); err != nil {
			return nil, fmt.Errorf("model glob %q: %w", g, err)
		}
	}
	p := &provider{
		cfg:       pc,
		name:      pc.Name,
		baseURL:   u,
		basePath:  strings.TrimSuffix(u.EscapedPath(), "/"),
		dialect:   d,
		key:       repl.ReplaceAll(pc.Key, ""),
		vendor:    pc.Vendor,
		weight:    pc.Weight,
		firstByte: time.Duration(pc.FirstByteTimeout),
	}
	if pc.Key != "" && p.key == "" {
		return nil, fmt.Errorf("key: expands to an empty value (is the environment variable set?)")
	}
	if pc.QuotaReserve < 0 || pc.QuotaReserve > 100 {
		return nil, fmt.Errorf("quota_reserve %d: want a percent, 0-100", pc.QuotaReserve)
	}
	p.reserve = int64(pc.QuotaReserve)
	secrets, err := poolSecrets(pc, repl)
	if err != nil {
		return nil, err
	}
	if len(secrets) > 0 {
		p.key = secrets[0]
	}
	if p.vendor == "" {
		p.vendor = u.Hostname()
	}
	if p.weight <= 0 {
		p.weight = 1
	}
	if p.firstByte <= 0 {
		p.firstByte = time.Duration(h.Timeouts.FirstByte)
	}
	if viaCloud {
		if p.proto, err = pi.ctor(cloud.Target{BaseURL: p.baseURL, BasePath: p.basePath, Key: p.key, Opts: pc.Options}); err != nil {
			return nil, err
		}
	}
	p.prefill = pc.Prefill
	if err := p.translations(pc); err != nil {
		return nil, err
	}
	if pc.HeadersUp != nil {
		if err := pc.HeadersUp.Provision(caddy.Context{}); err != nil {
			return nil, fmt.Errorf("header_up: %w", err)
		}
	}
	p.transport, err = newTransport(time.Duration(h.Timeouts.Connect), pc.TLSTrustedCA, u.Scheme == "http")
	if err != nil {
		return nil, err
	}
	h.transport[pc.Name] = p.transport
	p.health, err = loadHealth(p.name, u.String(), p.vendor)
	if err != nil {
		return nil, err
	}
	p.latency = p.health.Latency
	for _, k := range secrets {
		st := p.health.Keys.Key(health.Fingerprint(k))
		p.keys = append(p.keys, &health.PoolKey{Secret: k, St: st})
	}
	return p, nil
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

func ruleGlobs(rules []ModelRule) []string {
	out := make([]string, 0, len(rules))
	for _, r := range rules {
		out = append(out, r.From)
	}
	return out
}

// serves reports whether the provider takes requests of dialect d for the
// (requested) model.
func (p *provider) serves(d wire.Dialect, model string) bool {
	if !p.native(d) && p.xl[d] == nil {
		return false
	}
	if len(p.cfg.Models) == 0 {
		return true
	}
	for _, g := range p.cfg.Models {
		if globMatch(g, model) {
			return true
		}
	}
	return false
}

// passThroughKey reports whether the client's own key reaches the provider
// (no `key`, no cloud credentials).
func (p *provider) passThroughKey() bool { return p.key == "" && p.proto == nil }

// upstreamModel applies the provider's model rewrite rules: the first rule
// whose glob matches wins; no match keeps the model.
func (p *provider) upstreamModel(model string) string {
	for _, r := range p.cfg.ModelMap {
		if globMatch(r.From, model) {
			return r.To
		}
	}
	return model
}

// globMatch matches model names with shell globs; `*` alone matches all.
func globMatch(glob, name string) bool {
	if glob == "*" || glob == name {
		return true
	}
	ok, _ := path.Match(glob, name)
	return ok
}

// checkBaseURL refuses what a base URL could carry but the proxy would not
// send: credentials (net/http would turn them into an Authorization header
// that the provider key then replaces) and a fragment.
func checkBaseURL(u *url.URL) error {
	if u.User != nil {
		return fmt.Errorf("credentials in the URL (user:pass@) are not sent; use key or header_up")
	}
	if u.Fragment != "" || u.RawFragment != "" {
		return fmt.Errorf("a #fragment is never sent upstream; remove it")
	}
	return nil
}

// url builds the upstream URL for an escaped request path (checked by
// checkEscapedPath, or a canonical completion path) and the client's raw
// query, which follows the base URL's own query.
func (p *provider) url(escapedPath, rawQuery string) string {
	base := p.baseURL.RawQuery
	// A raw '#' the client sent in its query would end the URL here.
	rawQuery = strings.ReplaceAll(rawQuery, "#", "%23")
	var b strings.Builder
	b.Grow(len(p.baseURL.Scheme) + len(p.baseURL.Host) + len(p.basePath) + len(escapedPath) + len(base) + len(rawQuery) + 6)
	b.WriteString(p.baseURL.Scheme)
	b.WriteString("://")
	b.WriteString(p.baseURL.Host)
	b.WriteString(p.basePath)
	b.WriteString(escapedPath)
	if base != "" || rawQuery != "" {
		b.WriteByte('?')
		b.WriteString(base)
		if base != "" && rawQuery != "" {
			b.WriteByte('&')
		}
		b.WriteString(rawQuery)
	}
	return b.String()
}

// upstreamQuery is the client's raw query as sent to p: without Google's
// key parameter when p has a key of its own (as the key headers go in
// upstreamHeader), else as is, the client's key passing through.
func (p *provider) upstreamQuery(rawQuery string) string {
	if p.key == "" {
		return rawQuery
	}
	return wire.StripKeyParam(rawQuery)
}

// hopHeaders are never forwarded (RFC 9110 section 7.6.1), nor are the
// headers the proxy sets itself.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
	"Content-Length", "Accept-Encoding", "Host", "Expect",
}

// clientKeyHeaders are where clients put API keys and choose the
// organization, project or billing account a key acts for, besides every
// dialect's own (credentialHeaders): Azure OpenAI and Google styles. All
// go when a provider has its own key, whatever the request's dialect: a
// client's value could make the provider refuse the operator's key. They
// go with the client's key, unless header_up sets them.
var clientKeyHeaders = []string{"Api-Key", "X-Goog-Api-Key", "X-Goog-User-Project"}

// upstreamHeader builds the header of one attempt: the client's headers
// without hop-by-hop fields, the provider's auth, and its header_up rules
// (a cloud's: cloudHeader).
// With a configured key, the client's own credentials and auth-scoping
// headers are removed: they never reach another party's host, and nothing
// the client sends can make the provider refuse the operator's key.
func (p *provider) upstreamHeader(client http.Header, d wire.Dialect, repl *caddy.Replacer, key string) http.Header {
	if p.proto != nil {
		return p.cloudHeader(client, repl, key)
	}
	out := make(http.Header, len(client)+2)
	for k, v := range client {
		out[k] = v
	}
	for _, k := range hopHeaders {
		delete(out, k)
	}
	if c := client.Get("Connection"); c != "" {
		for _, f := range strings.Split(c, ",") {
			out.Del(strings.TrimSpace(f))
		}
	}
	if key != "" {
		for _, k := range clientKeyHeaders {
			out.Del(k)
		}
		for _, dd := range dialects {
			for _, k := range dd.CredentialHeaders() {
				out.Del(k)
			}
		}
		d.SetAuth(out, key)
	}
	if p.cfg.HeadersUp != nil {
		p.cfg.HeadersUp.ApplyTo(out, repl)
	}
	return out
}

// cloudClientHeaders are the only client headers a cloud receives (SPEC
// 15): content negotiation, the client's agent, and Anthropic's own, which
// the protocol maps (Bedrock moves anthropic-beta into the body). A
// deny-list cannot keep up with what steers a cloud's auth, billing or
// deadline (X-Amz-Security-Token, which SigV4 would sign in; X-Goog-User-
// Project; Vertex's X-Server-Timeout; any x-amz-*, x-goog-*, x-ms-* or
// credential header), so nothing else of the client's reaches a cloud or
// its signature.
var cloudClientHeaders = []string{"Accept", "Anthropic-Beta", "Anthropic-Version", "User-Agent"}

// cloudHeader builds the header of an attempt on a cloud: the allowed
// client headers, the provider's static key where the cloud reads it, and
// the operator's header_up rules. The protocol's prepare adds its auth
// (SigV4 signs what is here then, and only that).
func (p *provider) cloudHeader(client http.Header, repl *caddy.Replacer, key string) http.Header {
	out := make(http.Header, len(cloudClientHeaders)+4)
	for _, k := range cloudClientHeaders {
		if v := client.Values(k); len(v) > 0 {
			out[k] = v
		}
	}
	if key != "" {
		p.proto.SetKey(out, key)
	}
	if p.cfg.HeadersUp != nil {
		p.cfg.HeadersUp.ApplyTo(out, repl)
	}
	return out
}

// setURL points an upstream request at the provider's base URL joined with
// an escaped path, the base URL's query kept.
func (p *provider) setURL(up *http.Request, escapedPath string) error {
	u, err := url.Parse(p.url(escapedPath, ""))
	if err != nil {
		return err
	}
	up.URL, up.Host = u, ""
	return nil
}
