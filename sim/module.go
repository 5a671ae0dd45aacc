package sim

import (
	"fmt"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	caddy.RegisterModule(Handler{})
}

// Handler is the Caddy module http.handlers.llm_sim: a fake LLM provider
// (Anthropic Messages, OpenAI Chat Completions, OpenAI Responses and
// Gemini, natively or as Bedrock, Vertex AI and Azure OpenAI serve them)
// that answers every request itself, so llm_hedge runs with no keys and no network and
// operators can rehearse failures. It never calls the next handler.
type Handler struct {
	Config

	sim *Simulator
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.llm_sim",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Provision applies the defaults and builds the simulator. Stalled
// requests end when the module is unloaded.
func (h *Handler) Provision(ctx caddy.Context) error {
	h.Config = h.Config.withDefaults()
	sim, err := newSimulator(h.Config, ctx.Done())
	if err != nil {
		return fmt.Errorf("provisioning llm_sim: %w", err)
	}
	h.sim = sim
	return nil
}

// Validate rejects nonsense values: status codes outside 100-599, percents
// outside 0-100, negative durations and counts, unknown fault kinds.
func (h *Handler) Validate() error {
	if err := h.Config.Validate(); err != nil {
		return fmt.Errorf("llm_sim: %w", err)
	}
	return nil
}

// ServeHTTP answers the request as the simulated provider.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	h.sim.ServeHTTP(w, r)
	return nil
}

// Simulator is the provisioned simulator, for runtime control and records.
func (h *Handler) Simulator() *Simulator { return h.sim }

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
	_ caddyfile.Unmarshaler       = (*Handler)(nil)
	_ http.Handler                = (*Simulator)(nil)
)
