package llmhedge

// Argument readers of the llm_hedge Caddyfile.

import (
	"strconv"
	"strings"

	"github.com/dustin/go-humanize"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

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
