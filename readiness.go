package llmhedge

import (
	"net/http"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
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
