package llmhedge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/llmhedge/caddy-llm-hedge/sim"
)

// docSnippet is one fenced Caddyfile block of a Markdown file. Its kind is
// the fence's second word (CONTRIBUTING.md, "Docs"): "" a whole Caddyfile,
// "site" the inside of a site block, "llm_hedge" the inside of an
// llm_hedge block, "syntax" a grammar with placeholders, never adapted.
type docSnippet struct {
	file string
	line int
	kind string
	text string
}

var fenceOpen = regexp.MustCompile("^( *)```+\\s*(\\S*)\\s*(\\S*)")

// docSnippets reads the ```caddyfile blocks of a Markdown file, with the
// fence's indentation (a block inside a list item) removed.
func docSnippets(t *testing.T, file string) []docSnippet {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []docSnippet
	lines := strings.Split(string(b), "\n")
	for i := 0; i < len(lines); i++ {
		m := fenceOpen.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		indent, lang, kind := m[1], m[2], m[3]
		var body []string
		start := i + 1
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			body = append(body, strings.TrimPrefix(lines[i], indent))
		}
		if lang == "caddyfile" {
			out = append(out, docSnippet{file: file, line: start, kind: kind, text: strings.Join(body, "\n") + "\n"})
		}
	}
	return out
}

// wrap makes a snippet a whole Caddyfile: a fragment goes inside a site
// block (and an llm_hedge block, with a provider if it names none).
func (s docSnippet) wrap() string {
	indent := func(text, tabs string) string {
		var b strings.Builder
		for l := range strings.Lines(text) {
			if strings.TrimSpace(l) != "" {
				b.WriteString(tabs)
			}
			b.WriteString(l)
		}
		return b.String()
	}
	switch s.kind {
	case "site":
		return "http://127.0.0.1:0 {\n" + indent(s.text, "\t") + "}\n"
	case "llm_hedge":
		inner := s.text
		if !regexp.MustCompile(`(?m)^provider\s`).MatchString(inner) {
			inner = "provider docs http://127.0.0.1:9001\n" + inner
		}
		return "http://127.0.0.1:0 {\n\tllm_hedge {\n" + indent(inner, "\t\t") + "\t}\n}\n"
	}
	return s.text
}

// TestDocsCaddyfileSnippets checks that every Caddyfile block of the README
// and docs/ pastes clean: `caddy fmt` leaves it unchanged and `caddy adapt`
// takes it without a warning. Grammar blocks (```caddyfile syntax) are not
// Caddyfiles and are skipped.
func TestDocsCaddyfileSnippets(t *testing.T) {
	files, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{"README.md", "CONTRIBUTING.md"}, files...)
	var snippets []docSnippet
	for _, f := range files {
		snippets = append(snippets, docSnippets(t, f)...)
	}
	example, err := os.ReadFile("Caddyfile.example")
	if err != nil {
		t.Fatal(err)
	}
	snippets = append(snippets, docSnippet{file: "Caddyfile.example", line: 1, text: string(example)})
	if len(snippets) < 10 {
		t.Fatalf("found %d Caddyfile blocks; the extraction is broken", len(snippets))
	}
	adapter := caddyconfig.GetAdapter("caddyfile")
	env := regexp.MustCompile(`\{\$([A-Za-z0-9_]+)`)
	checked := 0
	for _, s := range snippets {
		t.Run(fmt.Sprintf("%s:%d", s.file, s.line), func(t *testing.T) {
			switch s.kind {
			case "syntax":
				t.Skip("grammar, not a Caddyfile")
			case "", "site", "llm_hedge":
			default:
				t.Fatalf("fence kind %q: want none, site, llm_hedge or syntax", s.kind)
			}
			checked++
			if got := caddyfile.Format([]byte(s.text)); !bytes.Equal(got, []byte(s.text)) {
				t.Errorf("not caddy fmt clean; formatted:\n%s", got)
			}
			for _, m := range env.FindAllStringSubmatch(s.text, -1) {
				if _, set := os.LookupEnv(m[1]); !set {
					t.Setenv(m[1], "docs-"+strings.ToLower(m[1]))
				}
			}
			cfg := s.wrap()
			out, warnings, err := adapter.Adapt([]byte(cfg), map[string]any{"filename": s.file})
			if err != nil {
				t.Fatalf("adapt: %v\n%s", err, cfg)
			}
			for _, w := range warnings {
				t.Errorf("adapt warning: %s\n%s", w, cfg)
			}
			if !json.Valid(out) {
				t.Errorf("adapt gave invalid JSON: %s", out)
			}
		})
	}
	if checked == 0 {
		t.Fatal("no block was checked")
	}
}

// TestReadmeMetricsTable checks that the README's metrics table lists every
// registered series with its labels, and nothing else.
func TestReadmeMetricsTable(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Metrics\n")
	if !ok {
		t.Fatal("README has no Metrics section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_]+\\{[a-z_,]*\\})`").FindAllStringSubmatch(section, -1) {
		documented = append(documented, ns+"_"+sub+"_"+m[1])
	}

	var registered []string
	descs := make(chan *prometheus.Desc, 64)
	for _, c := range newHandlerMetrics().all() {
		c.Describe(descs)
	}
	close(descs)
	desc := regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`)
	for d := range descs {
		m := desc.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("no name in %s", d)
		}
		registered = append(registered, m[1]+"{"+m[2]+"}")
	}
	slices.Sort(documented)
	slices.Sort(registered)
	if !slices.Equal(documented, registered) {
		t.Errorf("README metrics table:\n  %s\nregistered:\n  %s", strings.Join(documented, "\n  "), strings.Join(registered, "\n  "))
	}
}

// TestReadmeBuildAndRealKeys checks the README's first build command works
// from a checkout (the module is not on the module proxy), and that a whole
// Caddyfile with Anthropic, Bedrock and OpenAI keys from the environment
// comes before the syntax reference.
func TestReadmeBuildAndRealKeys(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	build := regexp.MustCompile(`(?m)^xcaddy build .*$`).FindString(string(b))
	if !strings.HasSuffix(build, "=.") {
		t.Errorf("first build command %q does not build the checkout (`--with module@version=.`)", build)
	}
	var example *docSnippet
	for _, s := range docSnippets(t, "README.md") {
		if s.kind == "syntax" {
			break
		}
		if s.kind == "" && strings.Contains(s.text, "llm_hedge") {
			example = &s
			break
		}
	}
	if example == nil {
		t.Fatal("no whole Caddyfile with llm_hedge before the syntax reference")
	}
	out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(example.text), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"api":"anthropic"`, `"api":"bedrock"`, `"api":"openai"`,
		`"key":"{env.ANTHROPIC_API_KEY}"`, `"key":"{env.OPENAI_API_KEY}"`} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("real-keys example lacks %s: %s", want, out)
		}
	}
}

// The pages a newcomer reads first stay short: the README at most 20 KiB,
// docs/performance.md (what is measured, today's table, how to rerun it)
// at most 25 KiB; the measuring rounds are docs/performance-history.md.
func TestDocSizes(t *testing.T) {
	for _, f := range []struct {
		name string
		max  int
	}{{"README.md", 20 << 10}, {"docs/performance.md", 25 << 10}} {
		b, err := os.ReadFile(f.name)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > f.max {
			t.Errorf("%s is %d bytes, over %d", f.name, len(b), f.max)
		}
	}
}
