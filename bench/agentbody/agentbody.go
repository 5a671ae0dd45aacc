// Package agentbody makes request bodies shaped like the coding agents'
// real requests, from a fixed seed: a long system prompt, a tool list with
// JSON schemas, and a conversation of tool calls and their results, in
// each client format's own words (Claude Code's Anthropic Messages, Codex's
// OpenAI Responses, opencode's Chat Completions, Gemini CLI's
// generateContent). The bench's agent modes send them, and the parse
// benchmarks read them. testdata holds each body as generated, with its
// size (testdata/README.md); TestBodiesAsGenerated keeps the files and the
// generator the same.
package agentbody

import (
	"embed"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
)

// Formats are the client formats, as the files in testdata are named.
var Formats = []string{"anthropic", "responses", "chat", "gemini"}

//go:embed testdata/*.json
var files embed.FS

// Body is the stored body of format (streamed: "stream":true, or for
// Gemini the streamGenerateContent path the caller names).
func Body(format string) []byte {
	b, err := files.ReadFile("testdata/" + format + ".json")
	if err != nil {
		panic("agentbody: no body for " + format)
	}
	return b
}

// NonStream is body with its top-level "stream":true made false (the
// generator writes it once, at the top level, after the model); Gemini's
// has no such member and is returned as is.
func NonStream(body []byte) []byte {
	return []byte(strings.Replace(string(body), `"stream":true`, `"stream":false`, 1))
}

// Model is the model every body names (Gemini's is in the path).
const Model = "agent-bench"

// Seed is the generator's fixed seed.
const Seed = 20261205

// Generate makes format's body from Seed.
func Generate(format string) []byte {
	g := &gen{r: rand.New(rand.NewPCG(Seed, uint64(len(format))))}
	conv := g.conversation()
	var v any
	switch format {
	case "anthropic":
		v = g.anthropic(conv)
	case "responses":
		v = g.responses(conv)
	case "chat":
		v = g.chat(conv)
	case "gemini":
		v = g.gemini(conv)
	default:
		panic("agentbody: unknown format " + format)
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// Shape: what every format's body holds (the figures of the issue's
// Claude Code body: a 10.7 KB system prompt, 20 tools, 37 tool calls).
const (
	systemBytes = 10_700
	toolCount   = 20
	toolCalls   = 37
)

// turn is one step of the agent's conversation: a user message, or the
// assistant's text with tool calls and their results.
type turn struct {
	user    string
	text    string
	calls   []call
	results []string
}

type call struct {
	id, name, args string
}

type tool struct {
	name, desc string
	schema     map[string]any
}

type gen struct {
	r     *rand.Rand
	tools []tool
}

var words = strings.Fields(`the a function file test error value return package import
	type struct interface method handler request response stream provider config body
	read write check build run fix change line module path name field index buffer
	client server proxy token model event should must when then with from into each
	all not only before after because which this that what where every one two three`)

// text is about n bytes of prose.
func (g *gen) text(n int) string {
	var b strings.Builder
	for b.Len() < n {
		if b.Len() > 0 {
			if g.r.IntN(12) == 0 {
				b.WriteString(".\n")
			} else {
				b.WriteByte(' ')
			}
		}
		b.WriteString(words[g.r.IntN(len(words))])
	}
	return b.String()
}

// code is about n bytes of a source file's lines, as a Read tool returns.
func (g *gen) code(n int) string {
	var b strings.Builder
	for line := 1; b.Len() < n; line++ {
		fmt.Fprintf(&b, "%6d\t%s%s(%s)\n", line, strings.Repeat("\t", g.r.IntN(3)),
			words[g.r.IntN(len(words))], g.text(20+g.r.IntN(50)))
	}
	return b.String()
}

func (g *gen) makeTools() {
	names := []string{"Read", "Write", "Edit", "Bash", "Glob", "Grep", "LS", "WebFetch", "TodoWrite", "Task",
		"NotebookEdit", "MultiEdit", "WebSearch", "ExitPlanMode", "BashOutput", "KillShell", "SlashCommand",
		"ListMcpResources", "ReadMcpResource", "AskUser"}
	for _, n := range names[:toolCount] {
		props := map[string]any{}
		var req []string
		for i := range 2 + g.r.IntN(4) {
			p := fmt.Sprintf("%s_%d", words[g.r.IntN(len(words))], i)
			props[p] = map[string]any{"type": []string{"string", "integer", "boolean"}[g.r.IntN(3)], "description": g.text(60 + g.r.IntN(120))}
			if i < 2 {
				req = append(req, p)
			}
		}
		g.tools = append(g.tools, tool{name: n, desc: g.text(300 + g.r.IntN(900)),
			schema: map[string]any{"type": "object", "properties": props, "required": req, "additionalProperties": false}})
	}
}

// conversation is the agent's session: a task, then turns of tool calls
// (one to three each) with their results, ending on a user message.
func (g *gen) conversation() []turn {
	g.makeTools()
	conv := []turn{{user: g.text(400)}}
	for n := 0; n < toolCalls; {
		k := min(1+g.r.IntN(3), toolCalls-n)
		t := turn{text: g.text(80 + g.r.IntN(300))}
		for range k {
			n++
			tl := g.tools[g.r.IntN(len(g.tools))]
			args, _ := json.Marshal(map[string]string{"file_path": "/work/src/" + words[g.r.IntN(len(words))] + ".go", "pattern": g.text(20)})
			t.calls = append(t.calls, call{id: fmt.Sprintf("call_%04d%s", n, g.id()), name: tl.name, args: string(args)})
			t.results = append(t.results, g.code(600+g.r.IntN(3400)))
		}
		conv = append(conv, t)
	}
	return append(conv, turn{user: g.text(200)})
}

func (g *gen) id() string {
	const abc = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, 20)
	for i := range b {
		b[i] = abc[g.r.IntN(len(abc))]
	}
	return string(b)
}
