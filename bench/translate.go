package main

// The translate-stream cells, one per translation pair (translate.Pairs):
// translate-stream/<client>-<target>. The client sends the request of its
// format's native stream mode (stream, openai-stream, responses-stream,
// gemini-stream) and reads that format's stream in every configuration:
// llm_hedge's providers speak the target (`api <target>`, `translate
// <client>`, their own key), the simulator answering in the target's
// format; direct and reverse_proxy send the same request to the same
// simulator, which answers it natively. llm_hedge's CPU per request here
// against its own in the native stream cell of the client's format is the
// cost of the translation (issue 59: at most 1.10×; the table prints it
// when both cells ran, see translateLines); against reverse_proxy in this
// row group it is the whole cost of serving a client from another vendor.
//
// translate-stream alone is translate-stream/anthropic-openai (its name
// before there were other pairs), and -modes translate-all is every pair
// with the four native stream modes, each pair after its client's.

import (
	"fmt"
	"strings"

	"github.com/llmhedge/caddy-llm-hedge/internal/translate"
)

// translatePrefix begins every translating mode's name.
const translatePrefix = "translate-stream/"

// translateAll is the -modes shorthand for every pair and the native
// stream modes they are compared with.
const translateAll = "translate-all"

// nativeStreamModes is the untranslated stream mode of each client format:
// a translating mode's client sends its request and reads its stream.
var nativeStreamModes = map[string]string{
	translate.Anthropic: "stream",
	translate.OpenAI:    "openai-stream",
	translate.Responses: "responses-stream",
	translate.Gemini:    "gemini-stream",
}

// clientOrder is the order of the client formats in translate-all.
var clientOrder = []string{translate.Anthropic, translate.OpenAI, translate.Responses, translate.Gemini}

func init() {
	for _, p := range translate.Pairs() {
		benchModes[translateModeName(p[0], p[1])] = translateStreamMode(p[0], p[1])
	}
	benchModes["translate-stream"] = benchModes[translateModeName(translate.Anthropic, translate.OpenAI)]
}

func translateModeName(client, target string) string {
	return translatePrefix + client + "-" + target
}

// translateStreamMode is client's native stream mode served by
// translation to target.
func translateStreamMode(client, target string) benchMode {
	native, ok := nativeStreamModes[client]
	if !ok {
		panic("bench: no native stream mode for client format " + client + " (add it to nativeStreamModes)")
	}
	m := benchModes[native]
	m.client, m.translate = client, target
	m.api = "" // llm_hedge's provider has its api and key
	return m
}

// translateAllModes is what -modes translate-all expands to: for each
// client format, its native stream mode, then every pair of that client.
func translateAllModes() []string {
	var out []string
	for _, client := range clientOrder {
		out = append(out, nativeStreamModes[client])
		for _, p := range translate.Pairs() {
			if p[0] == client {
				out = append(out, translateModeName(p[0], p[1]))
			}
		}
	}
	return out
}

// modeGroups are the modes measured together: a native stream mode and
// the translating modes of its client format that follow it in -modes (as
// translate-all lists them) take their rounds in turn, at each
// concurrency and round the native cell and then each pair's, so the
// pairs' ratios to it compare cells a few seconds apart, paired by round
// (translateLines). Every other mode is a group of its own: its rounds
// run back to back.
func modeGroups(modes []string) [][]string {
	var out [][]string
	for _, mode := range modes {
		if c := benchModes[mode].client; c != "" && len(out) > 0 && out[len(out)-1][0] == nativeStreamModes[c] {
			out[len(out)-1] = append(out[len(out)-1], mode)
			continue
		}
		out = append(out, []string{mode})
	}
	return out
}

// translateKey is a translating provider's own key (a client's key never
// crosses vendors); the simulators accept any.
func translateKey(target string) string { return "sk-bench-" + target }

// translateAPI is the `api` of a provider of target serving client by
// translation: target's own, except a Responses client on Chat
// Completions, which needs `api chat` (`api openai` serves Responses
// natively, so it would not translate it).
func translateAPI(client, target string) string {
	if client == translate.Responses && target == translate.OpenAI {
		return "chat"
	}
	return target
}

// translateModel is the model the target is asked for (Gemini's goes into
// the upstream path).
func translateModel(target string) string {
	switch target {
	case translate.Anthropic:
		return "claude-bench"
	case translate.Gemini:
		return "gemini-bench"
	}
	return "gpt-bench"
}

// translateSite is the Caddyfile site body of config for a translating
// mode: llm_hedge's providers speak m.translate and translate m.client;
// direct and reverse_proxy are those of the untranslated stream.
func translateSite(m benchMode, config string, sims []*simServer) string {
	prov := func(name string, s *simServer, more string) string {
		return fmt.Sprintf("\t\tprovider %s %s {\n\t\t\tapi %s\n\t\t\ttranslate %s\n\t\t\tkey %s\n\t\t\tmodel * %s\n%s%s\t\t}\n",
			name, s.URL, translateAPI(m.client, m.translate), m.client, translateKey(m.translate), translateModel(m.translate), more, hedgeUpstreamTLS())
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

// translateLimit is issue 59's bound on a translated stream's CPU per
// request, against the untranslated stream of the same client format.
const translateLimit = 1.10

// translateLines are the table's lines for the translating cells of rs:
// each llm_hedge configuration's CPU per request against its own in the
// native stream cell of the client's format at the same concurrency, in
// this run (medians of the rounds), and the median of the rounds' own
// ratios where the two took their rounds in turn (modeGroups).
func translateLines(rs []cellResult, modes []string, concs []int, configs []string) []string {
	find := func(mode string, conc int, config string) *cellResult {
		for i := range rs {
			if rs[i].mode == mode && rs[i].conc == conc && rs[i].config == config {
				return &rs[i]
			}
		}
		return nil
	}
	var out []string
	for _, mode := range modes {
		m := benchModes[mode]
		if m.client == "" {
			continue
		}
		native := nativeStreamModes[m.client]
		for _, conc := range concs {
			for _, config := range configs {
				if !strings.HasPrefix(config, "llm_hedge") {
					continue
				}
				r := find(mode, conc, config)
				if r == nil || r.requests == 0 || r.cpuPer1k < 0 {
					continue
				}
				b := find(native, conc, config)
				if b == nil || b.requests == 0 || b.cpuPer1k <= 0 {
					out = append(out, fmt.Sprintf("  %-36s c=%-3d %-12s CPU %.3f s/1k req; no %s cell of %s in this run to compare with (-modes %s,%s or -modes %s)",
						mode, conc, config, r.cpuPer1k, native, config, native, mode, translateAll))
					continue
				}
				ratio := r.cpuPer1k / b.cpuPer1k
				mark := "met"
				if ratio > translateLimit {
					mark = "MISSED"
				}
				pairedNote := ""
				if r.xlPairedCPU > 0 {
					pairedNote = fmt.Sprintf("; paired by round %.3f×", r.xlPairedCPU)
				}
				out = append(out, fmt.Sprintf("  %-36s c=%-3d %-12s CPU %.3f s/1k req, %s %.3f: %.3f× %s%s",
					mode, conc, config, r.cpuPer1k, native, b.cpuPer1k, ratio, mark, pairedNote))
			}
		}
	}
	return out
}
