package translate

import (
	"fmt"
	"strings"
	"testing"
)

// manyFields is a Responses request with n unknown top-level fields, each a
// material loss of its own (about 12 bytes a field: 80,000 fill 1 MB).
func manyFields(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"model":"m","store":false,"input":"x"`)
	for i := range n {
		fmt.Fprintf(&b, `,"x%06d":1`, i)
	}
	b.WriteString("}")
	return []byte(b.String())
}

// manyGrammars is a Responses request with n custom tools of a grammar
// each: n advisory losses of distinct names, none material.
func manyGrammars(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"model":"m","store":false,"max_output_tokens":64,"input":"x","tools":[`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"type":"custom","name":"t%06d","format":{"type":"grammar","syntax":"lark","definition":"start: /.+/"}}`, i)
	}
	b.WriteString("]}")
	return []byte(b.String())
}

// The losses a request collects are bounded, whatever it holds: each is
// compared with those already collected, so an unbounded list made the
// bookkeeping quadratic (a 1 MB body of 80,000 unknown fields took seconds
// to refuse, a 4 MB one minutes). The outcome is unchanged: the first
// maxNamedLosses are named, and what was left unnamed is said.
func TestLossesBounded(t *testing.T) {
	const most = maxNamedLosses + 3 // the named ones, one material beyond them, a note of the rest per kind
	p := responsesToAnthropic{}
	for _, c := range []struct {
		name     string
		body     []byte
		material bool
	}{
		{"unknown fields", manyFields(5000), true},
		{"grammars of custom tools", manyGrammars(5000), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr, err := p.Translate(c.body, "claude")
			if err != nil {
				t.Fatal(err)
			}
			if Material(tr.Losses) != c.material {
				t.Fatalf("material %v, want %v", Material(tr.Losses), c.material)
			}
			if len(tr.Losses) > most {
				t.Fatalf("%d losses collected, want at most %d", len(tr.Losses), most)
			}
			if d := Describe(tr.Losses, c.material); !strings.HasSuffix(d, unnamedLosses) {
				t.Errorf("the losses do not say some were left unnamed: %q", d)
			}
		})
	}
}

// Each addLoss compares the new loss with the list it is given, so the
// list's length bounds its work: added one by one, any number of distinct
// losses keeps it bounded. A material loss is never left out while the
// list holds none (the outcome would change).
func TestAddLossWorkBounded(t *testing.T) {
	const most = maxNamedLosses + 3
	for _, material := range []bool{false, true} {
		var losses []Loss
		for i := range 10 * maxNamedLosses {
			losses = addLoss(losses, fmt.Sprintf("loss %d", i), material)
			if len(losses) > most {
				t.Fatalf("material %v: after %d distinct losses the list holds %d, want at most %d", material, i+1, len(losses), most)
			}
		}
		losses = addLoss(losses, "the one that refuses", true)
		if !Material(losses) {
			t.Fatalf("material %v: a material loss beyond the named ones was left out: %v", material, losses)
		}
	}
}

// BenchmarkTranslateUnknownFields translates (refuses) a 1 MB request of
// 80,000 unknown fields: linear in the body.
func BenchmarkTranslateUnknownFields(b *testing.B) {
	body := manyFields(80000)
	p := responsesToAnthropic{}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if tr, err := p.Translate(body, "claude"); err != nil || !Material(tr.Losses) {
			b.Fatal(err)
		}
	}
}
