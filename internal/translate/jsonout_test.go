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
