package sim

import (
	"fmt"
	"path"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// Defaults applied to a zero Config.
const (
	DefaultText   = "The quick brown fox jumps over the lazy dog."
	DefaultTokens = 12
	DefaultPings  = 1
)

// maxTokens bounds the deltas of one response so a typo cannot make the
// simulator build a gigabyte of events.
const maxTokens = 1 << 20

// Config is how the simulator behaves. The zero value is a healthy, instant
// provider; the same struct is the JSON config of the Caddy module.
type Config struct {
	// Delay before the first content delta of a stream (message_start,
	// content_block_start and pings are sent at once, as real providers do).
	// A non-streaming response is delayed by first_token + tokens × token_delay.
	// Default 0.
	FirstToken caddy.Duration `json:"first_token,omitempty"`

	// Share of requests, in percent (0-100), that wait SlowFirstToken instead
	// of FirstToken: together they make a bimodal first-token distribution.
	// Default 0.
	SlowPercent float64 `json:"slow_percent,omitempty"`

	// The first-token delay of the slow share of requests. Default 0.
	SlowFirstToken caddy.Duration `json:"slow_first_token,omitempty"`

	// Spread of the first-token delay, in percent (0-100): each request
	// waits its delay times a uniform draw from [1-j/100, 1+j/100], as a
	// real endpoint's first token is never exactly on time. Default 0.
	FirstTokenJitter float64 `json:"first_token_jitter,omitempty"`

	// Delay between two content deltas. Default 0 (no think time, for load
	// benchmarks).
	TokenDelay caddy.Duration `json:"token_delay,omitempty"`

	// Number of content deltas (and output tokens) per response. Default 12.
	Tokens int `json:"tokens,omitempty"`

	// Text of every response, split by words into Tokens deltas and repeated
	// when it has fewer words than that. Default "The quick brown fox jumps
	// over the lazy dog."
	Text string `json:"text,omitempty"`

	// Model reported in responses. Default: the model of the request.
	Model string `json:"model,omitempty"`

	// Number of Anthropic ping events sent before the first delta. Default 1.
	Pings *int `json:"pings,omitempty"`

	// Reported cache_read_input_tokens. OpenAI reports it as cached_tokens,
	// included in prompt_tokens as OpenAI does; Gemini as
	// cachedContentTokenCount, included in promptTokenCount. Default 0.
	CacheRead int `json:"cache_read,omitempty"`

	// API key the requests must carry (Anthropic x-api-key, OpenAI
	// Authorization: Bearer, Gemini x-goog-api-key or ?key=); others get 401
	// (Gemini: 403 without a key, 400 API_KEY_INVALID with a wrong one).
	// Default: any key is accepted.
	Key string `json:"key,omitempty"`

	// Further API keys accepted besides Key; quotas count per key.
	// Default none.
	Keys []string `json:"keys,omitempty"`

	// Requests allowed per key per window; over it, 429 with Retry-After
	// until the window ends. Every answer carries the rate-limit headers of
	// its dialect (anthropic-ratelimit-* on /v1/messages, x-ratelimit-* on
	// OpenAI paths). Default: unlimited.
	QuotaRequests *Quota `json:"quota_requests,omitempty"`

	// Tokens (input estimated as body bytes / 4, plus the response's
	// tokens) allowed per key per window. Default: unlimited.
	QuotaTokens *Quota `json:"quota_tokens,omitempty"`

	// How the quota's reset headers are written, as providers do besides
	// the documented forms: "azure" sends the remaining counts with no
	// reset header (Azure OpenAI), "seconds" a bare number of seconds
	// ("60"), "past" a reset 10 s in the past (the provider's clock
	// behind). Default "": each dialect's documented form.
	QuotaResets string `json:"quota_resets,omitempty"`

	// Cloud the simulator fronts: "bedrock", "vertex" or
	// "azure" checks that cloud's URL, body rules and auth, then answers in
	// its framing (Bedrock: AWS event-stream frames, a stream error as an
	// exception frame). Default "": the native APIs.
	Wire string `json:"wire,omitempty"`

	// Region a Bedrock SigV4 signature must be scoped to. Default us-east-1.
	Region string `json:"region,omitempty"`

	// The AWS access key id and secret a Bedrock request must be signed
	// with (SigV4, service bedrock); the signature is verified. Default: a
	// Bearer Key (a Bedrock API key) is required instead.
	AWSAccessKey string `json:"aws_access_key,omitempty"`
	AWSSecretKey string `json:"aws_secret_key,omitempty"`

	// Whether the model accepts an assistant prefill: a conversation ending
	// in an assistant turn (Anthropic or chat messages, a Responses input
	// message, Gemini contents ending with role model), whose text parts
	// joined are the prefill P. Default "on": when P is a prefix of the
	// answer, only the rest is sent, starting with the rest of the delta P
	// ends in (faults apply to the rest; a fault's after counts its deltas);
	// the input tokens grow by the deltas P covers completely and the output
	// tokens are the deltas sent. When P is not a prefix, the whole answer.
	// The Anthropic-bodied wires (native, bedrock, vertex) refuse a P that
	// ends in whitespace: 400 invalid_request_error "messages: final
	// assistant content cannot end with trailing whitespace". "off": a model
	// without prefill refuses such a request with a 400 in its dialect whose
	// message contains "assistant message prefill" (PrefillUnsupported*).
	// "restart": the model takes the assistant turn as context and answers
	// the whole answer from its start (as Gemini and OpenAI's own API do).
	// A prefill is checked after the quota and before any fault.
	Prefill string `json:"prefill,omitempty"`

	// "deterministic" (the default): every answer is Text. "sampled": every
	// request gets a different text: the first two words of Text, then the
	// other words (Text split at whitespace, joined by single spaces) in a
	// random order drawn from the seeded source; an order equal to Text's or
	// to the previous request's is rotated by one, so two requests in a row
	// differ whenever Text has at least three words after the first two,
	// not all the same.
	Sampling string `json:"sampling,omitempty"`

	// Seed of the random choices (slow share, fault percent). Default 0:
	// seeded from the clock.
	Seed int64 `json:"seed,omitempty"`

	// A scripted tool loop, for agents: a request that offers one of these
	// tools (by name, in its tools list) is answered with a call of the
	// first one it offers, unless its last turn (an assistant prefill
	// aside) carries a tool result: that turn is answered with ToolAnswer,
	// one delta per word. Each dialect's shape: Anthropic tool_use /
	// tool_result, Chat Completions tool_calls / role tool, Responses
	// function_call / function_call_output, Gemini functionCall /
	// functionResponse. A call streams its arguments in pieces of 16 bytes
	// (Gemini: whole), which are its deltas for faults and usage.
	// Default none: every answer is Text.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`

	// The answer after a tool result; "{result}" is replaced by the
	// result's text. Default "The tool returned: {result}".
	ToolAnswer string `json:"tool_answer,omitempty"`

	// Anthropic's checks of thinking in the history, on /v1/messages (the
	// native wire): with thinking on (enabled or adaptive), a thinking
	// block of an assistant turn whose signature the simulator did not
	// issue (ThinkingSignature) gets 400 invalid_request_error "Invalid
	// `signature` in `thinking` block", and so does a conversation ending
	// in a user turn with a tool_result whose assistant turn before it
	// does not start with a thinking or redacted_thinking block ("Expected
	// `thinking` or `redacted_thinking`..."). Checked before the quota and
	// any fault. The simulator's answers carry no thinking. Default false.
	RequireThinkingSignatures bool `json:"require_thinking_signatures,omitempty"`

	// Every text answer ends as one the request's output-token limit cut
	// short: Anthropic stop_reason max_tokens, Chat Completions
	// finish_reason length, Gemini finishReason MAX_TOKENS, Responses
	// status incomplete with incomplete_details.reason max_output_tokens
	// (streamed: response.incomplete). The text and usage are as without
	// it; a scripted tool call ends as a call. Default false: a normal end.
	LengthStop bool `json:"length_stop,omitempty"`

	// Injected faults; the first one that matches a request applies to it.
	// Default none.
	Faults []Fault `json:"faults,omitempty"`
}

// FaultKind names what goes wrong.
type FaultKind string

// The fault kinds.
const (
	// FaultStatus answers with Fault.Status and an error body in the
	// request's dialect.
	FaultStatus FaultKind = "status"
	// FaultFake200 answers 200 with an error as the body or first event.
	FaultFake200 FaultKind = "fake200"
	// FaultCut ends the stream after Fault.After deltas without its terminal
	// event; a non-streaming body is cut in half and the connection dropped.
	FaultCut FaultKind = "cut"
	// FaultStall sends nothing more after Fault.After deltas until the client
	// goes away; a non-streaming request gets no response at all.
	FaultStall FaultKind = "stall"
	// FaultMalformed sends one event whose data is not JSON after Fault.After
	// deltas, then goes on normally; a non-streaming body is truncated JSON.
	FaultMalformed FaultKind = "malformed"
	// FaultReset closes the connection without any response, like a crash.
	FaultReset FaultKind = "reset"
	// FaultContextLength answers 400 "the prompt is too long" in the
	// request's dialect, worded as the real provider words it.
	FaultContextLength FaultKind = "context_length"
)

var faultKinds = []FaultKind{FaultStatus, FaultFake200, FaultCut, FaultStall, FaultMalformed, FaultReset, FaultContextLength}

// midStream reports whether the fault strikes after the response started.
func (k FaultKind) midStream() bool {
	return k == FaultCut || k == FaultStall || k == FaultMalformed
}

// Fault is one injected failure.
type Fault struct {
	// What goes wrong: status, fake200, cut, stall, malformed or reset.
	Kind FaultKind `json:"kind"`

	// HTTP status of a status fault (default 500); for fake200 it picks the
	// error type of the body (default 529, overloaded_error; Gemini 503
	// UNAVAILABLE).
	Status int `json:"status,omitempty"`

	// Probability in percent (0-100) that a matching request gets the fault.
	// Default 0, meaning 100.
	Percent float64 `json:"percent,omitempty"`

	// The fault applies to the first Count requests it strikes, then it is
	// spent. Default 0: unlimited.
	Count int `json:"count,omitempty"`

	// For cut, stall and malformed: the number of content deltas sent before
	// the fault. Default 0.
	After int `json:"after,omitempty"`

	// Retry-After header value sent with the fault, verbatim (seconds or an
	// HTTP date). Default none.
	RetryAfter string `json:"retry_after,omitempty"`

	// Send x-should-retry: false with the fault. Default false.
	NoRetry bool `json:"no_retry,omitempty"`

	// Glob (path.Match syntax) of the request models the fault applies to.
	// Default: every model.
	Model string `json:"model,omitempty"`

	// Name of a request header the fault applies to: requests without it
	// are spared. Default: every request.
	Header string `json:"header,omitempty"`

	// The turn of a scripted tool loop (Config.ToolCalls) the fault
	// applies to: "tool_call" (answered with a call) or "tool_result" (the
	// request carries a tool result). Default: every request.
	Turn string `json:"turn,omitempty"`

	// Wait before the fault strikes. Default 0.
	Delay caddy.Duration `json:"delay,omitempty"`

	// The error message of a status fault. Default: the dialect's usual
	// message for the status (for 400, the prompt is too long).
	Message string `json:"message,omitempty"`
}

// withDefaults returns c with every unset field at its default.
func (c Config) withDefaults() Config {
	if c.Tokens == 0 {
		c.Tokens = DefaultTokens
	}
	if c.Text == "" {
		c.Text = DefaultText
	}
	if c.Pings == nil {
		c.Pings = new(DefaultPings)
	}
	return c
}

// Validate reports the first nonsense value in c.
func (c Config) Validate() error {
	for _, d := range []struct {
		name string
		d    caddy.Duration
	}{{"first_token", c.FirstToken}, {"slow", c.SlowFirstToken}, {"token_delay", c.TokenDelay}} {
		if d.d < 0 {
			return fmt.Errorf("%s %v: must not be negative", d.name, time.Duration(d.d))
		}
	}
	switch c.Wire {
	case "", WireBedrock, WireVertex, WireAzure:
	default:
		return fmt.Errorf("wire %q: want bedrock, vertex or azure", c.Wire)
	}
	switch c.Prefill {
	case "", PrefillOn, PrefillOff, PrefillRestart:
	default:
		return fmt.Errorf("prefill %q: want on, off or restart", c.Prefill)
	}
	switch c.Sampling {
	case "", SamplingDeterministic, SamplingSampled:
	default:
		return fmt.Errorf("sampling %q: want deterministic or sampled", c.Sampling)
	}
	if err := validPercent(c.SlowPercent); err != nil {
		return fmt.Errorf("slow: %w", err)
	}
	if err := validPercent(c.FirstTokenJitter); err != nil {
		return fmt.Errorf("jitter: %w", err)
	}
	if c.Tokens < 0 || c.Tokens > maxTokens {
		return fmt.Errorf("tokens %d: must be between 1 and %d", c.Tokens, maxTokens)
	}
	if c.Pings != nil && *c.Pings < 0 {
		return fmt.Errorf("pings %d: must not be negative", *c.Pings)
	}
	switch c.QuotaResets {
	case "", "azure", "seconds", "past":
	default:
		return fmt.Errorf("quota_resets %q: want azure, seconds or past", c.QuotaResets)
	}
	for _, q := range []*Quota{c.QuotaRequests, c.QuotaTokens} {
		if q != nil && (q.N < 0 || q.Per <= 0) {
			return fmt.Errorf("quota %d per %v: want n >= 0 per a positive duration", q.N, time.Duration(q.Per))
		}
	}
	if c.CacheRead < 0 {
		return fmt.Errorf("cache_read %d: must not be negative", c.CacheRead)
	}
	for i, f := range c.Faults {
		if err := f.Validate(); err != nil {
			return fmt.Errorf("fault %d: %w", i, err)
		}
	}
	for _, tc := range c.ToolCalls {
		if err := tc.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// Validate reports the first nonsense value in f.
func (f Fault) Validate() error {
	if !validKind(f.Kind) {
		return fmt.Errorf("unknown kind %q (want one of %v)", f.Kind, faultKinds)
	}
	if err := validStatus(f.Status); err != nil {
		return err
	}
	if f.Kind == FaultStatus && f.Status != 0 && f.Status < 200 {
		return fmt.Errorf("status %d: a status fault needs a final status (200-599)", f.Status)
	}
	if err := validPercent(f.Percent); err != nil {
		return err
	}
	if f.Count < 0 {
		return fmt.Errorf("count %d: must not be negative", f.Count)
	}
	if f.After < 0 {
		return fmt.Errorf("after %d: must not be negative", f.After)
	}
	if f.Delay < 0 {
		return fmt.Errorf("delay %v: must not be negative", time.Duration(f.Delay))
	}
	if f.Turn != "" && f.Turn != TurnToolCall && f.Turn != TurnToolResult {
		return fmt.Errorf("turn %q: want %s or %s", f.Turn, TurnToolCall, TurnToolResult)
	}
	if _, err := path.Match(f.Model, ""); err != nil {
		return fmt.Errorf("model %q: %w", f.Model, err)
	}
	return nil
}

func validKind(k FaultKind) bool {
	for _, known := range faultKinds {
		if k == known {
			return true
		}
	}
	return false
}

func validStatus(code int) error {
	if code != 0 && (code < 100 || code > 599) {
		return fmt.Errorf("status %d: must be between 100 and 599", code)
	}
	return nil
}

func validPercent(p float64) error {
	if p < 0 || p > 100 || p != p {
		return fmt.Errorf("percent %v: must be between 0 and 100", p)
	}
	return nil
}
