package llmhedge

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/dustin/go-humanize"
	"go.uber.org/zap"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmhedge/caddy-llm-hedge/internal/engine"
	"github.com/llmhedge/caddy-llm-hedge/internal/health"
)

func init() {
	caddy.RegisterModule(adminProviders{})
}

// adminProviders is the admin API module that shows the health of every
// llm_hedge provider and resets a provider's breaker (and re-enables its
// disabled keys):
//
//	GET  /llm_hedge/providers[?format=json|text]
//	POST /llm_hedge/providers/<name>/reset
//	GET  /llm_hedge/recent, /llm_hedge/series, /llm_hedge/overview, /llm_hedge/feed, /llm_hedge/ui/ (dashboard.go)
type adminProviders struct {
	logger *zap.Logger // the reset lines
}

// Provision takes the module's logger. An admin router's context names
// no module, so the name is given as Caddy's own admin API does.
func (a *adminProviders) Provision(caddy.Context) error {
	a.logger = caddy.Log().Named("admin.api.llm_hedge")
	return nil
}

// CaddyModule returns the Caddy module information.
func (adminProviders) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "admin.api.llm_hedge",
		New: func() caddy.Module { return new(adminProviders) },
	}
}

// Routes returns one route for the /llm_hedge/ subtree: Caddy's admin mux
// matches by prefix, so serveAdmin dispatches the rest itself.
func (a adminProviders) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{
		{
			Pattern: "/llm_hedge/",
			Handler: caddy.AdminHandlerFunc(a.serveAdmin),
		},
	}
}

const (
	adminProvidersPath = "/llm_hedge/providers"
	adminResetSuffix   = "/reset"
)

func (a adminProviders) serveAdmin(w http.ResponseWriter, r *http.Request) error {
	path := strings.TrimSuffix(r.URL.Path, "/")
	if path == adminProvidersPath {
		return a.handleList(w, r)
	}
	if handled, err := serveDashboard(w, r, a.logger, adminResets); handled {
		return err
	}
	rest, ok := strings.CutPrefix(path, adminProvidersPath+"/")
	if name, isReset := strings.CutSuffix(rest, adminResetSuffix); ok && isReset && name != "" {
		return a.handleReset(w, r, name)
	}
	return caddy.APIError{
		HTTPStatus: http.StatusNotFound,
		Err:        fmt.Errorf("no llm_hedge admin endpoint at %s", r.URL.Path),
	}
}

// handleList serves GET /llm_hedge/providers: JSON by default, a table for a
// terminal with ?format=text; another format is a 400, not a silent JSON.
func (adminProviders) handleList(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet {
		return adminMethodNotAllowed(w, r, http.MethodGet)
	}
	format := r.URL.Query().Get("format")
	if format != "" && format != "json" && format != "text" {
		return caddy.APIError{
			HTTPStatus: http.StatusBadRequest,
			Err:        fmt.Errorf("format %q: want json or text", format),
		}
	}
	now := engine.Now()
	views := providerViews(now, func(*health.Provider) bool { return true })
	if format == "text" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := writeProviderTable(w, now, views); err != nil {
			return caddy.APIError{HTTPStatus: http.StatusInternalServerError, Err: fmt.Errorf("writing provider table: %w", err)}
		}
		return nil
	}
	return writeAdminJSON(w, views)
}

// handleReset serves POST /llm_hedge/providers/<name>/reset: every entry of
// that name (one per base URL) is closed, and the new views are returned.
func (a adminProviders) handleReset(w http.ResponseWriter, r *http.Request, name string) error {
	if r.Method != http.MethodPost {
		return adminMethodNotAllowed(w, r, http.MethodPost)
	}
	matches := func(ph *health.Provider) bool { return ph.Name == name }
	obs := &observer{logger: a.logger} // the transitions: the feed, and a line each when there is a log
	found := false
	providerPool.Range(func(_, val any) bool {
		if ph, ok := val.(*health.Provider); ok && matches(ph) {
			engine.ResetBreaker(obs, ph)
			found = true
		}
		return true
	})
	if !found {
		return caddy.APIError{
			HTTPStatus: http.StatusNotFound,
			Err:        fmt.Errorf("no llm_hedge provider named %q", name),
		}
	}
	return writeAdminJSON(w, providerViews(engine.Now(), matches))
}

func adminMethodNotAllowed(w http.ResponseWriter, r *http.Request, allow string) error {
	w.Header().Set("Allow", allow)
	return caddy.APIError{
		HTTPStatus: http.StatusMethodNotAllowed,
		Err:        fmt.Errorf("method %s not allowed on %s", r.Method, r.URL.Path),
	}
}

// providerViews snapshots the providers that keep selects, sorted by name
// then the URL as shown. The snapshots are taken outside the pool's lock.
func providerViews(now time.Time, keep func(*health.Provider) bool) []providerView {
	var hs []*health.Provider
	providerPool.Range(func(_, val any) bool {
		if ph, ok := val.(*health.Provider); ok && keep(ph) {
			hs = append(hs, ph)
		}
		return true
	})
	views := make([]providerView, 0, len(hs))
	for _, ph := range hs {
		v := snapshot(ph, now)
		v.MaxInFlight = maxInFlightOf(v.Name)
		v.Routing = snapshotRouting(ph, now)
		views = append(views, v)
	}
	tierRouting(views)
	sort.Slice(views, func(i, j int) bool {
		if views[i].Name != views[j].Name {
			return views[i].Name < views[j].Name
		}
		return views[i].URL < views[j].URL
	})
	return views
}

// maxInFlight is each provider's max_in_flight (0: unlimited) as last
// provisioned, by name, for the admin view: the page shows the in-flight
// attempts against it.
var maxInFlight sync.Map

func noteMaxInFlight(name string, max int) { maxInFlight.Store(name, int64(max)) }

func maxInFlightOf(name string) int64 {
	v, _ := maxInFlight.Load(name)
	n, _ := v.(int64)
	return n
}

func writeAdminJSON(w http.ResponseWriter, v any) error {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(v); err != nil {
		return caddy.APIError{HTTPStatus: http.StatusInternalServerError, Err: fmt.Errorf("encoding response: %w", err)}
	}
	return nil
}

// writeProviderTable writes views as an aligned table for a terminal.
func writeProviderTable(w io.Writer, now time.Time, views []providerView) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tURL\tVENDOR\tSTATE\tFAILS IN A ROW\tIN FLIGHT\tREQUESTS\tFAILURES\tHEDGES WON/LOST\tTOKENS IN/OUT\tFIRST EVENT p50/p95\tROUTE COST/SHARE\tLAST ERROR")
	for _, v := range views {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s/%s\t%s/%s\t%s\t%s\t%s\n",
			v.Name, v.URL, dashIfEmpty(v.Vendor), breakerText(now, v),
			v.ConsecutiveFailures, v.InFlight,
			shortCount(v.Requests), shortCount(v.Failures),
			shortCount(v.HedgesWon), shortCount(v.HedgesLost),
			shortCount(v.Tokens.Input), shortCount(v.Tokens.Output),
			firstEventCell(v), routeCell(v), lastFailureCell(now, v.LastError))
		for _, mc := range v.ModelCooldowns {
			until, _ := time.Parse(time.RFC3339, mc.Until)
			fmt.Fprintf(tw, "  model %s\t\t\tcooling for %s\t\t\t\t\t\t\t\t\t\n", mc.Model, shortSpan(now, until))
		}
		for _, k := range v.Keys {
			fmt.Fprintf(tw, "  key %s\t\t\t%s\t\t%d\t\t\t\t\t\t\t\n", k.Fingerprint, k.State, k.InFlight)
		}
	}
	return tw.Flush()
}

func breakerText(now time.Time, v providerView) string {
	switch v.State {
	case health.StateOpen.String():
		return "open for " + shortSpan(now, v.openUntil)
	case health.StateHalfOpen.String():
		return "half_open (probing)"
	}
	return v.State
}

func firstEventCell(v providerView) string {
	if v.FirstEventP50Ms == nil || v.FirstEventP95Ms == nil {
		return "-"
	}
	return fmt.Sprintf("%s/%s ms", humanize.FtoaWithDigits(*v.FirstEventP50Ms, 0), humanize.FtoaWithDigits(*v.FirstEventP95Ms, 0))
}

func lastFailureCell(now time.Time, le *lastErrorView) string {
	if le == nil {
		return "-"
	}
	at, err := time.Parse(time.RFC3339, le.At)
	if err != nil {
		return le.Class
	}
	return le.Class + " " + shortSpan(at, now) + " ago"
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// shortCount is n in short SI form: 950, 1.2k, 3.5M.
func shortCount(n int64) string {
	return strings.ReplaceAll(humanize.SIWithDigits(float64(n), 1, ""), " ", "")
}

// shortSpanUnits makes humanize print "25s", "4m", "2h" rather than "25 seconds".
var shortSpanUnits = []humanize.RelTimeMagnitude{
	{D: time.Minute, Format: "%ds", DivBy: time.Second},
	{D: time.Hour, Format: "%dm", DivBy: time.Minute},
	{D: humanize.Day, Format: "%dh", DivBy: time.Hour},
	{D: math.MaxInt64, Format: "%dd", DivBy: humanize.Day},
}

// shortSpan is the time from a to b, shortly.
func shortSpan(a, b time.Time) string {
	return humanize.CustomRelTime(a, b, "", "", shortSpanUnits)
}

// firstEventQuantiles reports a provider's first-event latency quantiles for
// the admin view (tests swap it); while it is nil, or returns !ok, the view
// omits the fields.
var firstEventQuantiles = latencyQuantiles

// latencyQuantiles is a provider's recent first-event p50/p95, from the
// same estimator that drives the hedge delay.
func latencyQuantiles(ph *health.Provider) (p50, p95 time.Duration, ok bool) {
	if ph.Latency == nil {
		return 0, 0, false
	}
	now := engine.Now()
	p50, ok50 := ph.Latency.Overall(0.5, now)
	p95, ok95 := ph.Latency.Overall(0.95, now)
	return p50, p95, ok50 && ok95
}

// providerView is a provider as the admin API shows it. It carries no key
// and no header value: nothing here could hold one.
type providerView struct {
	Name                string              `json:"name"`
	URL                 string              `json:"url"`
	Vendor              string              `json:"vendor"`
	State               string              `json:"state"`
	ConsecutiveFailures int64               `json:"consecutive_failures"`
	OpenUntil           string              `json:"open_until,omitempty"`
	InFlight            int64               `json:"in_flight"`
	MaxInFlight         int64               `json:"max_in_flight"` // 0: unlimited
	Requests            int64               `json:"requests"`
	Failures            int64               `json:"failures"`
	HedgesWon           int64               `json:"hedges_won"`
	HedgesLost          int64               `json:"hedges_lost"`
	Tokens              tokensView          `json:"tokens"`
	LastError           *lastErrorView      `json:"last_error,omitempty"`
	ModelCooldowns      []modelCooldownView `json:"model_cooldowns,omitempty"`
	FirstEventP50Ms     *float64            `json:"first_event_p50_ms,omitempty"`
	FirstEventP95Ms     *float64            `json:"first_event_p95_ms,omitempty"`
	HedgeDelayMs        *float64            `json:"hedge_delay_ms,omitempty"` // the last one armed on it
	Keys                []keyView           `json:"keys,omitempty"`
	Routing             *routingView        `json:"routing,omitempty"` // admin_routing.go

	// openUntil is kept for the text view, which shows it relative to now.
	openUntil time.Time
}

// keyView is one configured key: its fingerprint, never the key.
type keyView struct {
	Fingerprint       string `json:"fingerprint"`
	State             string `json:"state"`
	RequestsRemaining *int64 `json:"requests_remaining,omitempty"`
	RequestsReset     string `json:"requests_reset,omitempty"`
	TokensRemaining   *int64 `json:"tokens_remaining,omitempty"`
	TokensReset       string `json:"tokens_reset,omitempty"`
	CoolingUntil      string `json:"cooling_until,omitempty"`
	InFlight          int64  `json:"in_flight"`
}

func viewKey(k *health.Key, now time.Time) keyView {
	t := now.UnixNano()
	v := keyView{Fingerprint: k.Fp, State: k.State(t), InFlight: k.InFlight.Load()}
	if n, ok := health.Left(k.ReqLeft.Load(), k.ReqReset.Load(), t); ok {
		v.RequestsRemaining = &n
		if r := k.ReqReset.Load(); r != 0 {
			v.RequestsReset = viewTime(time.Unix(0, r))
		}
	}
	if n, ok := health.Left(k.TokLeft.Load(), k.TokReset.Load(), t); ok {
		v.TokensRemaining = &n
		if r := k.TokReset.Load(); r != 0 {
			v.TokensReset = viewTime(time.Unix(0, r))
		}
	}
	if c := k.CoolUntil.Load(); c > t {
		v.CoolingUntil = viewTime(time.Unix(0, c))
	}
	return v
}

type tokensView struct {
	Input      int64 `json:"input"`
	Output     int64 `json:"output"`
	CacheRead  int64 `json:"cache_read"`
	CacheWrite int64 `json:"cache_write"`
}

type lastErrorView struct {
	Class   string `json:"class"`
	Message string `json:"message,omitempty"` // redacted (loggedError): no key, no URL query
	At      string `json:"at"`
}

type modelCooldownView struct {
	Model string `json:"model"`
	Until string `json:"until"`
}

// snapshot reads the provider's state for the admin view. Fields are read
// one by one, so a snapshot taken under load may mix adjacent moments.
func snapshot(ph *health.Provider, now time.Time) providerView {
	v := providerView{
		Name:                ph.Name,
		URL:                 engine.RedactedBaseURL(ph.BaseURL),
		State:               ph.State(now).String(),
		ConsecutiveFailures: ph.Consecutive.Load(),
		InFlight:            ph.InFlight.Load(),
		Requests:            ph.Requests.Load(),
		Failures:            ph.Failures.Load(),
		HedgesWon:           ph.HedgesWon.Load(),
		HedgesLost:          ph.HedgesLost.Load(),
		Tokens: tokensView{
			Input:      ph.TokensIn.Load(),
			Output:     ph.TokensOut.Load(),
			CacheRead:  ph.TokensCacheRead.Load(),
			CacheWrite: ph.TokensCacheWrite.Load(),
		},
		openUntil: ph.OpenUntil(),
	}
	if vendor := ph.Vendor.Load(); vendor != nil {
		v.Vendor = *vendor
	}
	if !v.openUntil.IsZero() {
		v.OpenUntil = viewTime(v.openUntil)
	}
	if le := ph.LastErr.Load(); le != nil {
		v.LastError = &lastErrorView{Class: le.Class, Message: le.Msg, At: viewTime(time.Unix(0, le.At))}
	}
	if m := ph.Models.Load(); m != nil {
		t := now.UnixNano()
		for model, until := range *m {
			if until > t {
				v.ModelCooldowns = append(v.ModelCooldowns, modelCooldownView{Model: model, Until: viewTime(time.Unix(0, until))})
			}
		}
		sort.Slice(v.ModelCooldowns, func(i, j int) bool { return v.ModelCooldowns[i].Model < v.ModelCooldowns[j].Model })
	}
	if ph.Latency != nil {
		if d := ph.HedgeDelayNs.Load(); d > 0 {
			ms := viewMs(time.Duration(d))
			v.HedgeDelayMs = &ms
		}
	}
	for _, k := range ph.Keys.All() {
		v.Keys = append(v.Keys, viewKey(k, now))
	}
	if firstEventQuantiles != nil {
		if p50, p95, ok := firstEventQuantiles(ph); ok {
			p50ms, p95ms := viewMs(p50), viewMs(p95)
			v.FirstEventP50Ms, v.FirstEventP95Ms = &p50ms, &p95ms
		}
	}
	return v
}

func viewTime(t time.Time) string {
	return t.UTC().Format(time.RFC3339)
}

// viewMs is d in milliseconds with one decimal.
func viewMs(d time.Duration) float64 {
	return float64(d.Round(100*time.Microsecond)) / float64(time.Millisecond)
}

// Interface guards
var (
	_ caddy.Provisioner = (*adminProviders)(nil)
	_ caddy.AdminRouter = (*adminProviders)(nil)
)
