package translate

import (
	"encoding/json"
	"testing"
)

// appendMarshaledString writes what json.Marshal writes for a string.
func TestAppendMarshaledString(t *testing.T) {
	for _, s := range []string{"", "plain", "a\"b\\c", "<p>&amp;</p>", "\b\f\n\r\t\x00\x1f\x7f", "é ü 日本 🌊",
		"\u2028\u2029", "bad \xff\xfe utf8 \xe2\x82", "tail\xc3"} {
		want, _ := json.Marshal(s)
		if got := appendMarshaledString(nil, s); string(got) != string(want) {
			t.Errorf("%q: got %s, want %s", s, got, want)
		}
		if got := appendMarshaledString(nil, []byte(s)); string(got) != string(want) {
			t.Errorf("%q as bytes: got %s, want %s", s, got, want)
		}
	}
}

// withStreamMember decodes to the members the map's way gives.
func TestWithStreamMember(t *testing.T) {
	for _, body := range []string{`{}`, ` { "contents" : [ {"parts":[{"text":"<a> & \u2028 é"}]} ] , "stream":false } `,
		`{"generationConfig":{"maxOutputTokens":1024},"contents":[{"role":"user","parts":[{"text":"x"}]}]}`} {
		out, ok := withStreamMember([]byte(body))
		if !ok {
			t.Fatalf("%s: not marked", body)
		}
		var got, want map[string]json.RawMessage
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		_ = json.Unmarshal([]byte(body), &want)
		want["stream"] = json.RawMessage("true")
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		if string(g) != string(w) {
			t.Errorf("%s: got %s, want %s", body, g, w)
		}
	}
	for _, body := range []string{`null`, `[1]`, `{"a":1,"a":2}`, `{"a":1,"A":2}`, `{"\u0061":1}`, `{"a":1`} {
		if _, ok := withStreamMember([]byte(body)); ok {
			t.Errorf("%s: marked, not left to the map's way", body)
		}
	}
}
