package sim

// Assistant prefill (a conversation ending in an assistant turn, continued
// from its text) and sampled answers: what a mid-stream continuation of the
// proxy (SPEC 12) meets at a provider.

import (
	"encoding/json"
	"net/http"
	"strings"
)

// The values of Config.Prefill and Config.Sampling.
const (
	PrefillOn             = "on"
	PrefillOff            = "off"
	PrefillRestart        = "restart"
	SamplingDeterministic = "deterministic"
	SamplingSampled       = "sampled"
)

// The messages of the 400s about a prefill. Every refusal of a model without
// prefill (Config.Prefill "off") contains "assistant message prefill".
const (
	// Anthropic, Bedrock (ValidationException) and Vertex's Anthropic
	// publisher: type invalid_request_error.
	PrefillUnsupportedAnthropic = "This model does not support assistant message prefill. The conversation must end with a user message."
	// OpenAI chat and Responses (and Azure): type invalid_request_error,
	// param "messages" (chat) or "input" (Responses).
	PrefillUnsupportedOpenAI = "This model does not support assistant message prefill."
	// Gemini (and Vertex's Google publisher): status INVALID_ARGUMENT.
	PrefillUnsupportedGemini = "This model does not support assistant message prefill: the last content must have role user."
	// The Anthropic-bodied wires, for a prefill ending in whitespace.
	PrefillTrailingWhitespace = "messages: final assistant content cannot end with trailing whitespace"
)

// prepareAnswer settles the answer of a generating request: sampled
// (Config.Sampling), and only the rest of it when the conversation ends in
// an assistant turn whose text is a prefix of it (Config.Prefill). It
// reports false when the request was refused with a 400.
func prepareAnswer(ex *exchange, ep endpoint) bool {
	switch ep {
	case endpointMessages, endpointChat, endpointResponses, endpointGeminiGenerate:
	default:
		return true
	}
	cfg := &ex.p.cfg
	prefill, prefilled := assistantPrefill(ex)
	if prefilled {
		ex.s.rec.prefilled(ex.rec, prefill)
		switch {
		case cfg.Prefill == PrefillOff:
			refusePrefill(ex)
			return false
		case ex.wire.name() == "anthropic" && endsInSpace(prefill):
			ex.fail(http.StatusBadRequest, PrefillTrailingWhitespace)
			return false
		}
	}
	sampled := cfg.Sampling == SamplingSampled
	continues := prefilled && cfg.Prefill != PrefillRestart
	script, scripted := scriptTurn(ex)
	if !scripted && !sampled && (!continues || !strings.HasPrefix(ex.p.text, prefill)) {
		return true // the plan's answer as it is
	}
	deltas := ex.p.deltas
	switch {
	case scripted:
		deltas = script
	case sampled:
		deltas = splitText(ex.p.rng.sample(cfg.Text), cfg.Tokens)
	}
	if continues && ex.call == nil {
		// The prefill's tokens are the deltas it covers, as a tokenizer
		// would count the same text; the rest of the input is the body
		// without the assistant turn, as the request without it counts.
		var covered int
		deltas, covered = continueFrom(deltas, prefill)
		ex.inputTokens = max(1, (ex.bodyLen-lastTurnLen(ex))/4) + covered
	}
	p := *ex.p
	p.setDeltas(deltas)
	ex.p = &p
	return true
}

// continueFrom returns the deltas after prefix when it is a prefix of their
// text (the rest of the delta it ends in first, if any), and the number of
// deltas it covers completely; otherwise deltas and 0.
func continueFrom(deltas []string, prefix string) (rest []string, covered int) {
	if !strings.HasPrefix(strings.Join(deltas, ""), prefix) {
		return deltas, 0
	}
	off := 0
	for i, d := range deltas {
		if off+len(d) <= len(prefix) {
			off += len(d)
			continue
		}
		if tail := d[len(prefix)-off:]; tail != "" {
			rest = append(rest, tail)
		}
		return append(rest, deltas[i+1:]...), i
	}
	return nil, len(deltas)
}

// refusePrefill answers the 400 of a model that does not support prefill,
// in the request's dialect.
func refusePrefill(ex *exchange) {
	switch ex.wire.name() {
	case "openai":
		ex.failWith(http.StatusBadRequest, errorWith(PrefillUnsupportedOpenAI, "invalid_request_error", "messages", ""))
	case "responses":
		ex.failWith(http.StatusBadRequest, errorWith(PrefillUnsupportedOpenAI, "invalid_request_error", "input", ""))
	case "gemini":
		ex.fail(http.StatusBadRequest, PrefillUnsupportedGemini)
	default:
		ex.fail(http.StatusBadRequest, PrefillUnsupportedAnthropic)
	}
}

// assistantPrefill returns the text of the conversation's last turn when
// it is the assistant's (Gemini: the model's) and holds text.
func assistantPrefill(ex *exchange) (string, bool) {
	switch ex.wire.name() {
	case "anthropic", "openai":
		return lastTurnText(ex.req.Messages, "assistant", false)
	case "responses":
		return lastTurnText(ex.req.Input, "assistant", false)
	case "gemini":
		return lastTurnText(ex.req.Contents, "model", true)
	}
	return "", false
}

// lastTurnText reads the last item of a list of turns: when its role is
// role (and, for a Responses item, its type is message), the text of its
// content (a string, or the text parts of a list) or, for Gemini, of its
// parts, joined; ok is false when the turn is another's or has no text.
func lastTurnText(raw json.RawMessage, role string, gemini bool) (text string, ok bool) {
	var turns []json.RawMessage
	if json.Unmarshal(raw, &turns) != nil || len(turns) == 0 {
		return "", false
	}
	var turn struct {
		Role    string          `json:"role"`
		Type    string          `json:"type"`
		Content json.RawMessage `json:"content"`
		Parts   json.RawMessage `json:"parts"`
	}
	if json.Unmarshal(turns[len(turns)-1], &turn) != nil || turn.Role != role ||
		(turn.Type != "" && turn.Type != "message") {
		return "", false
	}
	content := turn.Content
	if gemini {
		content = turn.Parts
	} else if len(content) > 0 && content[0] == '"' && json.Unmarshal(content, &text) == nil {
		return text, true
	}
	var parts []struct {
		Type    string  `json:"type"`
		Text    *string `json:"text"`
		Thought bool    `json:"thought"`
	}
	if json.Unmarshal(content, &parts) != nil {
		return "", false
	}
	var b strings.Builder
	for _, p := range parts {
		switch {
		case p.Text == nil || p.Thought:
		case gemini, p.Type == "text", p.Type == "output_text", p.Type == "input_text":
			b.WriteString(*p.Text)
			ok = true
		}
	}
	return b.String(), ok
}

// sample returns text's words (split at whitespace, joined by single
// spaces) with the first two in place and the others in a random order:
// not the original order, nor the previous sample's, when another order
// exists.
func (l *lockedRand) sample(text string) string {
	words := strings.Fields(text)
	original := strings.Join(words, " ")
	if len(words) < 4 {
		return original
	}
	rest := words[2:]
	l.mu.Lock()
	defer l.mu.Unlock()
	l.r.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
	out, fallback := "", ""
	for range rest {
		s := strings.Join(words, " ")
		if s != original && s != l.lastSample {
			out = s
			break
		}
		if fallback == "" && s != original {
			fallback = s
		}
		first := rest[0] // rotate by one
		copy(rest, rest[1:])
		rest[len(rest)-1] = first
	}
	switch {
	case out != "":
	case fallback != "":
		out = fallback
	default:
		out = original
	}
	l.lastSample = out
	return out
}

// lastTurnLen is the bytes the last turn of the conversation takes in the
// body, with the comma before it.
func lastTurnLen(ex *exchange) int {
	raw := ex.req.Messages
	switch ex.wire.name() {
	case "responses":
		raw = ex.req.Input
	case "gemini":
		raw = ex.req.Contents
	}
	var turns []json.RawMessage
	if json.Unmarshal(raw, &turns) != nil || len(turns) < 2 {
		return 0
	}
	return len(turns[len(turns)-1]) + 1
}
