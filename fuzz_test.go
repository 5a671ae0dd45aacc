package llmhedge

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// FuzzCaddyfile feeds arbitrary text to the llm_hedge Caddyfile parser: it
// never panics, and whatever it accepts survives the JSON round trip that
// `caddy adapt` makes of it and goes through defaults and validation
// without panicking either.
func FuzzCaddyfile(f *testing.F) {
	if example, err := os.ReadFile("Caddyfile.example"); err == nil {
		if i := bytes.Index(example, []byte("\tllm_hedge {")); i >= 0 {
			f.Add(string(example[i:bytes.LastIndexByte(example, '}')]))
		}
	}
	for _, s := range []string{
		"llm_hedge {\n\tprovider a http://127.0.0.1:9001\n}",
		"llm_hedge {\n\tprovider a https://api.anthropic.com/v1 {\n\t\tapi anthropic\n\t\tkey {env.K}\n\t\tmodels claude-* gpt-?\n\t\tmodel * claude-x\n\t\theader_up -X-Drop\n\t\theader_up +X-Add v\n\t\tmax_in_flight 3\n\t\tfirst_byte_timeout 2s\n\t\ttls_trusted_ca /tmp/ca.pem\n\t\tpriority -1\n\t\tweight 2\n\t\tvendor v\n\t}\n}",
		"llm_hedge {\n\tprovider a http://a\n\thedge off\n\tretry {\n\t\tattempts 2\n\t\tsame_provider 0\n\t\tbackoff 1ms 2ms\n\t\tretry_after_max 1s\n\t\tbudget 5%\n\t\tfallback_model a b\n\t}\n}",
		"llm_hedge {\n\tprovider a http://a\n\thedge {\n\t\tafter p99.9\n\t\tmin 1ms\n\t\tmax 1h\n\t\tmax_attempts 5\n\t\tbudget 100\n\t}\n\tcooldown {\n\t\tfailures 1\n\t\tduration 1s\n\t\tmax 1m\n\t}\n}",
		"llm_hedge {\n\tprovider a http://a\n\tstream {\n\t\treject \"I cannot\" nope\n\t\tdrop_malformed off\n\t\tmax_buffer 64KiB\n\t}\n\taffinity header X-Session ttl 1h\n\tmax_body 1MB\n\ttimeouts {\n\t\tconnect 1s\n\t\tfirst_byte 2s\n\t\tresponse 3s\n\t\tidle 4s\n\t\ttotal 5s\n\t}\n}",
		"llm_hedge {\n\tprovider a http://a {\n\t}\n\tprovider a http://b\n}",
		"llm_hedge {\n\thedge {\n\t\tafter p\n\t}\n}",
		"llm_hedge {\n\tprovider a http://a\n\taffinity ttl -1s\n\tmax_body 0\n}",
		"llm_hedge {\n\tprovider a http://a {\n\t\tmodel\n\t\tpriority 99999999999999999999\n\t}\n}",
		"llm_hedge",
		"llm_hedge x {",
		"llm_hedge {\n\tprovider a http://a\n\thedge {\n\t\tafter 1s\n\t\tmin 5s\n\t\tmax 1s\n\t}\n}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, input string) {
		// caddyfile.NewTestDispenser exits the process on a tokenizer
		// error; the real adapter reports it, so do the same here.
		tokens, err := caddyfile.Tokenize([]byte(input), "Caddyfile")
		if err != nil {
			return
		}
		var h Handler
		if err := h.UnmarshalCaddyfile(caddyfile.NewDispenser(tokens)); err != nil {
			return
		}
		js, err := json.Marshal(&h)
		if err != nil {
			t.Fatalf("accepted config does not marshal: %v", err)
		}
		var back Handler
		if err := json.Unmarshal(js, &back); err != nil {
			t.Fatalf("adapted JSON does not load back: %v\n%s", err, js)
		}
		if js2, _ := json.Marshal(&back); !bytes.Equal(js, js2) {
			t.Fatalf("JSON round trip changed the config:\n%s\n%s", js, js2)
		}
		back.setDefaults()
		_ = back.Validate()
	})
}
