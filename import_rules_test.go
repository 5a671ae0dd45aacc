package llmhedge

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os/exec"
	"path"
	"strings"
	"testing"
)

// importRules is the layering of docs/architecture.md: what each package
// below the root may import besides the standard library. The root (the
// Caddy layer) may import anything. A package that
// is not listed here fails the test, so a new package states its place.
var importRules = map[string][]string{
	"internal/jsonscan":          {"golang.org/x/sys/cpu"}, // whether the CPU has AVX2 (strmask_amd64.go)
	"internal/dashboard":         nil,
	"internal/sse":               {"internal/bufpool"},
	"internal/bufpool":           nil, // pooled byte buffers by size class (a leaf)
	"internal/sse/ssetest":       nil, // tests only: readers that split a stream
	"internal/jsonscan/jsontest": nil, // tests only: the JSON mutator
	"internal/limit":             nil,
	"internal/upconn":            nil,                  // the cleartext provider connection's pooled reads
	"internal/routing":           nil,                  // the cost of a provider and the pick within a tier
	"internal/freeport":          nil,                  // tests and the bench only: loopback ports never handed out twice
	"fleettest":                  nil,                  // tests only: the fleet of real processes
	"internal/cloud/cloudtest":   {"github.com/aws/*"}, // tests only: what the clouds send (a Bedrock exception frame)
	"e2e":                        nil,                  // tests only: a real Caddy, the official SDKs and the agents (its _test files import what they drive)
	// The request engine: every layer below it, the trace API, and no
	// Caddy, zap or Prometheus (TestEngineWithoutCaddy checks its whole
	// dependency graph too).
	"internal/engine": {"internal/wire", "internal/sse", "internal/jsonscan", "internal/genai", "internal/stream",
		"internal/health", "internal/limit", "internal/affinity", "internal/routing", "internal/dashboard",
		"internal/upconn", "internal/translate", "internal/cloud", "internal/dialect/*", "internal/bufpool",
		"github.com/cespare/xxhash/v2", "github.com/klauspost/compress/zstd", "go.opentelemetry.io/otel/*"},
	// The layers below the root (docs/architecture.md). A new package is
	// added here, in its layer, or the test fails.
	"internal/wire": {"internal/sse", "internal/jsonscan", "internal/genai"},
	// Translation between formats: pure functions over bytes and events.
	"internal/translate": {"internal/sse", "internal/jsonscan"},
	"internal/genai":     {"internal/jsonscan"},
	"internal/stream":    {"internal/wire", "internal/sse", "internal/jsonscan", "internal/bufpool"},
	"internal/health":    {"github.com/beorn7/perks/quantile", "internal/jsonscan", "internal/routing"}, // jsonscan: rate-limit numbers in an error body; routing: its Stats live in the entry
	"internal/affinity":  {"github.com/cespare/xxhash/v2"},
	// A dialect reads its providers' retry hints with limit's parsers (a leaf).
	"internal/dialect/*": {"internal/wire", "internal/sse", "internal/jsonscan", "internal/limit"},
	// Responses is Chat Completions' successor and reuses its codec: the one sibling edge.
	"internal/dialect/responses": {"internal/wire", "internal/sse", "internal/jsonscan", "internal/limit", "internal/dialect/openai"},
	"internal/cloud": {"internal/wire", "internal/dialect/*", "internal/sse", "internal/jsonscan",
		"github.com/aws/*", "cloud.google.com/go/*"},
	// The simulator is its own Caddy module and shares nothing with the
	// proxy; it checks Bedrock's SigV4 and writes its event stream as AWS does.
	"sim": {"github.com/caddyserver/caddy/*", "go.uber.org/zap", "github.com/dustin/go-humanize", "github.com/aws/*"},
}

func TestImportRules(t *testing.T) {
	out, err := exec.Command("go", "list", "-json=ImportPath,Imports", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const module = "github.com/llmhedge/caddy-llm-hedge"
	dec := json.NewDecoder(strings.NewReader(string(out)))
	checked := 0
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		if rel == "" || strings.HasPrefix(rel, "bench") {
			continue // the root and the benchmark tool may import anything
		}
		allowed, ok := ruleFor(rel)
		if !ok {
			t.Errorf("package %s has no import rule: add it to importRules and docs/architecture.md", rel)
			continue
		}
		checked++
		for _, imp := range p.Imports {
			if isStdlib(imp) {
				continue
			}
			target := strings.TrimPrefix(strings.TrimPrefix(imp, module), "/")
			if !matchesAny(target, allowed) {
				t.Errorf("%s imports %s: not allowed by its layer (allowed: %v)", rel, imp, allowed)
			}
		}
	}
	if checked < 3 {
		t.Fatalf("checked %d packages: go list found too few", checked)
	}
}

func ruleFor(rel string) ([]string, bool) {
	if r, ok := importRules[rel]; ok {
		return r, true
	}
	for pat, r := range importRules {
		if ok, _ := path.Match(pat, rel); ok && strings.HasSuffix(pat, "*") {
			return r, true
		}
	}
	return nil, false
}

func matchesAny(imp string, pats []string) bool {
	for _, p := range pats {
		if p == imp {
			return true
		}
		if strings.HasSuffix(p, "/*") && strings.HasPrefix(imp, strings.TrimSuffix(p, "*")) {
			return true
		}
	}
	return false
}

// isStdlib reports whether an import path is the standard library's: its
// first element has no dot.
func isStdlib(imp string) bool {
	first, _, _ := strings.Cut(imp, "/")
	return !strings.Contains(first, ".")
}

// The engine is a library a reader can hold without a server: nothing in
// its dependency graph is Caddy, zap or Prometheus.
func TestEngineWithoutCaddy(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "./internal/engine").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	n := 0
	for _, dep := range strings.Fields(string(out)) {
		n++
		for _, banned := range []string{"github.com/caddyserver/", "go.uber.org/zap", "github.com/prometheus/"} {
			if strings.HasPrefix(dep, banned) {
				t.Errorf("internal/engine depends on %s", dep)
			}
		}
	}
	if n < 20 {
		t.Fatalf("go list -deps listed %d packages: too few", n)
	}
}

// maxMethods bounds the methods of any one type in the module: a type
// that does everything is a package in disguise (docs/architecture.md).
const maxMethods = 30

// No type of the module has more than maxMethods methods of its own: the
// request's moments are functions over its state, each in the file of its
// moment, and the process's state is the Engine's. A dialect's methods
// that implement internal/wire's interfaces (the contract and its
// capabilities, stateless) are the contract's, not the type's.
func TestMethodCounts(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.Dir}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	fset := token.NewFileSet()
	contract := map[string]bool{}
	wf, err := parser.ParseFile(fset, "internal/wire/dialect.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	ast.Inspect(wf, func(n ast.Node) bool {
		if it, ok := n.(*ast.InterfaceType); ok {
			for _, m := range it.Methods.List {
				for _, name := range m.Names {
					contract[name.Name] = true
				}
			}
		}
		return true
	})
	if len(contract) < 20 {
		t.Fatalf("found %d methods in wire's interfaces: too few", len(contract))
	}
	checked := 0
	for _, dir := range strings.Fields(string(out)) {
		pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, pkg := range pkgs {
			counts := map[string]int{}
			for _, f := range pkg.Files {
				for _, d := range f.Decls {
					fd, ok := d.(*ast.FuncDecl)
					if !ok || fd.Recv == nil || len(fd.Recv.List) == 0 {
						continue
					}
					typ := fd.Recv.List[0].Type
					if st, ok := typ.(*ast.StarExpr); ok {
						typ = st.X
					}
					if ix, ok := typ.(*ast.IndexExpr); ok {
						typ = ix.X
					}
					if id, ok := typ.(*ast.Ident); ok {
						checked++
						if strings.Contains(dir, "/internal/dialect/") && contract[fd.Name.Name] {
							continue
						}
						counts[id.Name]++
					}
				}
			}
			for typ, n := range counts {
				if n > maxMethods {
					t.Errorf("%s: type %s has %d methods, over %d", dir, typ, n, maxMethods)
				}
			}
		}
	}
	if checked < 100 {
		t.Fatalf("counted %d methods: too few", checked)
	}
}
