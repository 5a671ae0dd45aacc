package llmhedge

import (
	"errors"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmhedge/caddy-llm-hedge/internal/engine"
	"github.com/llmhedge/caddy-llm-hedge/internal/health"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// Collectors are created once per process and registered into the
// registry of every config that provisions the handler (a reload gets a
// new registry). Every label value comes from configuration (provider
// names) or a fixed set: never from client input such as the model.
var (
	metricsOnce sync.Once
	collectors  *handlerMetrics
)

type handlerMetrics struct {
	requests     *prometheus.CounterVec
	attempts     *prometheus.CounterVec
	hedges       *prometheus.CounterVec
	firstEvent   *prometheus.HistogramVec
	tokens       *prometheus.CounterVec
	retries      *prometheus.CounterVec
	exhausted    *prometheus.CounterVec
	state        prometheus.Collector
	quotaSkips   *prometheus.CounterVec
	keys         prometheus.Collector
	resumes      *prometheus.CounterVec
	resumeIn     *prometheus.CounterVec
	discovers    *prometheus.CounterVec
	translations *prometheus.CounterVec
	routePicks   *prometheus.CounterVec
	purposeToks  *prometheus.CounterVec
	spend        *prometheus.CounterVec

	// series caches the children every request records (its outcome, the
	// winner's result, first event and tokens): finding one by its label
	// values hashes and checks them each time, several per request. The
	// label values come from configuration and fixed sets, so it stays
	// small.
	// It is read without a lock (a map replaced whole when a series is
	// added, which happens a few times per label value, ever) and keyed
	// by plain values: no interface to hash or compare.
	series   atomic.Pointer[map[seriesKey]any] // → prometheus.Counter or prometheus.Observer
	seriesMu sync.Mutex                        // serializes the additions
}

type seriesKey struct {
	vec  *prometheus.MetricVec // the CounterVec's or HistogramVec's
	n    int                   // how many label values: 1 (a) or 2 (a, b)
	a, b string
}

// cached returns the series of k, made by mk (once) when it is new.
func (m *handlerMetrics) cached(k seriesKey, mk func() any) any {
	if v, ok := m.loadSeries()[k]; ok {
		return v
	}
	m.seriesMu.Lock()
	defer m.seriesMu.Unlock()
	next := maps.Clone(m.loadSeries()) // nil when there is none yet
	if v, ok := next[k]; ok {
		return v
	}
	if next == nil {
		next = make(map[seriesKey]any)
	}
	v := mk()
	next[k] = v
	m.series.Store(&next)
	return v
}

// loadSeries is the current cache, nil before its first series.
func (m *handlerMetrics) loadSeries() map[seriesKey]any {
	if p := m.series.Load(); p != nil {
		return *p
	}
	return nil
}

// counter1 is vec's child for the one label value a; counter2 for two.
func (m *handlerMetrics) counter1(vec *prometheus.CounterVec, a string) prometheus.Counter {
	return m.counter(seriesKey{vec.MetricVec, 1, a, ""}, vec)
}

func (m *handlerMetrics) counter2(vec *prometheus.CounterVec, a, b string) prometheus.Counter {
	return m.counter(seriesKey{vec.MetricVec, 2, a, b}, vec)
}

func (m *handlerMetrics) counter(k seriesKey, vec *prometheus.CounterVec) prometheus.Counter {
	return m.cached(k, func() any { return vec.WithLabelValues([]string{k.a, k.b}[:k.n]...) }).(prometheus.Counter)
}

// observer is vec's child for the one label value a.
func (m *handlerMetrics) observer(vec *prometheus.HistogramVec, a string) prometheus.Observer {
	k := seriesKey{vec: vec.MetricVec, n: 1, a: a}
	return m.cached(k, func() any { return vec.WithLabelValues(a) }).(prometheus.Observer)
}

const ns, sub = "caddy", "llm_hedge"

func newHandlerMetrics() *handlerMetrics {
	return &handlerMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "requests_total",
			Help: "Requests on every path the handler answers (completions, models list, token counts, forwarded and refused calls), by outcome."}, []string{"outcome"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "attempts_total",
			Help: "Upstream attempts by provider and result (won, lost, failed_<class>)."}, []string{"provider", "result"}),
		hedges: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "hedges_total",
			Help: "Hedge attempts launched, by the provider they went to."}, []string{"provider"}),
		firstEvent: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "first_event_seconds",
			Help:    "Time from sending an attempt to its first valid event (non-stream: the whole response), winners only.",
			Buckets: []float64{0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 8, 13, 20, 30, 45, 60}}, []string{"provider"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "tokens_total",
			Help: "Tokens reported by providers for winning attempts, by kind (input, output, cache_read, cache_write)."}, []string{"provider", "kind"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "retries_total",
			Help: "Same-provider retries scheduled, by provider and the failure class that caused them."}, []string{"provider", "reason"}),
		exhausted: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "budget_exhausted_total",
			Help: "Hedges or retries refused because their budget was spent."}, []string{"kind"}),
		state: stateCollector{desc: prometheus.NewDesc(ns+"_"+sub+"_provider_state",
			"Breaker state of each provider: 0 closed, 1 half_open, 2 open.", []string{"provider"}, nil)},
		quotaSkips: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "quota_skips_total",
			Help: "Providers skipped without an attempt because every key was out of quota or cooling."}, []string{"provider"}),
		resumes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "resume_total",
			Help: "Mid-stream continuations of a cut stream, by outcome (completed, diverged, prefill_rejected, failed, ineligible, budget_exhausted)."}, []string{"outcome"}),
		resumeIn: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "resume_input_tokens_total",
			Help: "Input tokens the continuations' providers reported: the price of continuing, by provider."}, []string{"provider"}),
		discovers: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "discoveries_total",
			Help: "Discoveries of a provider-held object this instance did not know, by outcome (found, not_found)."}, []string{"outcome"}),
		translations: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "translations_total",
			Help: "Attempts on a provider serving another format by translation, by provider, client format and outcome (sent; skipped: a material loss, nothing sent)."}, []string{"provider", "client", "outcome"}),
		routePicks: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "route_picks_total",
			Help: "Providers a request's first attempt went to within a tier of two or more, by provider and why (least_cost, explore, weighted, first, affinity, affinity_moved, fallthrough)."}, []string{"provider", "reason"}),
		purposeToks: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "purpose_tokens_total",
			Help: "Tokens every attempt used, by provider, purpose (answer, hedge, continuation, failed) and kind (input, input_estimated, output, cache_read, cache_write)."}, []string{"provider", "purpose", "kind"}),
		spend: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "spend_usd_total",
			Help: "US dollars the attempts cost at the configured prices, by provider and purpose (answer, hedge, continuation, failed); no series without a price."}, []string{"provider", "purpose"}),
		keys: keyCollector{
			state: prometheus.NewDesc(ns+"_"+sub+"_key_state",
				"State of each configured key, by fingerprint: 0 ok, 1 cooling, 2 exhausted, 3 disabled.", []string{"provider", "key"}, nil),
			remaining: prometheus.NewDesc(ns+"_"+sub+"_quota_remaining",
				"What a key has left as its provider's rate-limit headers last said, by kind (requests, tokens).", []string{"provider", "key", "kind"}, nil),
		},
	}
}

func provisionMetrics(ctx caddy.Context) (*handlerMetrics, error) {
	metricsOnce.Do(func() { collectors = newHandlerMetrics() })
	reg := ctx.GetMetricsRegistry()
	if reg == nil {
		return collectors, nil
	}
	for _, c := range collectors.all() {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, err
			}
		}
	}
	return collectors, nil
}

// all is every collector the handler registers (the README's metrics table
// lists their series; TestReadmeMetricsTable compares the two).
func (m *handlerMetrics) all() []prometheus.Collector {
	return []prometheus.Collector{m.requests, m.attempts, m.hedges, m.firstEvent, m.tokens, m.retries,
		m.exhausted, m.state, m.quotaSkips, m.keys, m.resumes, m.resumeIn, m.discovers, m.translations, m.routePicks, m.purposeToks, m.spend}
}

// The recording methods do nothing on a nil *handlerMetrics, so a handler
// built without Provision (a benchmark of the bare request path) runs
// without metrics rather than panicking.

func (m *handlerMetrics) request(outcome string) {
	if m != nil {
		m.counter1(m.requests, outcome).Inc()
	}
}

func (m *handlerMetrics) attempt(provider, res string) {
	if m != nil {
		m.attempts.WithLabelValues(provider, res).Inc()
	}
}

func (m *handlerMetrics) hedgeLaunched(provider string) {
	if m != nil {
		m.hedges.WithLabelValues(provider).Inc()
	}
}

func (m *handlerMetrics) retry(provider, reason string) {
	if m != nil {
		m.retries.WithLabelValues(provider, reason).Inc()
	}
}

func (m *handlerMetrics) budgetExhausted(kind string) {
	if m != nil {
		m.exhausted.WithLabelValues(kind).Inc()
	}
}

func (m *handlerMetrics) resumed(outcome string) {
	if m != nil {
		m.resumes.WithLabelValues(outcome).Inc()
	}
}

// continuation counts a continuation attempt and its tokens: its input
// (the whole prompt again: the price of continuing) in
// resume_input_tokens_total, its output and cache tokens in tokens_total,
// as its provider bills them.
func (m *handlerMetrics) continuation(provider string, u *wire.Usage) {
	if m == nil {
		return
	}
	m.attempts.WithLabelValues(provider, "resumed").Inc()
	if u.Input > 0 {
		m.resumeIn.WithLabelValues(provider).Add(float64(u.Input))
	}
	m.addTokens(provider, wire.Usage{Output: u.Output, CacheRead: u.CacheRead, CacheWrite: u.CacheWrite})
}

func (m *handlerMetrics) routePick(provider, why string) {
	if m != nil {
		m.counter2(m.routePicks, provider, why).Inc()
	}
}

func (m *handlerMetrics) quotaSkip(provider string) {
	if m != nil {
		m.quotaSkips.WithLabelValues(provider).Inc()
	}
}

// won counts a committed attempt (result won, or failed_stream_<reason>
// when its stream broke), its first event and the tokens it reported.
func (m *handlerMetrics) won(provider, result string, firstEventSeconds float64, u *wire.Usage) {
	if m == nil {
		return
	}
	m.counter2(m.attempts, provider, result).Inc()
	m.observer(m.firstEvent, provider).Observe(firstEventSeconds)
	m.addTokens(provider, *u)
}

func (m *handlerMetrics) addTokens(provider string, u wire.Usage) {
	for _, t := range []struct {
		kind string
		n    int64
	}{{"input", u.Input}, {"output", u.Output}, {"cache_read", u.CacheRead}, {"cache_write", u.CacheWrite}} {
		if t.n > 0 {
			m.counter2(m.tokens, provider, t.kind).Add(float64(t.n))
		}
	}
}

// stateCollector reports the breaker state of every provider in the shared
// health pool at scrape time, so the gauge can never go stale. Two handlers
// may name different upstreams with one provider name (two health
// entries): the name is reported once, with the worst state, so a scrape
// never holds a duplicate series and does not depend on map order.
type stateCollector struct{ desc *prometheus.Desc }

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	now := engine.Now()
	worst := map[string]health.State{}
	providerPool.Range(func(_, v any) bool {
		if ph, ok := v.(*health.Provider); ok {
			worst[ph.Name] = max(worst[ph.Name], ph.State(now)) // a missing name reads as closed, the least
		}
		return true
	})
	for name, s := range worst {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(s), name)
	}
}

// keyCollector reports every configured key's state and remaining quota at
// scrape time, by fingerprint. A name shared by two health entries (two
// upstreams under one name) reports each fingerprint once, the first seen.
type keyCollector struct{ state, remaining *prometheus.Desc }

func (c keyCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.state; ch <- c.remaining }

func (c keyCollector) Collect(ch chan<- prometheus.Metric) {
	now := engine.Now().UnixNano()
	var hs []*health.Provider
	providerPool.Range(func(_, v any) bool {
		if ph, ok := v.(*health.Provider); ok {
			hs = append(hs, ph)
		}
		return true
	})
	seen := map[[2]string]bool{}
	for _, ph := range hs {
		for _, k := range ph.Keys.All() {
			id := [2]string{ph.Name, k.Fp}
			if seen[id] {
				continue
			}
			seen[id] = true
			ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, float64(keyStateValue(k.State(now))), ph.Name, k.Fp)
			if n, ok := health.Left(k.ReqLeft.Load(), k.ReqReset.Load(), now); ok {
				ch <- prometheus.MustNewConstMetric(c.remaining, prometheus.GaugeValue, float64(n), ph.Name, k.Fp, "requests")
			}
			if n, ok := health.Left(k.TokLeft.Load(), k.TokReset.Load(), now); ok {
				ch <- prometheus.MustNewConstMetric(c.remaining, prometheus.GaugeValue, float64(n), ph.Name, k.Fp, "tokens")
			}
		}
	}
}

// keyStateValue is a key state's value in the key_state gauge.
func keyStateValue(s string) int {
	switch s {
	case health.KeyCooling:
		return 1
	case health.KeyExhausted:
		return 2
	case health.KeyDisabled:
		return 3
	}
	return 0
}

// discovered counts a discovery that ended: found or not_found.
func (m *handlerMetrics) discovered(outcome string) {
	if m != nil {
		m.discovers.WithLabelValues(outcome).Inc()
	}
}

func (m *handlerMetrics) translation(provider, client, result string) {
	if m != nil {
		m.translations.WithLabelValues(provider, client, result).Inc()
	}
}

// cost counts one attempt's tokens by purpose, and its price when known.
func (m *handlerMetrics) cost(c *engine.Cost, usd float64, priced bool) {
	if m == nil {
		return
	}
	input := "input"
	if c.Estimated {
		input = "input_estimated"
	}
	for _, t := range []struct {
		kind string
		n    int64
	}{{input, c.Input}, {"output", c.Output}, {"cache_read", c.CacheRead}, {"cache_write", c.CacheWrite}} {
		if t.n > 0 {
			m.purposeToks.WithLabelValues(c.Provider, c.Purpose, t.kind).Add(float64(t.n))
		}
	}
	if priced {
		m.spend.WithLabelValues(c.Provider, c.Purpose).Add(usd)
	}
}
