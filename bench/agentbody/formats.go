package agentbody

import (
	"bytes"
	"encoding/json"
)

// obj is a JSON object whose members keep their order, as a client writes
// them (model first, the conversation after).
type obj []member

type member struct {
	k string
	v any
}

func (o obj) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.k)
		v, err := json.Marshal(m.v)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// anthropic is Claude Code's request: a system prompt in cached text
// blocks, tools with input_schema, tool_use and tool_result blocks,
// metadata.user_id, adaptive thinking.
func (g *gen) anthropic(conv []turn) any {
	sys := g.text(systemBytes)
	var tools []any
	for _, t := range g.tools {
		tools = append(tools, obj{{"name", t.name}, {"description", t.desc}, {"input_schema", t.schema}})
	}
	var msgs []any
	for _, t := range conv {
		if t.user != "" {
			msgs = append(msgs, obj{{"role", "user"}, {"content", []any{obj{{"type", "text"}, {"text", t.user}}}}})
			continue
		}
		content := []any{obj{{"type", "text"}, {"text", t.text}}}
		var results []any
		for i, c := range t.calls {
			content = append(content, obj{{"type", "tool_use"}, {"id", "toolu_" + c.id}, {"name", c.name}, {"input", json.RawMessage(c.args)}})
			results = append(results, obj{{"type", "tool_result"}, {"tool_use_id", "toolu_" + c.id}, {"content", t.results[i]}})
		}
		msgs = append(msgs, obj{{"role", "assistant"}, {"content", content}}, obj{{"role", "user"}, {"content", results}})
	}
	return obj{
		{"model", Model},
		{"max_tokens", 32000},
		{"stream", true},
		{"thinking", obj{{"type", "adaptive"}}},
		{"metadata", obj{{"user_id", `{"session_id":"` + g.id() + `"}`}}},
		{"system", []any{
			obj{{"type", "text"}, {"text", "You are Claude Code, Anthropic's official CLI for Claude."}, {"cache_control", obj{{"type", "ephemeral"}}}},
			obj{{"type", "text"}, {"text", sys}, {"cache_control", obj{{"type", "ephemeral"}}}},
		}},
		{"messages", msgs},
		{"tools", tools},
	}
}

// responses is Codex's request: instructions, input items (messages,
// reasoning with encrypted content, function_call and its output),
// function tools, store false, the encrypted reasoning included.
func (g *gen) responses(conv []turn) any {
	var tools []any
	for _, t := range g.tools {
		tools = append(tools, obj{{"type", "function"}, {"name", t.name}, {"description", t.desc}, {"strict", false}, {"parameters", t.schema}})
	}
	var input []any
	for _, t := range conv {
		if t.user != "" {
			input = append(input, obj{{"type", "message"}, {"role", "user"}, {"content", []any{obj{{"type", "input_text"}, {"text", t.user}}}}})
			continue
		}
		input = append(input, obj{{"type", "reasoning"}, {"summary", []any{}}, {"encrypted_content", g.id() + g.text(400)}})
		input = append(input, obj{{"type", "message"}, {"role", "assistant"}, {"content", []any{obj{{"type", "output_text"}, {"text", t.text}}}}})
		for i, c := range t.calls {
			input = append(input, obj{{"type", "function_call"}, {"name", c.name}, {"arguments", c.args}, {"call_id", c.id}})
			input = append(input, obj{{"type", "function_call_output"}, {"call_id", c.id}, {"output", t.results[i]}})
		}
	}
	return obj{
		{"model", Model},
		{"stream", true},
		{"instructions", g.text(systemBytes)},
		{"input", input},
		{"tools", tools},
		{"tool_choice", "auto"},
		{"parallel_tool_calls", false},
		{"reasoning", obj{{"effort", "medium"}, {"summary", "auto"}}},
		{"store", false},
		{"include", []string{"reasoning.encrypted_content"}},
		{"prompt_cache_key", g.id()},
	}
}

// chat is opencode's request through @ai-sdk/openai-compatible: a system
// message, assistant tool_calls and tool messages, function tools,
// usage in the stream.
func (g *gen) chat(conv []turn) any {
	var tools []any
	for _, t := range g.tools {
		tools = append(tools, obj{{"type", "function"}, {"function", obj{{"name", t.name}, {"description", t.desc}, {"parameters", t.schema}}}})
	}
	msgs := []any{obj{{"role", "system"}, {"content", g.text(systemBytes)}}}
	for _, t := range conv {
		if t.user != "" {
			msgs = append(msgs, obj{{"role", "user"}, {"content", t.user}})
			continue
		}
		var calls []any
		for _, c := range t.calls {
			calls = append(calls, obj{{"id", c.id}, {"type", "function"}, {"function", obj{{"name", c.name}, {"arguments", c.args}}}})
		}
		msgs = append(msgs, obj{{"role", "assistant"}, {"content", t.text}, {"tool_calls", calls}})
		for i, c := range t.calls {
			msgs = append(msgs, obj{{"role", "tool"}, {"tool_call_id", c.id}, {"content", t.results[i]}})
		}
	}
	return obj{
		{"model", Model},
		{"max_tokens", 32000},
		{"temperature", 0},
		{"messages", msgs},
		{"tools", tools},
		{"tool_choice", "auto"},
		{"stream", true},
		{"stream_options", obj{{"include_usage", true}}},
	}
}

// gemini is Gemini CLI's request: contents with functionCall and
// functionResponse parts, a systemInstruction, function declarations,
// thinking in generationConfig. The model and the stream mode are in the
// path.
func (g *gen) gemini(conv []turn) any {
	var decls []any
	for _, t := range g.tools {
		decls = append(decls, obj{{"name", t.name}, {"description", t.desc}, {"parametersJsonSchema", t.schema}})
	}
	var contents []any
	for _, t := range conv {
		if t.user != "" {
			contents = append(contents, obj{{"role", "user"}, {"parts", []any{obj{{"text", t.user}}}}})
			continue
		}
		parts := []any{obj{{"text", t.text}}}
		var results []any
		for i, c := range t.calls {
			parts = append(parts, obj{{"functionCall", obj{{"id", c.id}, {"name", c.name}, {"args", json.RawMessage(c.args)}}}})
			results = append(results, obj{{"functionResponse", obj{{"id", c.id}, {"name", c.name}, {"response", obj{{"output", t.results[i]}}}}}})
		}
		contents = append(contents, obj{{"role", "model"}, {"parts", parts}}, obj{{"role", "user"}, {"parts", results}})
	}
	return obj{
		{"contents", contents},
		{"systemInstruction", obj{{"role", "user"}, {"parts", []any{obj{{"text", g.text(systemBytes)}}}}}},
		{"tools", []any{obj{{"functionDeclarations", decls}}}},
		{"generationConfig", obj{{"temperature", 0}, {"topP", 1}, {"maxOutputTokens", 32000}, {"thinkingConfig", obj{{"includeThoughts", true}, {"thinkingBudget", 8192}}}}},
	}
}
