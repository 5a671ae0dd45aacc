package engine

import (
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/internal/cloud"
	"github.com/llmhedge/caddy-llm-hedge/internal/health"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// ProviderConfig is one provider as the engine takes it: its options as
// the Caddy layer read them, placeholders expanded (Provider in the root
// package documents each).
type ProviderConfig struct {
	Name string
	// BaseURL is expanded; RawBaseURL as written, for messages.
	BaseURL, RawBaseURL string
	API                 string
	cloud.Options
	// Keys are the provider's keys, expanded (key, then keys); empty: the
	// client's key is passed through.
	Keys         []string
	QuotaReserve int
	Vendor       string
	Priority     int
	Weight       int
	Models       []string
	ModelMap     []ModelRule
	// HeaderUp applies the operator's header_up rules to an attempt's
	// header, for the client's request r; nil: none.
	HeaderUp         func(h http.Header, r *http.Request)
	MaxInFlight      int
	Prefill          *bool
	Translate        []string
	FirstByteTimeout time.Duration
	TLSTrustedCA     string
}

// provider is the provisioned, immutable runtime form of a ProviderConfig.
type provider struct {
	cfg       *ProviderConfig
	name      string
	baseURL   *url.URL
	basePath  string            // escaped, without a trailing slash
	dialect   wire.Dialect      // dialectNone: serves whichever the request speaks
	chatOnly  bool              // api chat: Chat Completions and the models list only (an OpenAI-compatible server)
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

func newProvider(pc *ProviderConfig, h *Engine) (*provider, error) {
	if pc.Name == "" {
		return nil, fmt.Errorf("missing name")
	}
	u, err := url.Parse(pc.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("base_url: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("base_url %q: want http(s)://host[:port][/path] (expanded: %q)", pc.RawBaseURL, u.Redacted())
	}
	if err := CheckBaseURL(u); err != nil {
		return nil, fmt.Errorf("base_url %q: %w", u.Redacted(), err)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	api, chatOnly := pc.API, strings.EqualFold(pc.API, apiChat)
	if chatOnly {
		api = dialectOpenAI.String()
	}
	d, ok := parseDialect(api)
	pi, viaCloud := parseProtocol(pc.API)
	if viaCloud {
		d, ok = pi.native, true
	}
	if !ok {
		return nil, unknownAPI(pc.API)
	}
	if err := pc.Options.Check(pc.API, len(pc.Keys) > 0); err != nil {
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
		chatOnly:  chatOnly,
		vendor:    pc.Vendor,
		weight:    pc.Weight,
		firstByte: pc.FirstByteTimeout,
	}
	if pc.QuotaReserve < 0 || pc.QuotaReserve > 100 {
		return nil, fmt.Errorf("quota_reserve %d: want a percent, 0-100", pc.QuotaReserve)
	}
	p.reserve = int64(pc.QuotaReserve)
	if len(pc.Keys) > 0 {
		p.key = pc.Keys[0]
	}
	if p.vendor == "" {
		p.vendor = u.Hostname()
	}
	if p.weight <= 0 {
		p.weight = 1
	}
	if p.firstByte <= 0 {
		p.firstByte = h.Timeouts.FirstByte
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
	p.transport, err = newTransport(h.Timeouts.Connect, pc.TLSTrustedCA, u.Scheme == "http")
	if err != nil {
		return nil, err
	}
	if as, ok := p.proto.(cloud.AuthSizer); ok {
		// A signature's header (SigV4's 300 bytes, 2 KiB with a session
		// token) is buffered with the rest: a small request is still one
		// write, not two or three.
		p.transport.WriteBufferSize += as.AuthHeaderBytes()
	}
	h.transport[pc.Name] = p.transport
	p.health, err = h.env.Health(p.name, u.String(), p.vendor)
	if err != nil {
		return nil, err
	}
	p.latency = p.health.Latency
	for _, k := range pc.Keys {
		st := p.health.Keys.Key(health.Fingerprint(k))
		p.keys = append(p.keys, &health.PoolKey{Secret: k, St: st})
	}
	return p, nil
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
		if GlobMatch(g, model) {
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
		if GlobMatch(r.From, model) {
			return r.To
		}
	}
	return model
}

// GlobMatch matches model names with shell globs; `*` alone matches all.
func GlobMatch(glob, name string) bool {
	if glob == "*" || glob == name {
		return true
	}
	ok, _ := path.Match(glob, name)
	return ok
}

// CheckBaseURL refuses what a base URL could carry but the proxy would not
// send: credentials (net/http would turn them into an Authorization header
// that the provider key then replaces) and a fragment.
func CheckBaseURL(u *url.URL) error {
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
func (p *provider) upstreamHeader(r *http.Request, d wire.Dialect, key string) http.Header {
	client := r.Header
	if p.proto != nil {
		return p.cloudHeader(r, key)
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
	return p.applyHeaderUp(out, r)
}

// applyHeaderUp applies the operator's header_up rules to out, an
// attempt's header built from the client's. Its values are the client's
// own slices until then, and Caddy's header operations write into a
// value in place (replace) or append past its length (add): out gets
// values of its own first, or the rules would rewrite the client's header
// (and apply again to the rewritten value on the next attempt) and write
// into the header of an attempt already under way.
func (p *provider) applyHeaderUp(out http.Header, r *http.Request) http.Header {
	if p.cfg.HeaderUp == nil {
		return out
	}
	out = out.Clone()
	p.cfg.HeaderUp(out, r)
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
func (p *provider) cloudHeader(r *http.Request, key string) http.Header {
	client := r.Header
	out := make(http.Header, len(cloudClientHeaders)+4)
	for _, k := range cloudClientHeaders {
		if v := client.Values(k); len(v) > 0 {
			out[k] = v
		}
	}
	if key != "" {
		p.proto.SetKey(out, key)
	}
	return p.applyHeaderUp(out, r)
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
