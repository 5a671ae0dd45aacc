package llmhedge

import (
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/dustin/go-humanize"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/headers"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("llm_hedge", parseCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("llm_hedge", httpcaddyfile.Before, "reverse_proxy")
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	m := new(Handler)
	err := m.UnmarshalCaddyfile(h.Dispenser)
	return m, err
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens. Syntax:
//
//	llm_hedge [<matcher>] {
//		provider <name> <base_url> {
//			api         anthropic|openai
//			key         <api-key>
//			vendor      <name>
//			priority    <int>
//			weight      <int>
//			models      <glob...>
//			model       <from|*> <to>
//			header_up   [+|-]<field> [<value>]
//			max_in_flight <n>
//			first_byte_timeout <duration>
//			tls_trusted_ca <pem-file>
//		}
//		timeouts {
//			connect    <duration>
//			first_byte <duration>
//			response   <duration>
//			idle       <duration>
//			total      <duration>
//		}
//		hedge {
//			after        <duration>|p<N>
//			min          <duration>
//			max          <duration>
//			max_attempts <n>
//			budget       <percent>
//			off
//		}
//		retry {
//			attempts        <n>
//			same_provider   <n>
//			backoff         <base> <max>
//			retry_after_max <duration>
//			budget          <percent>
//			fallback_model  <from> <to>
//			context_fallback <from> <to>
//		}
//		cooldown {
//			failures <n>
//			duration <duration>
//			max      <duration>
//		}
//		stream {
//			reject <phrase>...
//			drop_malformed [on|off]
//			max_buffer <size>
//		}
//		affinity off|header <name> [ttl <duration>]
//		max_body <size>
//		forward <path-glob>...
//	}
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		var err error
		switch d.Val() {
		case "provider":
			err = h.parseProvider(d)
		case "timeouts":
			err = h.parseTimeouts(d)
		case "hedge":
			err = h.parseHedge(d)
		case "retry":
			err = h.parseRetry(d)
		case "cooldown":
			err = h.parseCooldown(d)
		case "stream":
			err = h.parseStream(d)
		case "affinity":
			err = h.parseAffinity(d)
		case "max_body":
			var n int64
			n, err = sizeArg(d)
			h.MaxBody = n
		case "forward":
			a := d.RemainingArgs()
			if len(a) == 0 {
				return d.ArgErr()
			}
			for _, g := range a {
				if gerr := checkForwardGlob(g); gerr != nil {
					return d.Errf("forward: %v", gerr)
				}
			}
			h.Forward = append(h.Forward, a...)
		default:
			return d.Errf("unknown subdirective %q", d.Val())
		}
		if err != nil {
			return err
		}
	}
	if len(h.Providers) == 0 {
		return d.Err("llm_hedge: at least one provider is required")
	}
	return nil
}

func (h *Handler) parseProvider(d *caddyfile.Dispenser) error {
	args := d.RemainingArgs()
	if len(args) != 2 {
		return d.Errf("provider: want <name> <base_url>, got %d arguments", len(args))
	}
	for _, p := range h.Providers {
		if p.Name == args[0] {
			return d.Errf("provider %q: duplicate name", args[0])
		}
	}
	if !strings.HasPrefix(args[1], "http://") && !strings.HasPrefix(args[1], "https://") {
		return d.Errf("provider %q: base_url %q must start with http:// or https://", args[0], args[1])
	}
	if u, err := url.Parse(args[1]); err != nil {
		return d.Errf("provider %q: base_url: %v", args[0], err)
	} else if err := checkBaseURL(u); err != nil {
		return d.Errf("provider %q: base_url %q: %v", args[0], u.Redacted(), err)
	}
	p := &Provider{Name: args[0], BaseURL: args[1]}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		var err error
		switch opt {
		case "api":
			p.API, err = oneArg(d)
			_, cloud := parseProtocol(p.API)
			if _, ok := parseDialect(p.API); err == nil && !cloud && (!ok || p.API == "") {
				return d.Errf("api: %q is not anthropic, openai or gemini (want one of %s)", p.API, apiNames())
			}
		case "region":
			p.Region, err = oneArg(d)
		case "project":
			p.Project, err = oneArg(d)
		case "aws_profile":
			p.AWSProfile, err = oneArg(d)
		case "key":
			// One key stays `key` in JSON, as before; several are `keys`.
			if p.Key != "" || len(p.Keys) > 0 {
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
	if err := checkCloudOptions(p); err != nil {
		return d.Errf("provider %q: %v", p.Name, err)
	}
	h.Providers = append(h.Providers, p)
	return nil
}

func (h *Handler) parseTimeouts(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var target *caddy.Duration
		switch d.Val() {
		case "connect":
			target = &h.Timeouts.Connect
		case "first_byte":
			target = &h.Timeouts.FirstByte
		case "response":
			target = &h.Timeouts.Response
		case "idle":
			target = &h.Timeouts.Idle
		case "total":
			target = &h.Timeouts.Total
		default:
			return d.Errf("timeouts: unknown option %q", d.Val())
		}
		v, err := durationArg(d)
		if err != nil {
			return err
		}
		*target = v
	}
	return nil
}

func (h *Handler) parseHedge(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		if d.Val() == "off" && !d.NextArg() {
			h.Hedge.Off = true
			return nil
		}
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch d.Val() {
		case "after":
			var v string
			if v, err = oneArg(d); err != nil {
				return err
			}
			if strings.HasPrefix(v, "p") {
				pct, perr := strconv.ParseFloat(v[1:], 64)
				if perr != nil || pct <= 0 || pct >= 100 {
					return d.Errf("hedge after: %q is not a percentile like p90", v)
				}
				h.Hedge.Percentile, h.Hedge.Delay = pct, 0
			} else {
				dur, derr := caddy.ParseDuration(v)
				if derr != nil || dur <= 0 {
					return d.Errf("hedge after: %q is not a positive duration or a percentile like p90", v)
				}
				h.Hedge.Delay, h.Hedge.Percentile = caddy.Duration(dur), 0
			}
		case "min":
			h.Hedge.Min, err = durationArg(d)
		case "max":
			h.Hedge.Max, err = durationArg(d)
		case "max_attempts":
			h.Hedge.MaxAttempts, err = intArg(d, 1)
			if err == nil && h.Hedge.MaxAttempts > maxHedgeAttempts {
				return d.Errf("hedge max_attempts: %d is above %d", h.Hedge.MaxAttempts, maxHedgeAttempts)
			}
		case "budget":
			var pct float64
			pct, err = percentArg(d)
			h.Hedge.Budget = &pct
		case "off":
			if d.NextArg() {
				return d.ArgErr()
			}
			h.Hedge.Off = true
		default:
			return d.Errf("hedge: unknown option %q", d.Val())
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (h *Handler) parseRetry(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch d.Val() {
		case "attempts":
			h.Retry.Attempts, err = intArg(d, 1)
		case "same_provider":
			var n int
			n, err = intArg(d, 0)
			h.Retry.SameProvider = &n
		case "backoff":
			a := d.RemainingArgs()
			if len(a) != 2 {
				return d.Errf("retry backoff: want <base> <max>")
			}
			base, e1 := caddy.ParseDuration(a[0])
			mx, e2 := caddy.ParseDuration(a[1])
			if e1 != nil || e2 != nil || base <= 0 || mx < base {
				return d.Errf("retry backoff: want two positive durations, base <= max; got %q %q", a[0], a[1])
			}
			h.Retry.BackoffBase, h.Retry.BackoffMax = caddy.Duration(base), caddy.Duration(mx)
		case "retry_after_max":
			h.Retry.RetryAfterMax, err = durationArg(d)
		case "budget":
			var pct float64
			pct, err = percentArg(d)
			h.Retry.Budget = &pct
		case "fallback_model":
			a := d.RemainingArgs()
			if len(a) != 2 {
				return d.Errf("retry fallback_model: want <from> <to>")
			}
			h.Retry.FallbackModels = append(h.Retry.FallbackModels, ModelRule{From: a[0], To: a[1]})
		case "context_fallback":
			a := d.RemainingArgs()
			if len(a) != 2 {
				return d.Errf("retry context_fallback: want <from> <to>")
			}
			h.Retry.ContextFallbacks = append(h.Retry.ContextFallbacks, ModelRule{From: a[0], To: a[1]})
		default:
			return d.Errf("retry: unknown option %q", d.Val())
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (h *Handler) parseCooldown(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch d.Val() {
		case "failures":
			h.Cooldown.Failures, err = intArg(d, 1)
		case "duration":
			h.Cooldown.Duration, err = durationArg(d)
		case "max":
			h.Cooldown.Max, err = durationArg(d)
		default:
			return d.Errf("cooldown: unknown option %q", d.Val())
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (h *Handler) parseStream(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch d.Val() {
		case "reject":
			a := d.RemainingArgs()
			if len(a) == 0 {
				return d.ArgErr()
			}
			h.Stream.Reject = append(h.Stream.Reject, a...)
		case "drop_malformed":
			on := true
			if d.NextArg() {
				switch d.Val() {
				case "on":
				case "off":
					on = false
				default:
					return d.Errf("drop_malformed: want on or off, got %q", d.Val())
				}
				if d.NextArg() {
					return d.ArgErr()
				}
			}
			h.Stream.DropMalformed = &on
		case "max_buffer":
			h.Stream.MaxBuffer, err = sizeArg(d)
		default:
			return d.Errf("stream: unknown option %q", d.Val())
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (h *Handler) parseAffinity(d *caddyfile.Dispenser) error {
	a := d.RemainingArgs()
	switch {
	case len(a) == 1 && a[0] == "off":
		h.Affinity.Off = true
	case (len(a) == 2 || len(a) == 4) && a[0] == "header":
		h.Affinity.Header = a[1]
		if len(a) == 4 {
			if a[2] != "ttl" {
				return d.Errf("affinity: unknown option %q", a[2])
			}
			ttl, err := caddy.ParseDuration(a[3])
			if err != nil || ttl <= 0 {
				return d.Errf("affinity ttl: %q is not a positive duration", a[3])
			}
			h.Affinity.TTL = caddy.Duration(ttl)
		}
	case len(a) == 2 && a[0] == "ttl":
		ttl, err := caddy.ParseDuration(a[1])
		if err != nil || ttl <= 0 {
			return d.Errf("affinity ttl: %q is not a positive duration", a[1])
		}
		h.Affinity.TTL = caddy.Duration(ttl)
	default:
		return d.Errf("affinity: want off, header <name> [ttl <duration>], or ttl <duration>")
	}
	return nil
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

func sizeArg(d *caddyfile.Dispenser) (int64, error) {
	opt := d.Val()
	v, err := oneArg(d)
	if err != nil {
		return 0, err
	}
	n, err := humanize.ParseBytes(v)
	if err != nil || n == 0 || n > 1<<40 {
		return 0, d.Errf("%s: %q is not a size like 32MiB", opt, v)
	}
	return int64(n), nil
}

var _ caddyfile.Unmarshaler = (*Handler)(nil)
