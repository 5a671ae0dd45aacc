package llmhedge

// The `provider` block of the llm_hedge Caddyfile (caddyfile.go has the syntax).

import (
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/dustin/go-humanize"
	"github.com/llmhedge/caddy-llm-hedge/internal/engine"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/headers"
)

func (h *Handler) parseProvider(d *caddyfile.Dispenser, lines optionLines) error {
	args := d.RemainingArgs()
	if len(args) != 2 {
		return d.Errf("provider: want <name> <base_url>, got %d arguments", len(args))
	}
	for _, p := range h.Providers {
		if p.Name == args[0] {
			return d.Errf("provider %q: duplicate name", args[0])
		}
	}
	// A placeholder ({env.LLM_URL}) is expanded and checked at provision.
	if !strings.Contains(args[1], "{") {
		if !strings.HasPrefix(args[1], "http://") && !strings.HasPrefix(args[1], "https://") {
			return d.Errf("provider %q: base_url %q must start with http:// or https:// (or be a placeholder such as {env.LLM_URL})", args[0], args[1])
		}
		if u, err := url.Parse(args[1]); err != nil {
			return d.Errf("provider %q: base_url: %v", args[0], err)
		} else if err := engine.CheckBaseURL(u); err != nil {
			return d.Errf("provider %q: base_url %q: %v", args[0], u.Redacted(), err)
		}
	}
	p := &Provider{Name: args[0], BaseURL: args[1]}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		if opt != "model" && opt != "header_up" && opt != "key" && opt != "price" { // key has its own message
			if err := lines.once(d, providerOption(p.Name, opt)); err != nil {
				return err
			}
		}
		var err error
		switch opt {
		case "api":
			p.API, err = oneArg(d)
			if err == nil {
				if err := engine.CheckAPI(p.API); err != nil {
					return d.Errf("%v", err)
				}
			}
		case "region":
			p.Region, err = oneArg(d)
		case "project":
			p.Project, err = oneArg(d)
		case "aws_profile":
			p.AWSProfile, err = oneArg(d)
		case "key":
			// One key stays `key` in JSON, as before; several are `keys`.
			if p.hasKey() {
				return d.Errf("provider %q: key given twice; list every key of the pool on one key line", p.Name)
			}
			a := d.RemainingArgs()
			if len(a) == 0 {
				return d.Errf("key: want <key> [<key>...]")
			}
			for i, k := range a {
				if k == "" {
					return d.Errf("key %d: empty", i+1)
				}
				if slices.Contains(a[:i], k) {
					return d.Errf("key %d: the same key twice in one pool", i+1)
				}
			}
			if len(a) == 1 {
				p.Key = a[0]
			} else {
				p.Keys = a
			}
		case "quota_reserve":
			p.QuotaReserve, err = intArg(d, 0)
			if err == nil && p.QuotaReserve > 100 {
				return d.Errf("quota_reserve: want a percent, 0-100")
			}
		case "vendor":
			p.Vendor, err = oneArg(d)
		case "priority":
			p.Priority, err = intArg(d, -1<<31)
		case "weight":
			p.Weight, err = intArg(d, 1)
		case "models":
			p.Models = d.RemainingArgs()
			if len(p.Models) == 0 {
				return d.ArgErr()
			}
		case "price":
			var pr Price
			if pr, err = parsePrice(d); err == nil {
				p.Prices = append(p.Prices, pr)
			}
		case "translate":
			p.Translate = append(p.Translate, d.RemainingArgs()...)
			if len(p.Translate) == 0 {
				return d.ArgErr()
			}
		case "model":
			a := d.RemainingArgs()
			if len(a) != 2 {
				return d.Errf("model: want <from|*> <to>")
			}
			p.ModelMap = append(p.ModelMap, ModelRule{From: a[0], To: a[1]})
		case "header_up":
			a := d.RemainingArgs()
			if len(a) < 1 || len(a) > 2 {
				return d.Errf("header_up: want [+|-]<field> [<value>]")
			}
			if p.HeadersUp == nil {
				p.HeadersUp = new(headers.HeaderOps)
			}
			val := ""
			if len(a) == 2 {
				val = a[1]
			}
			err = headers.CaddyfileHeaderOp(p.HeadersUp, a[0], val, nil)
		case "prefill":
			var on bool
			on, err = onOff(d, "prefill")
			p.Prefill = &on
		case "max_in_flight":
			p.MaxInFlight, err = intArg(d, 1)
		case "first_byte_timeout":
			var dur caddy.Duration
			dur, err = durationArg(d)
			p.FirstByteTimeout = dur
		case "tls_trusted_ca":
			p.TLSTrustedCA, err = oneArg(d)
		default:
			return d.Errf("provider %q: unknown option %q", p.Name, opt)
		}
		if err != nil {
			return err
		}
	}
	hasKey := p.hasKey()
	if err := p.Options.Check(p.API, hasKey); err != nil {
		return d.Errf("provider %q: %v", p.Name, err)
	}
	if len(p.Translate) > 0 && !hasKey && !engine.CloudAPI(p.API) {
		return d.Errf("provider %q: translate needs the provider's own key (a client's credential never crosses vendors)", p.Name)
	}
	h.Providers = append(h.Providers, p)
	return nil
}

// onOff reads the single on|off argument of an option.
func onOff(d *caddyfile.Dispenser, name string) (bool, error) {
	if !d.NextArg() {
		return false, d.ArgErr()
	}
	v := d.Val()
	if d.NextArg() {
		return false, d.ArgErr()
	}
	switch v {
	case "on":
		return true, nil
	case "off":
		return false, nil
	}
	return false, d.Errf("%s: want on or off, got %q", name, v)
}

func oneArg(d *caddyfile.Dispenser) (string, error) {
	a := d.RemainingArgs()
	if len(a) != 1 {
		return "", d.Errf("%s: want exactly one argument, got %d", d.Val(), len(a))
	}
	return a[0], nil
}

func intArg(d *caddyfile.Dispenser, min int) (int, error) {
	opt := d.Val()
	v, err := oneArg(d)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, d.Errf("%s: %q is not an integer", opt, v)
	}
	if n < min {
		return 0, d.Errf("%s: %d is below the minimum %d", opt, n, min)
	}
	return n, nil
}

func durationArg(d *caddyfile.Dispenser) (caddy.Duration, error) {
	opt := d.Val()
	v, err := oneArg(d)
	if err != nil {
		return 0, err
	}
	dur, err := caddy.ParseDuration(v)
	if err != nil {
		return 0, d.Errf("%s: %q is not a duration: %v", opt, v, err)
	}
	if dur <= 0 {
		return 0, d.Errf("%s: %q must be positive", opt, v)
	}
	return caddy.Duration(dur), nil
}

func percentArg(d *caddyfile.Dispenser) (float64, error) {
	opt := d.Val()
	v, err := oneArg(d)
	if err != nil {
		return 0, err
	}
	pct, err := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64)
	if err != nil || pct < 0 || pct > 100 {
		return 0, d.Errf("%s: %q is not a percentage between 0 and 100", opt, v)
	}
	return pct, nil
}

// maxSize bounds every size option (max_body, stream.max_buffer), in
// the Caddyfile and in JSON: past it, the reads' bounds (size+1) would
// overflow long before any machine could hold such a body.
const maxSize = 1 << 40

func sizeArg(d *caddyfile.Dispenser) (int64, error) {
	opt := d.Val()
	v, err := oneArg(d)
	if err != nil {
		return 0, err
	}
	n, err := humanize.ParseBytes(v)
	if err != nil || n == 0 || n > maxSize {
		return 0, d.Errf("%s: %q is not a size like 32MiB", opt, v)
	}
	return int64(n), nil
}

// optionLines remembers where each single-valued option was written, by
// its path ("hedge after"): a second one is refused rather than silently
// winning, and a conflict found after its block names the line of each side.
type optionLines map[string]caddyfile.Token

// once records the option under the cursor, or refuses it when written before.
func (o optionLines) once(d *caddyfile.Dispenser, path string) error {
	if first, ok := o[path]; ok {
		return d.Errf("%s: given twice (first at %s:%d): write it once", path, first.File, first.Line)
	}
	o[path] = d.Token()
	return nil
}

// last is whichever of the written options came last: the line a conflict
// between them is reported at.
func (o optionLines) last(paths ...string) (caddyfile.Token, bool) {
	var at caddyfile.Token
	found := false
	for _, p := range paths {
		if t, ok := o[p]; ok && (!found || t.File == at.File && t.Line > at.Line) {
			at, found = t, true
		}
	}
	return at, found
}

// errAt is an error at a remembered token, in the form of Dispenser.Errf.
func errAt(at caddyfile.Token, format string, args ...any) error {
	return fmt.Errorf("%s, at %s:%d", fmt.Sprintf(format, args...), at.File, at.Line)
}

// parsePrice reads `price <model-glob> input <usd> output <usd>
// [cache_read <usd>] [cache_write <usd>]`, dollars per million tokens.
func parsePrice(d *caddyfile.Dispenser) (Price, error) {
	a := d.RemainingArgs()
	if len(a) < 5 || len(a)%2 == 0 {
		return Price{}, d.Errf("price: want <model-glob> input <usd-per-Mtok> output <usd-per-Mtok> [cache_read <usd>] [cache_write <usd>]")
	}
	p := Price{Model: a[0]}
	seen := map[string]bool{}
	for i := 1; i < len(a); i += 2 {
		key, val := a[i], a[i+1]
		if seen[key] {
			return Price{}, d.Errf("price %s: %s given twice", p.Model, key)
		}
		seen[key] = true
		v, err := strconv.ParseFloat(strings.TrimPrefix(val, "$"), 64)
		if err != nil || v < 0 || math.IsInf(v, 0) {
			return Price{}, d.Errf("price %s %s: %q is not a price in dollars per million tokens", p.Model, key, val)
		}
		switch key {
		case "input":
			p.Input = v
		case "output":
			p.Output = v
		case "cache_read":
			p.CacheRead = &v
		case "cache_write":
			p.CacheWrite = &v
		default:
			return Price{}, d.Errf("price %s: unknown field %q (input, output, cache_read, cache_write)", p.Model, key)
		}
	}
	if !seen["input"] || !seen["output"] {
		return Price{}, d.Errf("price %s: input and output are required", p.Model)
	}
	if err := p.check(); err != nil {
		return Price{}, d.Errf("%v", err)
	}
	return p, nil
}
