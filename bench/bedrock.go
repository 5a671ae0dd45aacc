package main

// The bedrock-stream cell: llm_hedge's `api bedrock` provider against
// reverse_proxy to the same simulator of wire bedrock.
//
// reverse_proxy cannot sign SigV4, so both configurations authenticate with
// a Bedrock API key (Bearer): the simulator then does the same work for
// both, and the ratio is the cost of what llm_hedge adds — the Anthropic
// request turned into Bedrock's (URL, body), the event-stream frames decoded
// and written back as Anthropic SSE, the stream gate — against relaying the
// event-stream bytes as they are. The reverse_proxy client therefore sends
// the Bedrock request itself and reads the event-stream; the llm_hedge
// client speaks Anthropic Messages. llm_hedge_sigv4 is the same llm_hedge
// with static AWS credentials (environment of the Caddy process) instead of
// the key: every request is signed, and a simulator of its own (same
// answers, but SigV4 required) verifies the signature.

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/llmhedge/caddy-llm-hedge/bench/load"
	"github.com/llmhedge/caddy-llm-hedge/sim"
)

const (
	bedrockKey    = "bedrock-bench-key" // the Bedrock API key (Bearer) of both configurations
	bedrockRegion = "us-east-1"
	bedrockModel  = "anthropic.claude-bench-v1:0" // the Bedrock model id claude-bench maps to
	bedrockAKID   = "AKIDBENCHLOAD"               // static credentials of llm_hedge_sigv4
	bedrockSecret = "bench-load-secret"
	// sigv4Sim is the simulator that requires a signature (llm_hedge_sigv4's).
	sigv4Sim = 3
)

// bedrockStreamMode is the Anthropic stream mode through a Bedrock
// simulator; direct and reverse_proxy send raw, the Bedrock request.
func bedrockStreamMode() benchMode {
	m := anthropicMode(load.Kind{Stream: true})
	m.wire = sim.WireBedrock
	m.extra = []string{"llm_hedge_sigv4"}
	m.api = "" // llm_hedge's Bedrock provider has its key
	m.raw = &benchMode{
		tokens: streamTokens,
		// As llm_hedge sends it: AWS escapes the ':' of the model id.
		path:   "/model/" + strings.ReplaceAll(url.PathEscape(bedrockModel), ":", "%3A") + "/invoke-with-response-stream",
		header: map[string]string{"Accept": "application/vnd.amazon.eventstream"},
		body:   fmt.Appendf(nil, `{"anthropic_version":"bedrock-2023-05-31","max_tokens":1024,"messages":[{"role":"user","content":%q}]}`, prompt),
		check:  checkEventStream,
		events: countFrames,
	}
	return m
}

// simConfig is the simulators' configuration for the mode; the i-th
// simulator of a Bedrock mode at sigv4Sim requires a signature.
func (m benchMode) simConfig(i int) sim.Config {
	cfg := sim.Config{Tokens: m.tokens, Wire: m.wire}
	if m.wire == sim.WireBedrock {
		cfg.Key, cfg.Region = bedrockKey, bedrockRegion
		if i == sigv4Sim {
			cfg.AWSAccessKey, cfg.AWSSecretKey = bedrockAKID, bedrockSecret
		}
	}
	return cfg
}

// forConfig is the mode whose requests config's client sends: a cloud
// mode's own request for direct (with its key) and reverse_proxy and its
// A/A control (which add the key), else m.
func (m benchMode) forConfig(config string) benchMode {
	if m.raw == nil || (config != "direct" && config != "reverse_proxy" && config != controlConfig) {
		return m
	}
	r := *m.raw
	if config == "direct" {
		r.header = maps.Clone(r.header)
		r.header["Authorization"] = "Bearer " + bedrockKey
	}
	return r
}

// modeConfigs are the configurations that run for m: configs, without the
// ones of another wire, and with m's extra ones after llm_hedge.
func modeConfigs(m benchMode, configs []string) []string {
	var out []string
	for _, c := range configs {
		if c == "llm_hedge_sigv4" && m.wire != sim.WireBedrock || c == keyedConfig && m.api == "" {
			continue
		}
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
		if c == "llm_hedge" {
			for _, e := range m.extra {
				if !slices.Contains(configs, e) {
					out = append(out, e)
				}
			}
		}
	}
	return out
}

// caddyEnv is the extra environment of config's Caddy process.
func caddyEnv(config string) []string {
	if config != "llm_hedge_sigv4" {
		return nil
	}
	return []string{"AWS_ACCESS_KEY_ID=" + bedrockAKID, "AWS_SECRET_ACCESS_KEY=" + bedrockSecret,
		"AWS_SESSION_TOKEN=", "AWS_PROFILE=", "AWS_EC2_METADATA_DISABLED=true"}
}

// modeSite is the Caddyfile site body of config for mode m.
func modeSite(m benchMode, config string, sims []*simServer) string {
	if m.translate != "" {
		return translateSite(m, config, sims)
	}
	if config == keyedConfig {
		return keyedSite(m, sims)
	}
	if m.wire != sim.WireBedrock {
		return site(config, sims, "")
	}
	prov := func(name string, s *simServer, key bool, more string) string {
		k := ""
		if key {
			k = "\t\t\tkey " + bedrockKey + "\n"
		}
		return fmt.Sprintf("\t\tprovider %s %s {\n\t\t\tapi bedrock\n\t\t\tregion %s\n%s\t\t\tmodel claude-bench %s\n%s%s\t\t}\n",
			name, s.URL, bedrockRegion, k, bedrockModel, more, hedgeUpstreamTLS())
	}
	switch config {
	case "reverse_proxy", controlConfig:
		tr := rpUpstreamTLS()
		if *rpIdle > 0 {
			tr += fmt.Sprintf("\t\t\tkeepalive_idle_conns_per_host %d\n", *rpIdle)
		}
		if tr != "" {
			tr = "\t\ttransport http {\n" + tr + "\t\t}\n"
		}
		return fmt.Sprintf("\treverse_proxy %s {\n\t\theader_up Authorization \"Bearer %s\"\n%s\t}",
			strings.TrimPrefix(sims[0].URL, "http://"), bedrockKey, tr)
	case "llm_hedge":
		return "\tllm_hedge {\n" + prov("bedrock", sims[0], true, "") + "\t}"
	case "llm_hedge_sigv4":
		return "\tllm_hedge {\n" + prov("bedrock", sims[sigv4Sim], false, "") + "\t}"
	case "llm_hedge_3":
		return "\tllm_hedge {\n" + prov("bedrock-a", sims[0], true, "\t\t\tvendor a\n") +
			prov("bedrock-b", sims[1], true, "\t\t\tvendor b\n") + prov("bedrock-c", sims[2], true, "\t\t\tvendor c\n") +
			"\t\thedge {\n\t\t\tafter 10s\n\t\t}\n\t}"
	}
	panic("unknown configuration " + config)
}

// messageStopChunk is the payload of the chunk frame that ends a Bedrock
// stream of Anthropic events.
var messageStopChunk = []byte(`{"bytes":"` + base64.StdEncoding.EncodeToString([]byte(`{"type":"message_stop"}`)) + `"}`)

// eventFrames splits an AWS event-stream body into its frames, checking
// each frame's length fields and checksums; the body must end at a frame's end.
func eventFrames(b []byte) ([][]byte, error) {
	var out [][]byte
	for len(b) > 0 {
		if len(b) < 16 {
			return nil, fmt.Errorf("event stream cut inside a frame prelude")
		}
		total, hlen := binary.BigEndian.Uint32(b), binary.BigEndian.Uint32(b[4:])
		if total < 16 || uint64(total) > uint64(len(b)) || uint64(hlen) > uint64(total)-16 {
			return nil, fmt.Errorf("event stream cut, or a bad frame length %d", total)
		}
		f := b[:total]
		if crc32.ChecksumIEEE(f[:8]) != binary.BigEndian.Uint32(f[8:]) || crc32.ChecksumIEEE(f[:total-4]) != binary.BigEndian.Uint32(f[total-4:]) {
			return nil, fmt.Errorf("event stream frame %d: bad checksum", len(out))
		}
		out = append(out, f)
		b = b[total:]
	}
	return out, nil
}

// checkEventStream requires whole, valid frames, the last a chunk carrying
// message_stop.
func checkEventStream(b []byte) error {
	frames, err := eventFrames(b)
	if err != nil {
		return err
	}
	if len(frames) == 0 {
		return fmt.Errorf("empty event stream")
	}
	last := frames[len(frames)-1]
	hlen := binary.BigEndian.Uint32(last[4:])
	headers, payload := last[12:12+hlen], last[12+hlen:len(last)-4]
	if !bytes.Contains(headers, []byte(":event-type\x07\x00\x05chunk")) || !bytes.Equal(payload, messageStopChunk) {
		return fmt.Errorf("event stream without a message_stop chunk: %q", last)
	}
	return nil
}

// countFrames counts the frames of an event-stream body.
func countFrames(b []byte) int {
	frames, _ := eventFrames(b)
	return len(frames)
}
