package main

// The translate-stream cell: an Anthropic client streaming through an
// `api openai` provider with `translate anthropic`, the simulator speaking
// Chat Completions. direct and reverse_proxy send the same Anthropic
// request to the same simulator, which answers it natively: the client
// reads the same Anthropic stream in every configuration. llm_hedge's CPU
// per request here against its own in the stream cell is the cost of the
// translation (docs/translation.md); against reverse_proxy in this row
// group it is the whole cost of serving an Anthropic client from another
// vendor.

import (
	"fmt"

	"github.com/llmhedge/caddy-llm-hedge/bench/load"
	"github.com/llmhedge/caddy-llm-hedge/internal/translate"
)

// translateKey is the translating providers' own key (a client's key
// never crosses vendors); the simulators accept any.
const translateKey = "sk-bench-openai"

// translateStreamMode is the Anthropic stream mode served by translation
// to Chat Completions.
func translateStreamMode() benchMode {
	m := anthropicMode(load.Kind{Stream: true})
	m.translate = translate.OpenAI
	return m
}

// translateSite is the Caddyfile site body of config for a translating
// mode: llm_hedge's providers speak m.translate and translate Anthropic;
// direct and reverse_proxy are those of the untranslated stream.
func translateSite(m benchMode, config string, sims []*simServer) string {
	prov := func(name string, s *simServer, more string) string {
		return fmt.Sprintf("\t\tprovider %s %s {\n\t\t\tapi %s\n\t\t\ttranslate anthropic\n\t\t\tkey %s\n\t\t\tmodel * gpt-bench\n%s\t\t}\n",
			name, s.URL, m.translate, translateKey, more)
	}
	switch config {
	case "llm_hedge":
		return "\tllm_hedge {\n" + prov("sim-a", sims[0], "") + "\t}"
	case "llm_hedge_3":
		return "\tllm_hedge {\n" + prov("sim-a", sims[0], "\t\t\tvendor a\n") + prov("sim-b", sims[1], "\t\t\tvendor b\n") +
			prov("sim-c", sims[2], "\t\t\tvendor c\n") + "\t\thedge {\n\t\t\tafter 10s\n\t\t}\n\t}"
	}
	return site(config, sims, "")
}
