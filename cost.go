package llmhedge

import (
	"fmt"
	"path"

	"github.com/llmhedge/caddy-llm-hedge/internal/engine"
)

// What reliability costs (docs/cost.md): the operator's prices turn each
// attempt's tokens, by purpose (the answer, hedges, continuations, failed
// attempts a provider bills), into dollars. No price is built in: a list
// shipped with the module would go stale; without a price the tokens are
// still counted, and no money is.

// Price is what one model costs, in US dollars per million tokens.
type Price struct {
	// Glob of the model the provider served (or was asked), e.g.
	// `claude-sonnet-*`; `*` matches every model.
	Model string `json:"model"`
	// Uncached input tokens and output tokens.
	Input  float64 `json:"input"`
	Output float64 `json:"output"`
	// Cached input read and cache writes. Default: the input price (set
	// your provider's discount or premium).
	CacheRead  *float64 `json:"cache_read,omitempty"`
	CacheWrite *float64 `json:"cache_write,omitempty"`
}

func (p *Price) check() error {
	if p.Model == "" {
		return fmt.Errorf("price: a model glob is required")
	}
	if _, err := path.Match(p.Model, ""); err != nil {
		return fmt.Errorf("price %s: model glob: %w", p.Model, err)
	}
	for _, v := range []*float64{&p.Input, &p.Output, p.CacheRead, p.CacheWrite} {
		if v != nil && *v < 0 {
			return fmt.Errorf("price %s: a negative price", p.Model)
		}
	}
	return nil
}

// usd is what c costs at p.
func (p *Price) usd(c *engine.Cost) float64 {
	read, write := p.Input, p.Input
	if p.CacheRead != nil {
		read = *p.CacheRead
	}
	if p.CacheWrite != nil {
		write = *p.CacheWrite
	}
	return (float64(c.Input)*p.Input + float64(c.Output)*p.Output + float64(c.CacheRead)*read + float64(c.CacheWrite)*write) / 1e6
}

// prices finds the price of a provider's model: the provider's own price
// lines first, then the handler's, the first glob that matches.
type prices struct {
	byProvider map[string][]Price
	handler    []Price
}

func newPrices(h *Handler) *prices {
	ps := &prices{handler: h.Prices, byProvider: map[string][]Price{}}
	for _, p := range h.Providers {
		if len(p.Prices) > 0 {
			ps.byProvider[p.Name] = p.Prices
		}
	}
	if len(ps.handler) == 0 && len(ps.byProvider) == 0 {
		return nil
	}
	return ps
}

func (ps *prices) of(provider, model string) (*Price, bool) {
	if ps == nil {
		return nil, false
	}
	for _, list := range [2][]Price{ps.byProvider[provider], ps.handler} {
		for i := range list {
			if engine.GlobMatch(list[i].Model, model) {
				return &list[i], true
			}
		}
	}
	return nil, false
}

// spend counts a finished request's tokens by purpose and prices them:
// the request's spend and the part of it reliability cost (every purpose
// but the answer), and whether any attempt had a price.
func (o *observer) spend(rep *engine.Report) (total, overhead float64, priced bool) {
	for i := range rep.Costs {
		c := &rep.Costs[i]
		p, ok := o.prices.of(c.Provider, c.Model)
		usd := 0.0
		if ok {
			usd, priced = p.usd(c), true
			total += usd
			if c.Purpose != engine.PurposeAnswer {
				overhead += usd
			}
		}
		o.metrics.cost(c, usd, ok)
	}
	return total, overhead, priced
}
