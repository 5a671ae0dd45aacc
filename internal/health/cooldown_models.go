package health

import "time"

// A model cooldown skips one model on one provider (a 404 saying the model
// does not exist there, a cloud's "no access to the model") while the
// provider stays healthy for every other model.

// modelCooldownLimit bounds the per-provider map of cooled-down models:
// model names come from clients, and a client cycling through invented
// names must not grow it without limit.
const ModelCooldownLimit = 256

// modelCooling reports whether model is cooling down on this provider.
func (ph *Provider) ModelCooling(now time.Time, model string) bool {
	m := ph.Models.Load()
	if m == nil || model == "" {
		return false
	}
	until, ok := (*m)[model]
	return ok && now.UnixNano() < until
}

// coolModel skips model on this provider until now+d. The copy drops expired
// entries and, when still full, the entry that ends first.
func (ph *Provider) CoolModel(now time.Time, model string, d time.Duration) {
	if model == "" {
		return
	}
	t, until := now.UnixNano(), now.Add(d).UnixNano()
	for {
		old := ph.Models.Load()
		next := make(map[string]int64)
		if old != nil {
			for k, v := range *old {
				if v > t {
					next[k] = v
				}
			}
		}
		if _, ok := next[model]; !ok && len(next) >= ModelCooldownLimit {
			var first string
			for k, v := range next {
				if first == "" || v < next[first] {
					first = k
				}
			}
			delete(next, first)
		}
		next[model] = max(next[model], until)
		if ph.Models.CompareAndSwap(old, &next) {
			return
		}
	}
}
