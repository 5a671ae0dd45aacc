package jsonscan

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// The scanner's idea of valid JSON is encoding/json's, and it decodes
// strings the same way.
func TestJSONScanner(t *testing.T) {
	for _, s := range []string{
		`{}`, `[]`, ` {"a" : [1, -2.5e+3, true, false, null, "x\u00e9\n"] } `, `0`, `-0`, `1.`, `01`, `.5`, `1e`, `"\x"`, `"a`,
		`{"a":1,}`, `[1,]`, `{"a"}`, `nul`, `"\ud83d\ude00"`, `"\ud83d"`, `"\ud83dx"`, `"` + "\x01" + `"`, "\"\xff\"", `[1 2]`, `{"a":1 "b":2}`,
		strings.Repeat("[", 10000) + strings.Repeat("]", 10000), strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	} {
		if got, want := Valid([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Errorf("jsonValid(%.40q) = %v, want %v", s, got, want)
		}
	}
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{{"12", 12, true}, {"-3", -3, true}, {"1.9", 1, true}, {"2e3", 2000, true}, {"x", 0, false}, {"99999999999999999999", 0, false}} {
		if got, ok := Int([]byte(tc.in)); got != tc.want || ok != tc.ok {
			t.Errorf("jsonInt(%q) = %d %v, want %d %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func FuzzJSONScanner(f *testing.F) {
	for _, s := range []string{
		`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}]}`,
		`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}]}`,
		`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[],"usage":{"prompt_tokens":30,"completion_tokens":12,"total_tokens":42,"prompt_tokens_details":{"cached_tokens":20}}}`,
		`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":100,"cache_read_input_tokens":2000,"output_tokens":1}}}`,
		`"\ud83d\ude00 \u00e9 \ud800"`, `[1,{"a":null}]`, `{"a":1e5}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		valid := Valid(b)
		if valid != json.Valid(b) {
			t.Fatalf("jsonValid(%q) = %v, encoding/json says %v", b, valid, !valid)
		}
		if !valid {
			return
		}
		i := SkipSpace(b, 0)
		if b[i] == '"' {
			var want string
			if err := json.Unmarshal(b, &want); err != nil {
				t.Fatal(err)
			}
			got := AppendString(nil, bytes.TrimSpace(b))
			if string(got) != want && !(!utf8.Valid(got) || !utf8.ValidString(want)) {
				t.Fatalf("decoded %q, encoding/json %q", got, want)
			}
		}
	})
}
