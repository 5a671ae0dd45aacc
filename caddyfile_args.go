package llmhedge

// Argument readers of the llm_hedge Caddyfile.

import (
	"fmt"
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
