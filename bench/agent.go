package main

// The agent modes: requests shaped like the coding agents' (bench/agentbody,
// 140-155 KB each: a 10.7 KB system prompt, 20 tools with schemas, 37 tool
// calls with their results), in each client format, streamed and not:
// agent/<format> and agent-stream/<format>, and agent-stream/bedrock (the
// Anthropic body through api bedrock, with llm_hedge_sigv4 beside it).
// -modes agent-all is every one of them. The answer is the same short one
// as the other modes': what these cells measure is the cost of the request.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/llmhedge/caddy-llm-hedge/bench/agentbody"
	"github.com/llmhedge/caddy-llm-hedge/bench/load"
	"github.com/llmhedge/caddy-llm-hedge/internal/cloud"
)

// agentAll is the -modes shorthand for every agent mode.
const agentAll = "agent-all"

// agentModeNames are the agent modes in agent-all's order.
var agentModeNames []string

func init() {
	for _, f := range agentbody.Formats {
		for _, stream := range []bool{false, true} {
			name := agentModeName(f, stream)
			benchModes[name] = agentMode(f, stream)
			agentModeNames = append(agentModeNames, name)
		}
	}
	benchModes["agent-stream/bedrock"] = agentBedrockMode()
	agentModeNames = append(agentModeNames, "agent-stream/bedrock")
}

func agentModeName(format string, stream bool) string {
	if stream {
		return "agent-stream/" + format
	}
	return "agent/" + format
}

// agentMode is format's agent body, streamed or not, with the check of
// that format's complete answer (a non-stream one must be whole JSON: the
// marker alone can come before a cut).
func agentMode(format string, stream bool) benchMode {
	body := agentbody.Body(format)
	if !stream {
		body = agentbody.NonStream(body)
	}
	m := benchMode{tokens: nonStreamTokens, body: body}
	if stream {
		m.tokens = streamTokens
	}
	nonStream := func(marker string) func([]byte) error {
		return func(b []byte) error {
			if !bytes.Contains(b, []byte(marker)) || !json.Valid(b) {
				return fmt.Errorf("incomplete body (no %s): %.200s", marker, b)
			}
			return nil
		}
	}
	switch format {
	case "anthropic":
		a := anthropicMode(load.Kind{Stream: stream})
		m.path, m.header, m.api = a.path, a.header, "anthropic"
		m.check = a.check
	case "chat":
		m.path, m.api = "/v1/chat/completions", "openai"
		m.header = map[string]string{"Authorization": "Bearer sk-load"}
		m.check = nonStream(`"finish_reason":"stop"`)
		if stream {
			m.check = checkChatStream
		}
	case "responses":
		m.path, m.api = "/v1/responses", "openai"
		m.header = map[string]string{"Authorization": "Bearer sk-load"}
		m.check = nonStream(`"status":"completed"`)
		if stream {
			m.check = checkResponsesStream
		}
	case "gemini":
		m.path, m.api = "/v1beta/models/"+agentbody.Model+":generateContent", "gemini"
		m.header = map[string]string{"X-Goog-Api-Key": "sk-load"}
		m.check = nonStream(`"finishReason":"STOP"`)
		if stream {
			m.path = "/v1beta/models/" + agentbody.Model + ":streamGenerateContent?alt=sse"
			m.check = checkGeminiStream
		}
	default:
		panic("bench: no agent mode for " + format)
	}
	return m
}

// agentBedrockMode is bedrock-stream with the Anthropic agent body: the
// model renamed to the one the Bedrock providers map, and reverse_proxy's
// client sending the body as Bedrock takes it (no model or stream, an
// anthropic_version), made by the cloud package's own rewrite.
func agentBedrockMode() benchMode {
	m := bedrockStreamMode()
	m.body = bytes.Replace(agentbody.Body("anthropic"), []byte(`"model":"`+agentbody.Model+`"`), []byte(`"model":"claude-bench"`), 1)
	raw := *m.raw
	b, err := cloud.CloudBody(m.body, []string{"model", "stream"}, map[string]json.RawMessage{"anthropic_version": json.RawMessage(cloud.BedrockAnthropicVersion)})
	if err != nil {
		panic(err)
	}
	raw.body = b
	raw.path = "/model/" + strings.ReplaceAll(url.PathEscape(bedrockModel), ":", "%3A") + "/invoke-with-response-stream"
	m.raw = &raw
	return m
}

// keyedSite is llm_hedge_key's site: llm_hedge with its provider's `api`
// and own `key`, as an operator who keeps the keys in the proxy writes it
// (the client's key is replaced, and the quota estimate reads the body).
func keyedSite(m benchMode, sims []*simServer) string {
	return fmt.Sprintf("\tllm_hedge {\n\t\tprovider sim-a %s {\n\t\t\tapi %s\n\t\t\tkey sk-bench-key\n%s\t\t}\n\t}",
		sims[0].URL, m.api, hedgeUpstreamTLS())
}

// keyedConfig is the configuration of a native mode's provider with api
// and key; a mode without an api (the clouds' and the translating ones,
// whose llm_hedge already has both) does not run it.
const keyedConfig = "llm_hedge_key"
