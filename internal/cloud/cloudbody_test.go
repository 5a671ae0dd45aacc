package cloud

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// spliced is the rewrite member by member: each kept member re-emitted as
// "key":value, joined by commas, then the set members. The pieces must
// make the same body for a compact one, and the same members, in the same
// order, for any.
func spliced(body []byte, drop []string, set map[string]json.RawMessage) ([]byte, error) {
	keys := slices.Sorted(maps.Keys(set))
	out := []byte{'{'}
	err := jsonscan.ScanTopLevel(body, func(key []byte, vStart, vEnd int) bool {
		var name string // the key unescaped, by encoding/json: not the code under test
		if json.Unmarshal(append(append([]byte{'"'}, key...), '"'), &name) == nil &&
			(slices.Contains(drop, name) || slices.Contains(keys, name)) {
			return true
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(append(append(append(out, '"'), key...), '"', ':'), body[vStart:vEnd]...)
		return true
	})
	for _, k := range keys {
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(append(wire.AppendJSONString(out, k), ':'), set[k]...)
	}
	return append(out, '}'), err
}

var (
	bedrockSet = map[string]json.RawMessage{"anthropic_version": json.RawMessage(BedrockAnthropicVersion)}
	twoSet     = map[string]json.RawMessage{"anthropic_version": json.RawMessage(`"v"`), "anthropic_beta": json.RawMessage(`["b"]`)}
)

// The pieces of a compact body's rewrite make what re-emitting its members
// makes, wherever the dropped members are: first, between, last, repeated,
// escaped, all of them, none.
func TestCloudPiecesCompact(t *testing.T) {
	for _, b := range []string{
		`{"model":"m","stream":true,"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
		`{"max_tokens":5,"model":"m","messages":[],"stream":true}`,
		`{"messages":[],"model":"m","system":"s","stream":false,"tools":[]}`,
		`{"mod\u0065l":"m","anthropic_version":"old","system":"s"}`,
		`{"model":"m","stream":false,"model":"n"}`,
		`{"system":"s"}`,
		`{}`,
	} {
		for _, set := range []map[string]json.RawMessage{bedrockSet, twoSet, nil} {
			want, err := spliced([]byte(b), []string{"model", "stream"}, set)
			if err != nil {
				t.Fatal(err)
			}
			pieces, n, err := cloudPieces([]byte(b), nil, []string{"model", "stream"}, set)
			got := bytes.Join(pieces, nil)
			if err != nil || string(got) != string(want) || n != len(got) {
				t.Errorf("%s (%d set): pieces make %s (%d bytes said, %v), want %s", b, len(set), got, n, err, want)
			}
		}
	}
}

// An agent's turn is one piece of the body where it lies, and the new
// bytes: nothing of the body is copied.
func TestCloudPiecesKeepTheBody(t *testing.T) {
	messages := bytes.Repeat([]byte(`{"role":"user","content":"a long turn"},`), 2000)
	body := []byte(`{"model":"m","messages":[` + string(messages) + `{}],"max_tokens":5,"stream":true}`)
	var top jsonscan.Top
	if err := top.Index(body); err != nil {
		t.Fatal(err)
	}
	pieces, _, err := cloudPieces(body, &top, []string{"model", "stream"}, bedrockSet)
	if err != nil || len(pieces) != 3 {
		t.Fatalf("%d pieces, %v: want the brace, the run, the tail", len(pieces), err)
	}
	run := pieces[1]
	if off := cap(body) - cap(run); &body[off] != &run[0] || len(run) < len(messages) {
		t.Errorf("the run of %d bytes is not the body's own", len(run))
	}
}

// Any object: the pieces make valid JSON with the members re-emitting
// makes, in its order, and the same bytes from the parse's index as from
// a walk.
func FuzzCloudPieces(f *testing.F) {
	for _, s := range []string{
		`{"model":"m", "max_tokens" : 5,"stream":true,"mod\u0065l":"x","messages":[{"content":"a<b"}],"x":{"y":[1,2]}}`,
		" {\n\t\"stream\" : true ,\n \"a\" : 1 }\n",
		`{ "a":1 , "model":"m" }`,
		`{"model":"m"}`, `{}`, `[1]`, `{"a":}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		want, werr := spliced(body, []string{"model", "stream"}, twoSet)
		pieces, n, err := cloudPieces(body, nil, []string{"model", "stream"}, twoSet)
		if (err == nil) != (werr == nil) {
			t.Fatalf("pieces err %v, re-emitting err %v", err, werr)
		}
		if err != nil {
			return
		}
		got := bytes.Join(pieces, nil)
		if n != len(got) || !json.Valid(got) {
			t.Fatalf("pieces make %q (%d bytes said): not JSON", got, n)
		}
		var top jsonscan.Top
		if top.Index(body) == nil {
			indexed, _, err := cloudPieces(body, &top, []string{"model", "stream"}, twoSet)
			if err != nil || !bytes.Equal(bytes.Join(indexed, nil), got) {
				t.Fatalf("from the index %q (%v), from a walk %q", bytes.Join(indexed, nil), err, got)
			}
		}
		var g, w bytes.Buffer
		if json.Compact(&g, got) != nil || json.Compact(&w, want) != nil || g.String() != w.String() {
			t.Fatalf("pieces make %q, want the members of %q", got, want)
		}
	})
}
