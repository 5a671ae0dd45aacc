package translate

import (
	"encoding/json"
	"fmt"
)

// The intermediate form: a superset of the four formats. A client request
// is decoded into it (with the losses no target could carry), and the
// target's request is encoded from it (with the losses that target adds).

// Kind is the kind of one content block.
type Kind int

const (
	KindText Kind = iota
	KindImage
	KindDocument
	KindToolCall
	KindToolResult
	KindReasoning
)

// Opaque is provider state only its origin can read: Anthropic thinking
// signatures and redacted thinking, Gemini thoughtSignature, Responses
// encrypted reasoning. It goes back to its origin only, never forged.
type Opaque struct {
	Origin string // the format that produced it
	Kind   string // "signature", "redacted_thinking", "thought_signature", "encrypted_content"
	Value  string
}

// Block is one content block.
type Block struct {
	Kind Kind
	Text string // text, reasoning text, document title

	// Image and document sources: base64 Data with its MediaType, or a URL.
	MediaType string
	Data      string
	URL       string

	// Tool calls and results.
	ToolID   string
	ToolName string
	Args     json.RawMessage // a JSON object, exactly as the model wrote it
	Result   []Block         // a tool result's content
	IsError  bool

	Opaque *Opaque
	Cache  bool // a cache breakpoint ends here
}

// Message is one turn: Role is "user" or "assistant".
type Message struct {
	Role   string
	Blocks []Block
}

// Tool is a function the model may call.
type Tool struct {
	Name        string
	Description string
	Schema      json.RawMessage // JSON Schema of the arguments object
	Cache       bool
	// Custom marks a Responses custom tool: its input is free text,
	// carried to other formats as the string member "input" of the
	// arguments (customToolSchema).
	Custom bool
}

// customToolSchema is the arguments schema a custom tool's free-text
// input travels in.
var customToolSchema = json.RawMessage(`{"type":"object","properties":{"input":{"type":"string","description":"The tool input, as free text."}},"required":["input"]}`)

// customSet names the custom tools of a request.
func customSet(r *Request) map[string]bool {
	var set map[string]bool
	for _, t := range r.Tools {
		if t.Custom {
			if set == nil {
				set = map[string]bool{}
			}
			set[t.Name] = true
		}
	}
	return set
}

// customInput reads a custom tool call's free text from its arguments.
func customInput(args []byte) (string, error) {
	var in struct {
		Input *string `json:"input"`
	}
	if err := json.Unmarshal(args, &in); err != nil || in.Input == nil {
		return "", fmt.Errorf("custom tool arguments without a string input: %.80q", args)
	}
	return *in.Input, nil
}

// Tool choice modes.
const (
	ChoiceDefault = ""     // not stated: the target's default
	ChoiceAuto    = "auto" // may call tools
	ChoiceAny     = "any"  // must call some tool
	ChoiceNone    = "none" // must not call tools
	ChoiceTool    = "tool" // must call Name
)

// ToolChoice is what the model must do with the tools.
type ToolChoice struct {
	Mode            string
	Name            string
	DisableParallel bool
}

// Request is one completion request.
type Request struct {
	Model       string
	System      []Block // text blocks
	Messages    []Message
	Tools       []Tool
	ToolChoice  ToolChoice
	MaxTokens   int // 0: not stated
	Temperature *float64
	TopP        *float64
	TopK        *int
	Stop        []string
	Stream      bool

	// What Chat Completions and Gemini clients may ask besides (each
	// encoder carries it or names the loss): structured output (a Chat
	// response_format, a Gemini responseSchema or responseJsonSchema),
	// a sampling seed, penalties; nil, not stated.
	ResponseFormat   *ResponseFormat
	Seed             *int64
	FrequencyPenalty *float64
	PresencePenalty  *float64
}

// ResponseFormat is structured output: Type "json_object" (any JSON
// object) or "json_schema" (Schema, a JSON Schema, named Name, Strict as
// asked). A Gemini client's response schema is a json_schema named
// "response", not strict.
type ResponseFormat struct {
	Type        string
	Name        string
	Description string
	Schema      json.RawMessage
	Strict      bool
}

// jsonSchema adds a json_schema format's fields to m (Chat's
// response_format.json_schema, Responses' text.format).
func (rf *ResponseFormat) jsonSchema(m map[string]any) map[string]any {
	m["name"], m["schema"], m["strict"] = rf.Name, rf.Schema, rf.Strict
	if rf.Description != "" {
		m["description"] = rf.Description
	}
	return m
}

// structuredOutputLoss is the loss of an encoder whose target cannot
// enforce r's structured output (the answer could be any text): material.
func structuredOutputLoss(r *Request, losses []Loss) []Loss {
	switch {
	case r.ResponseFormat == nil:
		return losses
	case r.ResponseFormat.Type == "json_schema":
		return addLoss(losses, "structured output (a response JSON schema the target cannot enforce)", true)
	}
	return addLoss(losses, "structured output (JSON mode, which the target cannot enforce)", true)
}

// samplingLosses names the sampling knobs a target without them
// (Anthropic, Responses) drops: they change how an answer is drawn, not
// what is asked (advisory).
func samplingLosses(r *Request, losses []Loss) []Loss {
	if r.Seed != nil {
		losses = addLoss(losses, "seed", false)
	}
	if r.FrequencyPenalty != nil {
		losses = addLoss(losses, "frequency_penalty", false)
	}
	if r.PresencePenalty != nil {
		losses = addLoss(losses, "presence_penalty", false)
	}
	return losses
}

// Stop reasons of the intermediate form (Anthropic's names, the richest set).
const (
	StopEnd      = "end_turn"
	StopMax      = "max_tokens"
	StopSequence = "stop_sequence"
	StopTool     = "tool_use"
	StopRefusal  = "refusal"
)

// Usage counts tokens: Input excludes the cached reads and writes, as
// Anthropic counts; the OpenAI formats' input is the sum of the three.
type Usage struct {
	Input      int64
	Output     int64
	CacheRead  int64
	CacheWrite int64
	Reasoning  int64 // part of Output
}

// Response is one complete answer.
type Response struct {
	ID      string
	Model   string
	Blocks  []Block
	Stop    string
	StopSeq string
	Usage   Usage
}
