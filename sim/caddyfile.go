package sim

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("llm_sim", parseCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("llm_sim", httpcaddyfile.Before, "respond")
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	sim := new(Handler)
	if err := sim.UnmarshalCaddyfile(h.Dispenser); err != nil {
		return nil, err
	}
	return sim, nil
}

// UnmarshalCaddyfile sets up the simulator from Caddyfile tokens. Syntax:
//
//	llm_sim [<matcher>] {
//		first_token <duration>       # delay before the first content delta; default 0
//		slow        <percent> <duration>  # that share of requests waits <duration> instead
//		jitter      <percent>        # first-token delay times a uniform draw in [1-p%, 1+p%]; default 0
//		token_delay <duration>       # between deltas; default 0
//		tokens      <n>              # deltas (output tokens) per response; default 12
//		text        <string...>      # response text, split into the deltas
//		model       <name>           # reported instead of the requested model
//		pings       <n>              # Anthropic pings before the first delta; default 1
//		cache_read  <n>              # reported cache-read input tokens; default 0
//		key         <value>...       # API keys accepted (any of them); default any
//		quota requests|tokens <n> per <duration>  # per key; over it 429 until the window ends
//		prefill     on|off|restart   # continue a conversation ending in an assistant turn; off: 400 "... assistant message prefill ..."; restart: the whole answer; default on
//		sampling    deterministic|sampled  # sampled: the words after the first two reordered per request; default deterministic
//		seed        <n>              # seed of the random choices; default the clock
//		length_stop                  # text answers end at the output-token limit (max_tokens, length, MAX_TOKENS, incomplete)
//		require_thinking_signatures  # Anthropic's 400s for unsigned thinking and a tool-use cycle without it, with thinking on
//		tool_call   <name> [<arguments>]  # a scripted tool loop: call this tool (arguments a JSON object) when offered; repeatable
//		tool_answer <text...>        # the answer after a tool result; {result} is its text; default "The tool returned: {result}"
//		fault <kind> [status <code>] [percent <p>] [count <n>] [after <n>] [retry_after <value>] [no_retry] [model <glob>] [header <field>] [turn tool_call|tool_result] [delay <duration>] [message <text>]
//	}
//
// Fault kinds: status, fake200, cut, stall, malformed, reset, context_length
// (the 400 of a prompt over the context window, worded per dialect). fault is
// repeatable; the first fault that matches a request applies.
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		var err error
		switch sub := d.Val(); sub {
		case "first_token":
			h.FirstToken, err = durationArg(d, sub)
		case "slow":
			err = h.unmarshalSlow(d)
		case "jitter":
			err = h.unmarshalJitter(d)
		case "token_delay":
			h.TokenDelay, err = durationArg(d, sub)
		case "tokens":
			h.Tokens, err = intArg(d, sub, 1, maxTokens)
		case "text":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.ArgErr()
			}
			h.Text = strings.Join(args, " ")
		case "model":
			h.Model, err = oneArg(d)
		case "pings":
			var n int
			n, err = intArg(d, sub, 0, maxTokens)
			h.Pings = &n
		case "cache_read":
			h.CacheRead, err = intArg(d, sub, 0, 1<<40)
		case "key":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.ArgErr()
			}
			h.Key = args[0]
			if len(args) > 1 {
				h.Keys = args[1:]
			}
		case "quota":
			err = h.unmarshalQuota(d)
		case "wire":
			h.Wire, err = oneArg(d)
		case "region":
			h.Region, err = oneArg(d)
		case "aws_access_key":
			h.AWSAccessKey, err = oneArg(d)
		case "aws_secret_key":
			h.AWSSecretKey, err = oneArg(d)
		case "prefill":
			if h.Prefill, err = oneArg(d); err == nil && h.Prefill != PrefillOn && h.Prefill != PrefillOff && h.Prefill != PrefillRestart {
				return d.Errf("prefill %q: want on, off or restart", h.Prefill)
			}
		case "sampling":
			if h.Sampling, err = oneArg(d); err == nil && h.Sampling != SamplingDeterministic && h.Sampling != SamplingSampled {
				return d.Errf("sampling %q: want deterministic or sampled", h.Sampling)
			}
		case "seed":
			var v string
			if v, err = oneArg(d); err == nil {
				if h.Seed, err = strconv.ParseInt(v, 10, 64); err != nil {
					return d.Errf("seed %q: not an integer", v)
				}
			}
		case "length_stop":
			if d.NextArg() {
				return d.ArgErr()
			}
			h.LengthStop = true
		case "require_thinking_signatures":
			if d.NextArg() {
				return d.ArgErr()
			}
			h.RequireThinkingSignatures = true
		case "tool_call":
			args := d.RemainingArgs()
			if len(args) < 1 || len(args) > 2 {
				return d.ArgErr()
			}
			tc := ToolCall{Name: args[0]}
			if len(args) == 2 {
				tc.Arguments = json.RawMessage(args[1])
			}
			if err := tc.Validate(); err != nil {
				return d.Errf("%v", err)
			}
			h.ToolCalls = append(h.ToolCalls, tc)
		case "tool_answer":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.ArgErr()
			}
			h.ToolAnswer = strings.Join(args, " ")
		case "fault":
			var f Fault
			if f, err = unmarshalFault(d); err == nil {
				h.Faults = append(h.Faults, f)
			}
		default:
			return d.Errf("unknown subdirective %q", sub)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// unmarshalQuota reads `quota requests|tokens <n> per <duration>`.
func (h *Handler) unmarshalQuota(d *caddyfile.Dispenser) error {
	args := d.RemainingArgs()
	if len(args) != 4 || args[2] != "per" {
		return d.Errf("quota: want requests|tokens <n> per <duration>")
	}
	n, err := strconv.ParseInt(args[1], 10, 64)
	if err != nil || n < 0 {
		return d.Errf("quota %s %q: not a count", args[0], args[1])
	}
	dur, err := parseDuration(d, "quota", args[3])
	if err != nil {
		return err
	}
	if dur <= 0 {
		return d.Errf("quota: the window must be positive")
	}
	q := &Quota{N: n, Per: dur}
	switch args[0] {
	case "requests":
		h.QuotaRequests = q
	case "tokens":
		h.QuotaTokens = q
	default:
		return d.Errf("quota %q: want requests or tokens", args[0])
	}
	return nil
}

// unmarshalSlow reads `slow <percent> <duration>`.
func (h *Handler) unmarshalSlow(d *caddyfile.Dispenser) error {
	args := d.RemainingArgs()
	if len(args) != 2 {
		return d.ArgErr()
	}
	p, err := parsePercent(d, args[0])
	if err != nil {
		return err
	}
	dur, err := parseDuration(d, "slow", args[1])
	if err != nil {
		return err
	}
	h.SlowPercent, h.SlowFirstToken = p, dur
	return nil
}

// unmarshalJitter reads the rest of a `jitter <percent>` line.
func (h *Handler) unmarshalJitter(d *caddyfile.Dispenser) error {
	args := d.RemainingArgs()
	if len(args) != 1 {
		return d.ArgErr()
	}
	p, err := parsePercent(d, args[0])
	if err != nil {
		return err
	}
	h.FirstTokenJitter = p
	return nil
}

// unmarshalFault reads the rest of a `fault <kind> [options]` line.
func unmarshalFault(d *caddyfile.Dispenser) (Fault, error) {
	var f Fault
	if !d.NextArg() {
		return f, d.ArgErr()
	}
	f.Kind = FaultKind(d.Val())
	if !validKind(f.Kind) {
		return f, d.Errf("fault: unknown kind %q (want one of %v)", f.Kind, faultKinds)
	}
	for d.NextArg() {
		var err error
		switch opt := d.Val(); opt {
		case "status":
			f.Status, err = optionInt(d, "fault status", 100, 599)
		case "percent":
			var v string
			if v, err = nextArg(d); err == nil {
				f.Percent, err = parsePercent(d, v)
			}
		case "count":
			f.Count, err = optionInt(d, "fault count", 0, 1<<40)
		case "after":
			f.After, err = optionInt(d, "fault after", 0, maxTokens)
		case "retry_after":
			f.RetryAfter, err = nextArg(d)
		case "no_retry":
			f.NoRetry = true
		case "model":
			f.Model, err = nextArg(d)
		case "header":
			f.Header, err = nextArg(d)
		case "turn":
			f.Turn, err = nextArg(d)
		case "message":
			f.Message, err = nextArg(d)
		case "delay":
			var v string
			if v, err = nextArg(d); err == nil {
				f.Delay, err = parseDuration(d, "fault delay", v)
			}
		default:
			return f, d.Errf("fault: unknown option %q", opt)
		}
		if err != nil {
			return f, err
		}
	}
	if err := f.Validate(); err != nil {
		return f, d.Errf("fault %s: %v", f.Kind, err)
	}
	return f, nil
}

// nextArg reads the value of an option on the same line.
func nextArg(d *caddyfile.Dispenser) (string, error) {
	if !d.NextArg() {
		return "", d.ArgErr()
	}
	return d.Val(), nil
}

// oneArg reads the single argument of a subdirective.
func oneArg(d *caddyfile.Dispenser) (string, error) {
	v, err := nextArg(d)
	if err == nil && d.NextArg() {
		return "", d.ArgErr()
	}
	return v, err
}

func durationArg(d *caddyfile.Dispenser, name string) (caddy.Duration, error) {
	v, err := oneArg(d)
	if err != nil {
		return 0, err
	}
	return parseDuration(d, name, v)
}

func parseDuration(d *caddyfile.Dispenser, name, v string) (caddy.Duration, error) {
	dur, err := caddy.ParseDuration(v)
	if err != nil {
		return 0, d.Errf("%s %q: %v", name, v, err)
	}
	if dur < 0 {
		return 0, d.Errf("%s %v: must not be negative", name, dur)
	}
	return caddy.Duration(dur), nil
}

// intArg reads the single argument of the subdirective name, an integer
// in [lo, hi].
func intArg(d *caddyfile.Dispenser, name string, lo, hi int) (int, error) {
	v, err := oneArg(d)
	if err != nil {
		return 0, err
	}
	return parseInt(d, name, v, lo, hi)
}

// optionInt reads the value of the option name within a line, an integer in
// [lo, hi].
func optionInt(d *caddyfile.Dispenser, name string, lo, hi int) (int, error) {
	v, err := nextArg(d)
	if err != nil {
		return 0, err
	}
	return parseInt(d, name, v, lo, hi)
}

func parseInt(d *caddyfile.Dispenser, name, v string, lo, hi int) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, d.Errf("%s %q: not an integer", name, v)
	}
	if n < lo || n > hi {
		return 0, d.Errf("%s %d: must be between %d and %d", name, n, lo, hi)
	}
	return n, nil
}

// parsePercent reads "10" or "10%".
func parsePercent(d *caddyfile.Dispenser, v string) (float64, error) {
	p, err := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64)
	if err != nil {
		return 0, d.Errf("percent %q: not a number", v)
	}
	if err := validPercent(p); err != nil {
		return 0, d.Errf("%v", err)
	}
	return p, nil
}
