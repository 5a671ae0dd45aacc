package sim

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestUnmarshalCaddyfile(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  Config
	}{
		{"empty", `llm_sim`, Config{}},
		{"empty block", "llm_sim {\n}", Config{}},
		{"everything", `llm_sim {
			first_token 250ms
			slow 10% 5s
			jitter 20%
			token_delay 20ms
			tokens 30
			text "Hello, world." again
			model claude-sim
			pings 0
			cache_read 100
			key secret
			seed 42
			fault status status 529 percent 50 count 3 retry_after 2 no_retry model claude-* delay 1s
			fault cut after 5
			fault fake200
			fault reset percent 0.5
		}`, Config{
			FirstToken:       caddy.Duration(250 * time.Millisecond),
			SlowPercent:      10,
			SlowFirstToken:   caddy.Duration(5 * time.Second),
			FirstTokenJitter: 20,
			TokenDelay:       caddy.Duration(20 * time.Millisecond),
			Tokens:           30,
			Text:             "Hello, world. again",
			Model:            "claude-sim",
			Pings:            new(0),
			CacheRead:        100,
			Key:              "secret",
			Seed:             42,
			Faults: []Fault{
				{Kind: FaultStatus, Status: 529, Percent: 50, Count: 3, RetryAfter: "2", NoRetry: true, Model: "claude-*", Delay: caddy.Duration(time.Second)},
				{Kind: FaultCut, After: 5},
				{Kind: FaultFake200},
				{Kind: FaultReset, Percent: 0.5},
			},
		}},
		{"cloud", `llm_sim {
			wire bedrock
			region us-west-2
			aws_access_key AKIDSIM
			aws_secret_key sim-secret
		}`, Config{Wire: WireBedrock, Region: "us-west-2", AWSAccessKey: "AKIDSIM", AWSSecretKey: "sim-secret"}},
		{"stall and malformed", `llm_sim {
			fault stall after 2 delay 1m
			fault malformed after 0
		}`, Config{Faults: []Fault{
			{Kind: FaultStall, After: 2, Delay: caddy.Duration(time.Minute)},
			{Kind: FaultMalformed},
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h Handler
			if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tt.input)); err != nil {
				t.Fatalf("UnmarshalCaddyfile: %v", err)
			}
			if !reflect.DeepEqual(h.Config, tt.want) {
				t.Errorf("config =\n%+v\nwant\n%+v", h.Config, tt.want)
			}
			if err := h.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}

func TestUnmarshalCaddyfileErrors(t *testing.T) {
	tests := []struct {
		name     string
		input    string
		wantLine int
		wantErr  string
	}{
		{"argument on the directive", `llm_sim extra`, 1, "wrong argument count"},
		{"unknown subdirective", "llm_sim {\n\tfirst_token 1s\n\tbogus 1\n}", 3, `unknown subdirective "bogus"`},
		{"missing duration", "llm_sim {\n\tfirst_token\n}", 2, "wrong argument count"},
		{"extra argument", "llm_sim {\n\ttokens 3 4\n}", 2, "wrong argument count"},
		{"bad duration", "llm_sim {\n\n\ttoken_delay soon\n}", 3, `token_delay "soon"`},
		{"negative duration", "llm_sim {\n\tfirst_token -1s\n}", 2, "must not be negative"},
		{"zero tokens", "llm_sim {\n\ttokens 0\n}", 2, "tokens 0: must be between 1"},
		{"tokens not a number", "llm_sim {\n\ttokens many\n}", 2, "not an integer"},
		{"negative pings", "llm_sim {\n\tpings -1\n}", 2, "pings -1"},
		{"slow percent over 100", "llm_sim {\n\tslow 150 5s\n}", 2, "between 0 and 100"},
		{"slow one argument", "llm_sim {\n\tslow 10\n}", 2, "wrong argument count"},
		{"empty text", "llm_sim {\n\ttext\n}", 2, "wrong argument count"},
		{"bad seed", "llm_sim {\n\tseed x\n}", 2, `seed "x"`},
		{"fault without kind", "llm_sim {\n\tfault\n}", 2, "wrong argument count"},
		{"unknown fault kind", "llm_sim {\n\tfault explode\n}", 2, `unknown kind "explode"`},
		{"unknown fault option", "llm_sim {\n\tfault cut sometimes\n}", 2, `unknown option "sometimes"`},
		{"fault status out of range", "llm_sim {\n\tfault status status 600\n}", 2, "fault status 600"},
		{"fault status informational", "llm_sim {\n\tfault status status 100\n}", 2, "final status"},
		{"fault percent over 100", "llm_sim {\n\tfault reset percent 101\n}", 2, "between 0 and 100"},
		{"fault option without value", "llm_sim {\n\tfault cut after\n}", 2, "wrong argument count"},
		{"fault negative count", "llm_sim {\n\tfault cut count -1\n}", 2, "fault count -1"},
		{"fault negative delay", "llm_sim {\n\tfault cut delay -1s\n}", 2, "must not be negative"},
		{"fault bad glob", "llm_sim {\n\tfault cut model [\n}", 2, "syntax error in pattern"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h Handler
			err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tt.input))
			if err == nil {
				t.Fatalf("no error, config %+v", h.Config)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q does not say %q", err, tt.wantErr)
			}
			if line := "Testfile:" + strconv.Itoa(tt.wantLine); !strings.Contains(err.Error(), line) {
				t.Errorf("error %q does not name line %s", err, line)
			}
		})
	}
}

// TestCaddyfileAdapt runs the directive through the Caddyfile adapter, as
// `caddy adapt` does: the directive is registered and ordered, and every
// option lands in the JSON config.
func TestCaddyfileAdapt(t *testing.T) {
	input := `:9001 {
		llm_sim /v1/* {
			first_token 50ms
			fault status status 529 count 2
		}
		respond "never"
	}`
	out, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(input), nil)
	if err != nil {
		t.Fatalf("adapting: %v (warnings %v)", err, warnings)
	}
	var cfg struct {
		Apps struct {
			HTTP struct {
				Servers map[string]struct {
					Routes []struct {
						Handle []json.RawMessage `json:"handle"`
					} `json:"routes"`
				} `json:"servers"`
			} `json:"http"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatal(err)
	}
	var handlers []string
	for _, r := range cfg.Apps.HTTP.Servers["srv0"].Routes {
		for _, raw := range r.Handle {
			handlers = append(handlers, string(raw))
		}
	}
	want := `{"faults":[{"count":2,"kind":"status","status":529}],"first_token":50000000,"handler":"llm_sim"}`
	if len(handlers) != 2 || handlers[0] != want || !strings.Contains(handlers[1], `"handler":"static_response"`) {
		t.Errorf("handlers = %s\nwant llm_sim first: %s", handlers, want)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"zero", Config{}, ""},
		{"negative first token", Config{FirstToken: -1}, "first_token"},
		{"negative slow", Config{SlowFirstToken: -1}, "slow"},
		{"slow percent", Config{SlowPercent: 101}, "slow: percent"},
		{"jitter percent", Config{FirstTokenJitter: -5}, "jitter: percent"},
		{"negative tokens", Config{Tokens: -1}, "tokens"},
		{"negative pings", Config{Pings: new(-1)}, "pings"},
		{"negative cache read", Config{CacheRead: -1}, "cache_read"},
		{"no fault kind", Config{Faults: []Fault{{}}}, "fault 0: unknown kind"},
		{"fault status", Config{Faults: []Fault{{Kind: FaultCut}, {Kind: FaultStatus, Status: 99}}}, "fault 1: status 99"},
		{"fault percent", Config{Faults: []Fault{{Kind: FaultCut, Percent: -1}}}, "percent"},
		{"fault after", Config{Faults: []Fault{{Kind: FaultCut, After: -1}}}, "after"},
		{"fault delay", Config{Faults: []Fault{{Kind: FaultCut, Delay: -1}}}, "delay"},
		{"wire", Config{Wire: "gcp"}, `wire "gcp": want bedrock, vertex or azure`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("Validate() = %v, want an error saying %q", err, tt.wantErr)
			}
			if tt.wantErr != "" {
				if err := New(Config{}).SetConfig(tt.cfg); err == nil {
					t.Error("SetConfig accepted an invalid config")
				}
			}
		})
	}
}

// TestCaddyfilePrefillSampling reads prefill and sampling, rejects other
// values (in the Caddyfile and in Validate), and adapts them to JSON.
func TestCaddyfilePrefillSampling(t *testing.T) {
	var h Handler
	if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("llm_sim {\n\tprefill off\n\tsampling sampled\n}")); err != nil {
		t.Fatal(err)
	}
	if want := (Config{Prefill: PrefillOff, Sampling: SamplingSampled}); !reflect.DeepEqual(h.Config, want) {
		t.Errorf("config %+v, want %+v", h.Config, want)
	}
	if err := h.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	for _, v := range []string{"prefill on", "sampling deterministic"} {
		var h Handler
		if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("llm_sim {\n\t" + v + "\n}")); err != nil || h.Validate() != nil {
			t.Errorf("%s: %v", v, err)
		}
	}
	for input, wantErr := range map[string]string{
		"prefill maybe":       `prefill "maybe": want on, off or restart`,
		"prefill":             "wrong argument count",
		"prefill on off":      "wrong argument count",
		"sampling random":     `sampling "random": want deterministic or sampled`,
		"sampling":            "wrong argument count",
		"sampling sampled on": "wrong argument count",
	} {
		var h Handler
		err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("llm_sim {\n\t" + input + "\n}"))
		if err == nil || !strings.Contains(err.Error(), wantErr) || !strings.Contains(err.Error(), "Testfile:2") {
			t.Errorf("%s: error %v, want %q on line 2", input, err, wantErr)
		}
	}
	for _, cfg := range []Config{{Prefill: "yes"}, {Sampling: "random"}, {Prefill: "ON"}} {
		h := Handler{Config: cfg}
		if err := h.Validate(); err == nil {
			t.Errorf("Validate accepted %+v", cfg)
		}
	}
	out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(":9001 {\n\tllm_sim {\n\t\tprefill off\n\t\tsampling sampled\n\t}\n}"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `{"handler":"llm_sim","prefill":"off","sampling":"sampled"}`) {
		t.Errorf("adapted: %s", out)
	}
}
