package llmhedge

import (
	"embed"
	"fmt"
	"io/fs"
	"net/http"
	"strings"

	"go.uber.org/zap"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/llmhedge/caddy-llm-hedge/internal/dashboard"
	"github.com/llmhedge/caddy-llm-hedge/internal/engine"
	"github.com/llmhedge/caddy-llm-hedge/internal/health"
)

// board is what the live dashboard shows (admin /llm_hedge/recent,
// /llm_hedge/series, /llm_hedge/overview, /llm_hedge/feed and
// /llm_hedge/ui/, and the llm_hedge_dashboard handler): the last requests,
// per-provider time series, the overview strip and the feed of
// transitions, of fixed size, shared by every llm_hedge site of the
// process like providerPool.
var board dashboard.Board

// configuredProvider reports whether a provider name is in a loaded
// config: the providers the health pool holds.
func configuredProvider() func(string) bool {
	names := map[string]bool{}
	providerPool.Range(func(_, val any) bool {
		if ph, ok := val.(*health.Provider); ok {
			names[ph.Name] = true
		}
		return true
	})
	return func(n string) bool { return names[n] }
}

// dashboardAssets is the page and its vendored chart library (uPlot, MIT,
// its licence alongside): the page works from the binary alone, offline.
//
//go:embed dashboard_ui
var dashboardAssets embed.FS

var dashboardUI, _ = fs.Sub(dashboardAssets, "dashboard_ui")

func init() {
	caddy.RegisterModule(DashboardHandler{})
	httpcaddyfile.RegisterHandlerDirective("llm_hedge_dashboard", parseDashboardCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("llm_hedge_dashboard", httpcaddyfile.Before, "reverse_proxy")
}

// resetCheck says whether a dashboard mount takes a reset request: nil
// when it takes none (read-only), else a check that returns why it
// refuses this one.
type resetCheck func(*http.Request) error

// adminResets takes every reset that reached it: Caddy's admin endpoint
// has applied its own origin policy (enforce_origin, origins) before.
func adminResets(*http.Request) error { return nil }

// siteResets is the check of a site mount's resets: a browser attaches
// the site's basic_auth or forward_auth credentials to a POST another web
// site's page sends, so a reset whose Sec-Fetch-Site, or else Origin, is
// not the page's own is refused (net/http's CrossOriginProtection). A
// request with neither header is not a browser's cross-site request (curl,
// a script) and is taken.
var siteResets resetCheck = http.NewCrossOriginProtection().Check

// serveDashboard serves the dashboard's page and the JSON it reads, by the
// end of the path, so it works wherever it is mounted: .../ui/<asset>,
// .../providers, .../recent, .../series, .../overview, .../feed and, when resets is not nil and
// lets the request through, POST .../providers/<name>/reset. handled is
// false for any other path.
func serveDashboard(w http.ResponseWriter, r *http.Request, logger *zap.Logger, resets resetCheck) (handled bool, err error) {
	path := r.URL.Path
	if i := strings.LastIndex(path, "/ui/"); i >= 0 {
		if path[i+len("/ui/"):] == "config.json" { // what the page may offer
			return true, writeAdminJSON(w, map[string]bool{"resets": resets != nil})
		}
		return true, serveDashboardAsset(w, r, path[i+len("/ui/"):])
	}
	trimmed := strings.TrimSuffix(path, "/")
	switch {
	case strings.HasSuffix(trimmed, "/ui"):
		http.Redirect(w, r, trimmed+"/", http.StatusFound)
		return true, nil
	case strings.HasSuffix(trimmed, "/recent"):
		if r.Method != http.MethodGet {
			return true, adminMethodNotAllowed(w, r, http.MethodGet)
		}
		return true, writeAdminJSON(w, board.Recent.Snapshot())
	case strings.HasSuffix(trimmed, "/series"):
		if r.Method != http.MethodGet {
			return true, adminMethodNotAllowed(w, r, http.MethodGet)
		}
		w.Header().Set("Content-Type", "application/json")
		board.Series.Retain(configuredProvider())
		all := board.Series.Snapshot(engine.Now())
		_, err := w.Write(dashboard.AppendJSON(make([]byte, 0, 4096+len(all)*dashboard.Buckets*20), all))
		return true, err
	case strings.HasSuffix(trimmed, "/overview"):
		if r.Method != http.MethodGet {
			return true, adminMethodNotAllowed(w, r, http.MethodGet)
		}
		return true, writeAdminJSON(w, board.Overview.Snapshot(engine.Now()))
	case strings.HasSuffix(trimmed, "/feed"):
		if r.Method != http.MethodGet {
			return true, adminMethodNotAllowed(w, r, http.MethodGet)
		}
		return true, writeAdminJSON(w, board.Feed.Snapshot())
	case strings.HasSuffix(trimmed, "/providers"):
		return true, adminProviders{}.handleList(w, r)
	}
	if i := strings.LastIndex(trimmed, "/providers/"); i >= 0 {
		if name, ok := strings.CutSuffix(trimmed[i+len("/providers/"):], adminResetSuffix); ok && name != "" {
			if resets == nil {
				return true, caddy.APIError{HTTPStatus: http.StatusForbidden, Err: fmt.Errorf("resets are not enabled here")}
			}
			if err := resets(r); err != nil {
				return true, caddy.APIError{HTTPStatus: http.StatusForbidden, Err: fmt.Errorf("reset of %q refused: %w", name, err)}
			}
			return true, adminProviders{logger: logger}.handleReset(w, r, name)
		}
	}
	return false, nil
}

func serveDashboardAsset(w http.ResponseWriter, r *http.Request, name string) error {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return adminMethodNotAllowed(w, r, http.MethodGet)
	}
	if name == "" {
		name = "index.html"
	}
	if _, err := fs.Stat(dashboardUI, name); err != nil {
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("no dashboard asset %q", name)}
	}
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:")
	http.ServeFileFS(w, r, dashboardUI, name)
	return nil
}

// DashboardHandler serves the live dashboard in a site, read-only unless
// Resets is set, so an operator can put basic_auth or forward_auth in
// front of it instead of exposing the admin API:
//
//	handle /llm_hedge/* {
//		basic_auth { ... }
//		llm_hedge_dashboard
//	}
type DashboardHandler struct {
	// Allow POST .../providers/<name>/reset from this site. Default false.
	// A reset another web site's page sends (its Sec-Fetch-Site, or else
	// its Origin, is not this site) is refused with 403.
	Resets bool `json:"resets,omitempty"`

	logger *zap.Logger
}

// CaddyModule returns the Caddy module information.
func (DashboardHandler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.llm_hedge_dashboard",
		New: func() caddy.Module { return new(DashboardHandler) },
	}
}

// Provision takes the logger of the reset lines.
func (d *DashboardHandler) Provision(ctx caddy.Context) error {
	d.logger = ctx.Logger()
	return nil
}

// ServeHTTP serves the dashboard; a path it does not know goes to next.
func (d *DashboardHandler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	var resets resetCheck
	if d.Resets {
		resets = siteResets
	}
	handled, err := serveDashboard(w, r, d.logger, resets)
	if !handled {
		return next.ServeHTTP(w, r)
	}
	if apiErr, ok := err.(caddy.APIError); ok {
		return caddyhttp.Error(apiErr.HTTPStatus, apiErr.Err)
	}
	return err
}

// parseDashboardCaddyfile reads:
//
//	llm_hedge_dashboard [{
//		resets on|off
//	}]
func parseDashboardCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	d := new(DashboardHandler)
	return d, d.UnmarshalCaddyfile(h.Dispenser)
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens.
func (d *DashboardHandler) UnmarshalCaddyfile(disp *caddyfile.Dispenser) error {
	disp.Next() // the directive name
	if disp.NextArg() {
		return disp.ArgErr()
	}
	for disp.NextBlock(0) {
		switch disp.Val() {
		case "resets":
			if !disp.NextArg() {
				return disp.ArgErr()
			}
			switch disp.Val() {
			case "on":
				d.Resets = true
			case "off":
				d.Resets = false
			default:
				return disp.Errf("resets: want on or off, got %q", disp.Val())
			}
			if disp.NextArg() {
				return disp.ArgErr()
			}
		default:
			return disp.Errf("unknown llm_hedge_dashboard option %q", disp.Val())
		}
	}
	return nil
}

// Interface guards
var (
	_ caddy.Provisioner           = (*DashboardHandler)(nil)
	_ caddyhttp.MiddlewareHandler = (*DashboardHandler)(nil)
	_ caddyfile.Unmarshaler       = (*DashboardHandler)(nil)
)
