package llmhedge

import (
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/llmhedge/caddy-llm-hedge/internal/engine"
	"github.com/llmhedge/caddy-llm-hedge/internal/routing"
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
//			translate   <client-format...>
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
//		lb_policy adaptive|weighted_random|first
//		max_body <size>
//		forward <path-glob>...
//	}
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	lines := optionLines{}
	for d.NextBlock(0) {
		opt := d.Val()
		if opt != "provider" && opt != "forward" && opt != "price" {
			if err := lines.once(d, opt); err != nil {
				return err
			}
		}
		var err error
		switch opt {
		case "provider":
			err = h.parseProvider(d, lines)
		case "timeouts":
			err = h.parseTimeouts(d, lines)
		case "hedge":
			err = h.parseHedge(d, lines)
		case "retry":
			err = h.parseRetry(d, lines)
		case "cooldown":
			err = h.parseCooldown(d, lines)
		case "stream":
			err = h.parseStream(d, lines)
		case "affinity":
			err = h.parseAffinity(d)
		case "lb_policy":
			var a []string
			if a = d.RemainingArgs(); len(a) != 1 {
				return d.ArgErr()
			}
			if _, ok := routing.ParsePolicy(a[0]); !ok || a[0] == "" {
				return d.Errf("lb_policy %q: want %s, %s or %s", a[0], routing.NameAdaptive, routing.NameWeightedRandom, routing.NameFirst)
			}
			h.LBPolicy = a[0]
		case "max_body":
			var n int64
			n, err = sizeArg(d)
			h.MaxBody = n
		case "price":
			var p Price
			if p, err = parsePrice(d); err == nil {
				h.Prices = append(h.Prices, p)
			}
		case "forward":
			a := d.RemainingArgs()
			if len(a) == 0 {
				return d.ArgErr()
			}
			for _, g := range a {
				if gerr := engine.CheckForwardGlob(g); gerr != nil {
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
	// Providers and timeouts come in any order: their conflict is known at the end.
	if opt, err := h.timeoutConflict(); err != nil {
		return errAt(lines[opt], "%v", err)
	}
	return nil
}

func (h *Handler) parseTimeouts(d *caddyfile.Dispenser, lines optionLines) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if err := lines.once(d, "timeouts "+d.Val()); err != nil {
			return err
		}
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

func (h *Handler) parseRetry(d *caddyfile.Dispenser, lines optionLines) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if opt := d.Val(); opt != "fallback_model" && opt != "context_fallback" {
			if err := lines.once(d, "retry "+opt); err != nil {
				return err
			}
		}
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

func (h *Handler) parseCooldown(d *caddyfile.Dispenser, lines optionLines) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if err := lines.once(d, "cooldown "+d.Val()); err != nil {
			return err
		}
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

func (h *Handler) parseStream(d *caddyfile.Dispenser, lines optionLines) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if opt := d.Val(); opt != "reject" {
			if err := lines.once(d, "stream "+opt); err != nil {
				return err
			}
		}
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
		case "resume":
			n := 0
			if !d.NextArg() {
				return d.ArgErr()
			}
			if d.Val() != "off" {
				if n, err = strconv.Atoi(d.Val()); err != nil || n < 0 {
					return d.Errf("resume: want a count >= 0 or off, got %q", d.Val())
				}
			}
			if d.NextArg() {
				return d.ArgErr()
			}
			h.Stream.Resume = &n
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
	case len(a) > 1 && a[0] == "off":
		return d.Errf("affinity: off conflicts with %s: a disabled affinity has no header or ttl", a[1])
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

var _ caddyfile.Unmarshaler = (*Handler)(nil)
