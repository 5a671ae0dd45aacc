package agentbody

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

var write = flag.Bool("write", false, "write the generated bodies to testdata")

// TestBodiesAsGenerated keeps testdata and the generator the same: the
// stored bodies are the generator's output from Seed (go test -write
// rewrites them), valid JSON, each in the 50-300 KB of an agent's turn.
func TestBodiesAsGenerated(t *testing.T) {
	for _, f := range Formats {
		got := Generate(f)
		if *write {
			if err := os.WriteFile(filepath.Join("testdata", f+".json"), got, 0o644); err != nil {
				t.Fatal(err)
			}
			fmt.Printf("%s.json %d bytes\n", f, len(got))
			continue
		}
		if !bytes.Equal(got, Body(f)) {
			t.Errorf("%s: testdata differs from Generate (go test -write rewrites it)", f)
		}
		if !json.Valid(got) {
			t.Errorf("%s: not valid JSON", f)
		}
		if len(got) < 50_000 || len(got) > 300_000 {
			t.Errorf("%s: %d bytes, not an agent's 50-300 KB", f, len(got))
		}
		if f != "gemini" && bytes.Count(NonStream(got), []byte(`"stream":false`)) != 1 {
			t.Errorf("%s: NonStream did not make the one stream member false", f)
		}
	}
}
