package sim

// Anthropic's validation of thinking in a conversation's history
// (Config.RequireThinkingSignatures): with thinking on, each thinking
// block must carry a signature the vendor issued, and the assistant turn
// of the latest tool-use cycle must start with a thinking block, else 400
// invalid_request_error, worded as Anthropic words it.

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
)

// thinkingKey signs thinking texts; one per process, as one vendor's
// servers accept each other's signatures.
var thinkingKey = func() []byte {
	k := make([]byte, 32)
	rand.Read(k)
	return k
}()

// ThinkingSignature is the signature the simulator issued for a thinking
// block's text: the only one it accepts back for that text. (The
// simulator's own answers carry no thinking; a test builds a history the
// vendor produced with it.)
func ThinkingSignature(thinking string) string {
	m := hmac.New(sha256.New, thinkingKey)
	m.Write([]byte(thinking))
	return "sim-sig-" + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// checkThinking answers 400 when the Anthropic request's history breaks
// the rules above; it reports whether the request may go on.
func checkThinking(ex *exchange, body []byte) bool {
	if !ex.p.cfg.RequireThinkingSignatures || ex.ep != endpointMessages || ex.wire.name() != "anthropic" {
		return true
	}
	if msg := thinkingViolation(body); msg != "" {
		ex.fail(http.StatusBadRequest, msg)
		return false
	}
	return true
}

type thinkingBlock struct {
	Type      string `json:"type"`
	Thinking  string `json:"thinking"`
	Signature string `json:"signature"`
}

// thinkingViolation is Anthropic's error message for the request, or "".
func thinkingViolation(body []byte) string {
	var in struct {
		Thinking *struct {
			Type string `json:"type"`
		} `json:"thinking"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &in) != nil || in.Thinking == nil || in.Thinking.Type == "disabled" {
		return ""
	}
	contents := make([][]thinkingBlock, len(in.Messages))
	for i, m := range in.Messages {
		if json.Unmarshal(m.Content, &contents[i]) != nil {
			continue // a string: text only
		}
		if m.Role != "assistant" {
			continue
		}
		for j, b := range contents[i] {
			if b.Type == "thinking" && !hmac.Equal([]byte(b.Signature), []byte(ThinkingSignature(b.Thinking))) {
				return fmt.Sprintf("messages.%d.content.%d: Invalid `signature` in `thinking` block", i, j)
			}
		}
	}
	n := len(in.Messages)
	if n < 2 || in.Messages[n-1].Role != "user" || in.Messages[n-2].Role != "assistant" || !hasBlock(contents[n-1], "tool_result") {
		return "" // not inside a tool-use cycle
	}
	first := "text"
	if c := contents[n-2]; len(c) > 0 {
		first = c[0].Type
	}
	if first == "thinking" || first == "redacted_thinking" {
		return ""
	}
	return fmt.Sprintf("messages.%d.content.0.type: Expected `thinking` or `redacted_thinking`, but found `%s`. "+
		"When `thinking` is enabled, a final `assistant` message must start with a thinking block "+
		"(preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks "+
		"from previous turns. To avoid this requirement, disable `thinking`. Please consult our documentation at "+
		"https://docs.claude.com/en/docs/build-with-claude/extended-thinking", n-2, first)
}

func hasBlock(blocks []thinkingBlock, typ string) bool {
	for _, b := range blocks {
		if b.Type == typ {
			return true
		}
	}
	return false
}
