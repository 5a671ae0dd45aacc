package llmhedge

// Checks shared by the two ways of writing a config: the Caddyfile refuses
// these at adapt time with the line, a JSON config at provision with the
// field.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmhedge/caddy-llm-hedge/internal/routing"
)

// effective is a duration as it runs: the value written, else the default.
func effective(d caddy.Duration, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return time.Duration(d)
}

// byDefault marks a value in a message as the default rather than written.
func byDefault(d caddy.Duration) string {
	if d == 0 {
		return " (the default)"
	}
	return ""
}

// clampConflict refuses an adaptive-delay clamp whose min is above its
// max, each as it runs (written or default).
func (c *HedgeConfig) clampConflict() error {
	lo, hi := effective(c.Min, defaultHedgeMin), effective(c.Max, defaultHedgeMax)
	if lo > hi {
		return fmt.Errorf("hedge: min %s%s is above max %s%s", lo, byDefault(c.Min), hi, byDefault(c.Max))
	}
	return nil
}

// timeoutConflict refuses a per-attempt timeout written longer than the
// whole request's (written or default): it could never fire. It returns
// the offending option as the Caddyfile parser records it, to name its line.
func (h *Handler) timeoutConflict() (string, error) {
	total := effective(h.Timeouts.Total, defaultTotalTimeout)
	longer := func(name string, d caddy.Duration) error {
		if time.Duration(d) <= total {
			return nil
		}
		return fmt.Errorf("%s %s is longer than timeouts total %s%s: it could never fire",
			name, time.Duration(d), total, byDefault(h.Timeouts.Total))
	}
	if err := longer("timeouts: first_byte", h.Timeouts.FirstByte); err != nil {
		return "timeouts first_byte", err
	}
	if err := longer("timeouts: response", h.Timeouts.Response); err != nil {
		return "timeouts response", err
	}
	for _, p := range h.Providers {
		if err := longer(fmt.Sprintf("provider %q: first_byte_timeout", p.Name), p.FirstByteTimeout); err != nil {
			return providerOption(p.Name, "first_byte_timeout"), err
		}
	}
	return "", nil
}

// literalKey reports whether a provider key is written in the config
// itself rather than taken from the environment.
func literalKey(pc *Provider) bool {
	for _, k := range append([]string{pc.Key}, pc.Keys...) {
		if k != "" && !strings.Contains(k, "{") {
			return true
		}
	}
	return false
}

// providerOption is the path under which the parser records a provider's option.
func providerOption(name, opt string) string { return fmt.Sprintf("provider %q %s", name, opt) }

// checkConfig refuses, for a config written in JSON, what the Caddyfile
// refuses at adapt time: settings that contradict each other and values
// that would silently be replaced. It runs before the defaults are set,
// while an unset field is still zero.
func (h *Handler) checkConfig() error {
	for i := range h.Prices {
		if err := h.Prices[i].check(); err != nil {
			return err
		}
	}
	for _, pc := range h.Providers {
		for i := range pc.Prices {
			if err := pc.Prices[i].check(); err != nil {
				return fmt.Errorf("provider %q: %w", pc.Name, err)
			}
		}
	}
	if c := &h.Hedge; c.Off {
		for _, f := range []struct {
			name string
			set  bool
		}{
			{"delay", c.Delay != 0}, {"percentile", c.Percentile != 0}, {"min", c.Min != 0},
			{"max", c.Max != 0}, {"max_attempts", c.MaxAttempts != 0}, {"budget", c.Budget != nil},
			{"budget_tokens", c.BudgetTokens}, {"large_prompt", c.LargePrompt != nil},
		} {
			if f.set {
				return fmt.Errorf("hedge: off conflicts with %s: with hedging off no other hedge field applies", f.name)
			}
		}
	}
	if lp := h.Hedge.LargePrompt; lp != nil && (lp.Tokens <= 0 || lp.After <= 0) {
		return fmt.Errorf("hedge: large_prompt needs positive tokens and a positive delay")
	}
	if h.Hedge.Delay != 0 && h.Hedge.Percentile != 0 {
		return fmt.Errorf("hedge: delay and percentile are both set: the delay is fixed or adaptive, not both")
	}
	if err := h.Hedge.clampConflict(); err != nil {
		return err
	}
	if c := h.Affinity; c.Off && (c.Header != "" || c.TTL != 0) {
		return fmt.Errorf("affinity: off conflicts with header and ttl: a disabled affinity has neither")
	}
	if _, err := h.timeoutConflict(); err != nil {
		return err
	}
	if _, ok := routing.ParsePolicy(h.LBPolicy); !ok {
		return fmt.Errorf("lb_policy %q: want %s, %s or %s", h.LBPolicy, routing.NameAdaptive, routing.NameWeightedRandom, routing.NameFirst)
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"max_body", h.MaxBody}, {"stream.max_buffer", h.Stream.MaxBuffer}} {
		switch {
		case f.v < 0:
			return fmt.Errorf("%s: negative size", f.name)
		case f.v > maxSize:
			return fmt.Errorf("%s: %d bytes is over 1TiB, the largest size the proxy takes", f.name, f.v)
		}
	}
	for i, p := range h.Providers {
		for _, f := range []struct {
			name string
			v    int64
		}{
			{"weight", int64(p.Weight)}, {"max_in_flight", int64(p.MaxInFlight)},
			{"first_byte_timeout", int64(p.FirstByteTimeout)},
		} {
			if f.v < 0 {
				return fmt.Errorf("providers[%d] (%q): %s is negative; leave it out for the default", i, p.Name, f.name)
			}
		}
	}
	return nil
}

// UnmarshalJSON decodes the handler's config as Caddy decodes a module's
// (unknown fields are errors) and names the field of a value that does not
// decode: a caddy.Duration's own error does not say where it was.
func (h *Handler) UnmarshalJSON(b []byte) error {
	type plain Handler
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	err := dec.Decode((*plain)(h))
	if err == nil {
		return nil
	}
	if _, named := errors.AsType[*json.UnmarshalTypeError](err); named {
		return err // it names its field already
	}
	if field := failingField(b, reflect.TypeFor[plain]()); field != "" {
		return fmt.Errorf("%s: %w", strings.TrimPrefix(field, "."), err)
	}
	return err
}

// failingField finds the path (".timeouts.idle", ".providers[0].weight")
// of the value in raw that does not decode into t, by decoding each field
// on its own.
func failingField(raw []byte, t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		var fields map[string]json.RawMessage
		if json.Unmarshal(raw, &fields) != nil {
			return ""
		}
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			v, ok := fields[name]
			if !ok || name == "" || name == "-" || json.Unmarshal(v, reflect.New(f.Type).Interface()) == nil {
				continue
			}
			return "." + name + failingField(v, f.Type)
		}
	case reflect.Slice:
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			return ""
		}
		for i, v := range items {
			if json.Unmarshal(v, reflect.New(t.Elem()).Interface()) != nil {
				return fmt.Sprintf("[%d]", i) + failingField(v, t.Elem())
			}
		}
	}
	return ""
}
