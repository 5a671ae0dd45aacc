package translate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
)

// memberBodies are objects (and not) whose members objectMembers reads:
// repeated keys, keys that differ in case, escaped and non-ASCII keys (the
// map's way), spaces, every kind of value, invalid JSON and other values.
var memberBodies = []string{
	`{}`, ` { } `, `{"model":"m","stream":true,"max_tokens":5}`, `{"b":1,"a":2,"b":3}`, `{"a":1,"A":2}`,
	`{"a":{"x":[1,2,{"y":null}]},"c":"s\"q","b":[ ]}`, "\t{\n\"a\" : 1 ,\"b\":\"x\"}\n",
	`{"mod\u0065l":"m","model":"n"}`, `{"é":1,"e":2}`, `{"a\\b":1}`, `{"\ud800":1,"\ufffd":2}`, "{\"\xff\":1}",
	`{"a":1,}`, `{"a":1`, `{"a" 1}`, `{"a":01}`, `[1,2]`, `"s"`, `null`, `5`, ``, `{"a":1}x`, `{"a":1} {}`,
	`{"a":"` + string([]byte{0x01}) + `"}`, `{"tools":[{"type":"custom"}],"tools":null}`,
}

// objectMembers reads what json.Unmarshal into a map reads, in key order,
// and fails as it does.
func TestObjectMembers(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 59))
	bodies := append([]string(nil), memberBodies...)
	keys := []string{`"a"`, `"b"`, `"A"`, `"model"`, `"a\u0062"`, `"é"`, `"z"`}
	vals := []string{`1`, `"x"`, `null`, `{}`, `[ ]`, `{"k":[1]}`, `true`, `""`, `-0.5e3`}
	for range 2000 {
		var b bytes.Buffer
		b.WriteString("{")
		for i := range r.IntN(6) {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "%s%s:%s", []string{"", " "}[r.IntN(2)], keys[r.IntN(len(keys))], vals[r.IntN(len(vals))])
		}
		b.WriteString("}")
		bodies = append(bodies, b.String())
	}
	for _, body := range bodies {
		var want map[string]json.RawMessage
		wantErr := json.Unmarshal([]byte(body), &want)
		var buf [2]member
		got, err := objectMembers([]byte(body), buf[:0])
		if fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Fatalf("%q: error %v, want %v", body, err, wantErr)
		}
		if len(got) != len(want) {
			t.Fatalf("%q: %d members, want %d", body, len(got), len(want))
		}
		for i, m := range got {
			if i > 0 && string(got[i-1].key) >= string(m.key) {
				t.Fatalf("%q: keys out of order: %q, %q", body, got[i-1].key, m.key)
			}
			if v, ok := want[string(m.key)]; !ok || !bytes.Equal(v, m.val) {
				t.Fatalf("%q: %q is %q, want %q", body, m.key, m.val, v)
			}
		}
	}
}

// unsetCompact is unsetValue(compactJSON(v)).
func TestUnsetCompact(t *testing.T) {
	for _, v := range []string{`null`, `false`, `true`, `""`, `" "`, `{}`, `{ }`, "[\n]", `[ 1 ]`, `{"a":1}`, `0`, ` null `, ` [ ] `, `"{}"`} {
		if got, want := unsetCompact(json.RawMessage(v)), unsetValue(compactJSON(json.RawMessage(v))); got != want {
			t.Errorf("%q: %v, want %v", v, got, want)
		}
	}
}

// stringContent's text is json.Unmarshal's, with or without an escape,
// invalid UTF-8 or a control character; rawString's is its as well.
func TestStringContentDecodes(t *testing.T) {
	for _, raw := range []string{`"plain"`, `""`, `"é 日本 😀"`, `"a\nb"`, `"\u00e9"`, "\"\xff\xfe\"", "\"a\x01\"", `"\ud800"`, `"x" `, `"unterminated`, `"a"b"`, "\"\u2028\""} {
		blocks, isString, err := stringContent(json.RawMessage(raw))
		var want string
		wantErr := json.Unmarshal([]byte(raw), &want)
		if !isString || fmt.Sprint(err) != fmt.Sprint(wantErr) || err == nil && (len(blocks) != 1 || blocks[0].Text != want) {
			t.Errorf("%q: %v %v %v, want %q %v", raw, blocks, isString, err, want, wantErr)
		}
		if wantErr == nil && rawString([]byte(raw)) != jsonscan.Unquote([]byte(raw)) {
			t.Errorf("%q: rawString %q, want %q", raw, rawString([]byte(raw)), jsonscan.Unquote([]byte(raw)))
		}
	}
}

// decodeAnthropicMessage reads what json.Unmarshal reads, and fails as it
// does: roles spelled in any case (or folded: the long s), repeated
// members, escaped and null roles, other values.
func TestDecodeAnthropicMessage(t *testing.T) {
	for _, raw := range []string{
		`{"role":"user","content":"hi"}`, `{"content":[{"type":"text","text":"x"}],"role":"assistant"}`, `{"role":"system"}`,
		`{"ROLE":"user","Content":null}`, `{"role":"user","role":"assistant","content":1,"content":"2"}`, `{"rol\u0065":"user"}`,
		`{"role":"us\u0065r"}`, `{"role":null,"content":"x"}`, `{"role":5}`, `{"role":"other","extra":{"a":[1]}}`, `{"conten\u017ft":"x","role":"user"}`,
		`{}`, `null`, `[]`, `"user"`, `{"role":"user","content":"x"} `, " {\"role\" : \"user\" , \"content\" : [ ] }", `{"role":"` + "\xff" + `"}`,
	} {
		var want anthropicMessageIn
		wantErr := json.Unmarshal([]byte(raw), &want)
		got, err := decodeAnthropicMessage(json.RawMessage(raw))
		if fmt.Sprint(err) != fmt.Sprint(wantErr) || got.Role != want.Role || !bytes.Equal(got.Content, want.Content) {
			t.Errorf("%s: %q %s %v, want %q %s %v", raw, got.Role, got.Content, err, want.Role, want.Content, wantErr)
		}
	}
}
