package llmhedge

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/llmhedge/caddy-llm-hedge/internal/engine"
	"github.com/llmhedge/caddy-llm-hedge/internal/health"
)

// Settings that contradict each other, or a second copy of one that
// would silently win, are refused at adapt time on the line written.
func TestCaddyfileConflicts(t *testing.T) {
	const p = "provider a http://127.0.0.1:1\n"
	cases := []struct {
		name, body string
		line       int
		want       string
	}{
		{"hedge off and a hedge block", p + "hedge off\nhedge {\n after 2s\n}\n", 4, "hedge: given twice (first at Testfile:3)"},
		{"hedge off inside the block", p + "hedge {\n after 2s\n off\n}\n", 5, "hedge: off conflicts with after"},
		{"hedge off before an option", p + "hedge {\n off\n budget 5\n}\n", 5, "hedge: off conflicts with budget"},
		{"affinity off with a ttl", p + "affinity off ttl 5m\n", 3, "affinity: off conflicts with ttl"},
		{"affinity twice", p + "affinity off\naffinity ttl 5m\n", 4, "affinity: given twice (first at Testfile:3)"},
		{"timeouts block twice", p + "timeouts {\n idle 5s\n}\ntimeouts {\n total 1m\n}\n", 6, "timeouts: given twice"},
		{"option twice", p + "timeouts {\n idle 5s\n idle 9s\n}\n", 5, "timeouts idle: given twice (first at Testfile:4)"},
		{"max_body twice", p + "max_body 1MiB\nmax_body 2MiB\n", 4, "max_body: given twice"},
		{"retry option twice", p + "retry {\n attempts 2\n attempts 3\n}\n", 5, "retry attempts: given twice"},
		{"provider option twice", "provider a http://x {\n weight 2\n weight 3\n}\n", 4, `provider "a" weight: given twice`},
		{"first_byte over total", p + "timeouts {\n first_byte 2m\n total 1m\n}\n", 4, "timeouts: first_byte 2m0s is longer than timeouts total 1m0s"},
		{"response over default total", p + "timeouts {\n response 20m\n}\n", 4, "longer than timeouts total 15m0s (the default)"},
		{"provider first_byte_timeout over total", "timeouts {\n total 30s\n}\nprovider a http://x {\n first_byte_timeout 1m\n}\n", 6, `provider "a": first_byte_timeout 1m0s is longer`},
		{"hedge min above max", p + "hedge {\n min 3s\n max 2s\n}\n", 5, "hedge: min 3s is above max 2s"},
		{"hedge min above default max", p + "hedge {\n min 10s\n}\n", 4, "hedge: min 10s is above max 8s (the default)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msg := refusedAt(t, tc.body, tc.want)
			if !strings.HasSuffix(msg, "at Testfile:"+itoa(tc.line)) {
				t.Errorf("error %q does not name line %d", msg, tc.line)
			}
		})
	}
	// Repeatable options stay repeatable.
	if _, err := parseHandler("llm_hedge {\nprovider a http://x {\n model a b\n model * c\n header_up +A 1\n header_up +B 2\n}\n" +
		"provider b http://y\nretry {\n fallback_model a b\n fallback_model c d\n}\nstream {\n reject x\n reject y\n}\nforward /a\nforward /b\n}"); err != nil {
		t.Fatal(err)
	}
}

// A JSON config is held to the same rules at provision, and its errors
// name the JSON field.
func TestJSONConfigChecks(t *testing.T) {
	cases := []struct{ name, config, want string }{
		{"negative weight", `{"providers":[{"name":"a","base_url":"http://x","weight":-3}]}`, `providers[0] ("a"): weight is negative`},
		{"hedge off with a field", `{"providers":[{"name":"a","base_url":"http://x"}],"hedge":{"off":true,"min":"1s"}}`, "hedge: off conflicts with min"},
		{"hedge min above max", `{"providers":[{"name":"a","base_url":"http://x"}],"hedge":{"min":"10s"}}`, "hedge: min 10s is above max 8s (the default)"},
		{"unknown lb_policy", `{"providers":[{"name":"a","base_url":"http://x"}],"lb_policy":"round_robin"}`, `lb_policy "round_robin": want adaptive, weighted_random or first`},
		{"affinity off with ttl", `{"providers":[{"name":"a","base_url":"http://x"}],"affinity":{"off":true,"ttl":"5m"}}`, "affinity: off conflicts"},
		{"first_byte over total", `{"providers":[{"name":"a","base_url":"http://x"}],"timeouts":{"first_byte":"2m","total":"1m"}}`, "timeouts: first_byte 2m0s is longer"},
		{"bad duration", `{"providers":[{"name":"a","base_url":"http://x"}],"timeouts":{"idle":"soon"}}`, "timeouts.idle: "},
		{"bad provider duration", `{"providers":[{"name":"a","base_url":"http://x"},{"name":"b","base_url":"http://y","first_byte_timeout":"x"}]}`, "providers[1].first_byte_timeout: "},
		{"max_body past 1TiB", `{"providers":[{"name":"a","base_url":"http://x"}],"max_body":9223372036854775807}`, "max_body: 9223372036854775807 bytes is over 1TiB"},
		{"max_buffer past 1TiB", `{"providers":[{"name":"a","base_url":"http://x"}],"stream":{"max_buffer":1099511627777}}`, "stream.max_buffer: 1099511627777 bytes is over 1TiB"},
		{"negative max_buffer", `{"providers":[{"name":"a","base_url":"http://x"}],"stream":{"max_buffer":-1}}`, "stream.max_buffer: negative size"},
		{"negative price", `{"providers":[{"name":"a","base_url":"http://x"}],"prices":[{"model":"*","input":-1,"output":1}]}`, "price *: a negative price"},
		{"provider price glob", `{"providers":[{"name":"a","base_url":"http://x","prices":[{"model":"[","input":1,"output":1}]}]}`, `provider "a": price [: model glob`},
		{"large_prompt without tokens", `{"providers":[{"name":"a","base_url":"http://x"}],"hedge":{"large_prompt":{"after":"20s"}}}`, "hedge: large_prompt needs positive tokens"},
		{"unknown api", `{"providers":[{"name":"a","base_url":"http://x","api":"claude"}]}`, `api: "claude" is not one of ` + engine.APINames()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var h Handler
			err := json.Unmarshal([]byte(tc.config), &h)
			if err == nil {
				err = h.checkConfig()
			}
			if err == nil {
				h.setDefaults()
				_, err = newEngine(t, &h)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
	var h Handler
	if err := json.Unmarshal([]byte(`{"providers":[],"hedgee":{}}`), &h); err == nil || !strings.Contains(err.Error(), "unknown field") {
		t.Errorf("unknown field: %v", err)
	}
}

// caddy adapt of a one-provider config prints no empty sections, and the
// JSON it prints reads back into the same handler.
func TestAdaptOmitsUnsetSections(t *testing.T) {
	cf := ":0 {\n\tllm_hedge {\n\t\tprovider a http://127.0.0.1:1\n\t}\n}\n"
	js, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cf), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := string(js)
	start := strings.Index(out, `{"handler":"llm_hedge"`)
	if start < 0 {
		t.Fatalf("no llm_hedge handler in %s", out)
	}
	handler := out[start:]
	handler = handler[:strings.Index(handler, "]}")+2]
	if strings.Contains(handler, "{}") {
		t.Fatalf("empty sections in %s", handler)
	}
	var back Handler
	if err := json.Unmarshal([]byte(strings.Replace(handler, `"handler":"llm_hedge",`, "", 1)), &back); err != nil {
		t.Fatal(err)
	}
	back.setDefaults()
	if back.Timeouts.Total != caddy.Duration(defaultTotalTimeout) || !*back.Stream.DropMalformed || len(back.Providers) != 1 {
		t.Fatalf("round trip lost the defaults: %+v", back)
	}
}

// base_url {env.LLM_URL} is expanded at provision and checked expanded;
// header_up values expand {env.*} too.
func TestBaseURLEnvPlaceholder(t *testing.T) {
	t.Setenv("LLM_HEDGE_TEST_URL", "http://127.0.0.1:9/api")
	t.Setenv("LLM_HEDGE_TEST_TEAM", "blue")
	h, err := parseHandler("llm_hedge {\nprovider envp {env.LLM_HEDGE_TEST_URL} {\n header_up X-Team {env.LLM_HEDGE_TEST_TEAM}\n}\n}")
	if err != nil {
		t.Fatal(err)
	}
	h.setDefaults()
	spec, err := providerSpec(h.Providers[0], caddy.NewReplacer())
	if err != nil {
		t.Fatal(err)
	}
	if spec.BaseURL != "http://127.0.0.1:9/api" {
		t.Errorf("base URL %q, want the expansion", spec.BaseURL)
	}
	hdr := http.Header{}
	spec.HeaderUp(hdr, httptest.NewRequest("POST", "/v1/messages", nil))
	if got := hdr.Get("X-Team"); got != "blue" {
		t.Errorf("header_up X-Team = %q, want blue", got)
	}
	if _, err := newEngine(t, h); err != nil {
		t.Fatal(err)
	}
	t.Setenv("LLM_HEDGE_TEST_URL", "ftp://elsewhere")
	if _, err := newEngine(t, h); err == nil || !strings.Contains(err.Error(), "want http(s)://") {
		t.Errorf("a non-http expansion: %v", err)
	}
}

// newEngine builds h's engine as Provision does, without Caddy's context:
// its providers' shared health is released when the test ends.
func newEngine(t testing.TB, h *Handler) (*engine.Engine, error) {
	specs := make([]engine.ProviderConfig, 0, len(h.Providers))
	for _, pc := range h.Providers {
		spec, err := providerSpec(pc, caddy.NewReplacer())
		if err != nil {
			return nil, fmt.Errorf("provider %q: %w", pc.Name, err)
		}
		specs = append(specs, spec)
	}
	e, err := engine.New(h.engineConfig(), specs, engine.Env{Health: func(name, baseURL, vendor string) (*health.Provider, error) {
		ph, err := loadHealth(name, baseURL, vendor)
		if err == nil {
			t.Cleanup(func() { releaseHealth(name, baseURL) })
		}
		return ph, err
	}})
	t.Cleanup(e.Close)
	return e, err
}
